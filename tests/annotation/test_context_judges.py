"""Judges of a context study know the context (issue 43): the context-aware prompt holds
the passage, the page's title and the domain, the context-free one only the description;
a run of each against a loopback chat server (``tests/factories/judge_server.py``) stores
one answer per description and context, each under its prompt version.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.models import Caption, Job, Judge, JudgeAnswer, JudgePrompt
from annotation.modes import get_mode
from annotation.modes.context.judging import CONTEXT_AWARE, CONTEXT_FREE
from annotation.services.judge_runs import judge_prompt_save
from annotation.services.judges import judges_report
from tests.annotation.test_judge_runs import run, save_endpoint, write_images
from tests.factories.context import CONTEXTS, DESCRIPTIONS, context_study
from tests.factories.judge_server import fake_judge, judge_on_loopback  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("judge_on_loopback")]

ANSWER = {"overall": 4, "imaginability": 3, "relevance": 5, "irrelevance": 2, "accuracy": 4}


@pytest.fixture
def study(researcher):
    return context_study(researcher, images=2)


def passages(study) -> dict[int, Caption]:
    return {c.pk: c for c in Caption.objects.filter(study=study, purpose="context")}


def test_the_context_aware_prompt_holds_the_context_and_the_free_one_does_not(study):
    judging = get_mode("context").judging
    versions = judging.prompt_versions(study)
    assert set(versions) == {CONTEXT_AWARE, CONTEXT_FREE}
    assert judging.default_prompt(study) == versions[CONTEXT_AWARE]
    aware, free = versions[CONTEXT_AWARE], versions[CONTEXT_FREE]
    for text in (aware, free):
        assert "{caption}" in text
        # Every question the judge answers, with its scale's words.
        for name in ANSWER:
            assert f'"{name}": <1-5>' in text
    assert "{context}" in aware and "{title}" in aware and "{domain}" in aware
    assert "{context}" not in free and "{title}" not in free and "{domain}" not in free
    # Filled per unit: the passage of that unit's context, nothing of another's.
    units = judging.units(study)
    fields = judging.prompt_fields(study, units)
    contexts = passages(study)
    assert len(units) == len(fields) == 2 * len(DESCRIPTIONS) * len(CONTEXTS)
    for _, caption, context in units:
        assert fields[(caption, context)]["context"] == contexts[context].raw_text
        assert fields[(caption, context)]["title"] == contexts[context].spec["title"]


def test_both_prompt_versions_run_and_store_an_answer_per_description_and_context(
    study, researcher
):
    write_images(study)
    contexts = passages(study)
    judging = get_mode("context").judging
    units = {(first, second) for _, first, second in judging.units(study)}
    with fake_judge(lambda prompt, n: "```json\n" + json.dumps(ANSWER) + "\n```") as server:
        save_endpoint(study, server.url)
        # v1: the default, context-aware prompt (saved at the first run).
        job = run(study, researcher)
        assert job.status == Job.Status.DONE, job.error
        assert job.result["answered"] == len(units) == 8
        aware_prompts = [body["messages"][-1]["content"][0]["text"] for body in server.bodies]
        # Each prompt holds one context (its domain, title and passage) and a description;
        # each context is asked about with each description (the images share texts).
        asked = []
        for prompt in aware_prompts:
            held = [x for x in CONTEXTS if x[3] in prompt]
            assert (
                len(held) == 1
                and held[0][2] in prompt
                and f"Domain: {held[0][1].lower()}" in prompt
            )
            shown = [d for d in DESCRIPTIONS.values() if f"Description: {d}" in prompt]
            assert len(shown) == 1
            asked.append((held[0][0], shown[0]))
        assert sorted(asked) == sorted(
            (x[0], d) for x in CONTEXTS for d in DESCRIPTIONS.values() for _ in range(2)
        )
        assert not any("{context}" in p or "{caption}" in p for p in aware_prompts)
        server.reset()
        # v2: the context-free prompt, saved from the mode's named versions.
        free = judging.prompt_versions(study)[CONTEXT_FREE]
        judge_prompt_save(study=study, text=free, by=researcher)
        job = run(study, researcher)
        assert job.status == Job.Status.DONE, job.error
        assert job.result["prompt_version"] == "v2" and job.result["answered"] == 8
        for body in server.bodies:
            prompt = body["messages"][-1]["content"][0]["text"]
            assert not any(c.raw_text in prompt for c in contexts.values())
    judges = {j.prompt_version: j for j in Judge.objects.filter(study=study)}
    assert set(judges) == {"v1", "v2"}
    for judge in judges.values():
        answers = JudgeAnswer.objects.filter(judge=judge)
        # One answer per description in each context: the same description twice.
        assert {(a.caption_id, a.caption_b_id) for a in answers} == units
        assert all(a.answer == ANSWER for a in answers)
        assert all(
            a.scores["overall (BLV)"] == a.scores["overall (sighted)"] == 4.0 for a in answers
        )
    # The alignment report lists both versions (no human has rated yet: nothing to
    # compare, test_mode_context_report.py compares a judge with each group).
    report = judges_report(study, resamples=20)
    assert {entry["prompt_version"] for entry in report["judges"]} == {"v1", "v2"}


def test_the_judge_page_offers_both_prompts_as_versions(study, researcher, client):
    client.force_login(researcher)
    page = client.get(reverse("study_judges", args=[study.pk])).content.decode()
    assert "Save the mode's context-aware prompt as a new version" in page
    assert "Save the mode's context-free prompt as a new version" in page
    free = get_mode("context").judging.prompt_versions(study)[CONTEXT_FREE]
    saved = client.post(reverse("study_judge_prompt", args=[study.pk]), {"text": free})
    assert saved.status_code in (200, 302)
    assert JudgePrompt.objects.get(study=study).text == free.replace("\r\n", "\n")


def test_a_reply_outside_the_scale_is_refused_like_a_persons(study):
    judging = get_mode("context").judging
    caption = Caption.objects.filter(study=study, purpose="study").first()
    context = Caption.objects.filter(study=study, purpose="context").first()
    shown = [caption, context]
    assert judging.clean_answer(study, shown, {k: str(v) for k, v in ANSWER.items()}) == ANSWER
    for bad in ({**ANSWER, "overall": 6}, {**ANSWER, "accuracy": True}, {"overall": 3}):
        with pytest.raises(Exception) as refused:
            judging.clean_answer(study, shown, bad)
        assert getattr(refused.value, "field", None) == "answer"
    with pytest.raises(Exception) as alone:
        judging.clean_answer(study, [caption], ANSWER)
    assert alone.value.field == "item_id"
