"""A judge run through the platform (issue 25, "Run"): settings, prompt versions, the job,
the cache and the key, against a loopback OpenAI-compatible server
(``tests/factories/judge_server.py``), on a small study of each mode.

Expected values are worked by hand from the studies the factories build: the number of
questions a mode asks (captions, or pairs), the replies the script gives, and the error
texts ``annotation/judges/client.py`` documents.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import TestCase
from django.urls import reverse

from annotation.models import (
    Caption,
    Image,
    Item,
    Job,
    Judge,
    JudgeAnswer,
    JudgeCacheEntry,
    JudgeEndpoint,
    JudgeFailure,
    JudgePrompt,
)
from annotation.modes import get_mode
from annotation.services.judge_endpoints import judge_endpoint_save
from annotation.services.judge_runs import (
    judge_prompt_save,
    judge_run_request,
)
from annotation.tasks import enqueue
from tests.factories.arena import arena_study
from tests.factories.context import context_study
from tests.factories.humanr import humanr_study
from tests.factories.judge_server import KEY, fake_judge, judge_on_loopback  # noqa: F401
from tests.factories.spans import spans_study
from tests.factories.thumb import thumb_study
from tests.factories.vicr import vicr_study

# The fake judge listens on the loopback, which the deployment must list to be reached.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("judge_on_loopback")]

#: A valid reply per mode, in the form each mode's default prompt asks for (VICR and
#: arena also take their bare forms).
REPLIES = {
    "thumb": '```json\n{"precision": 4, "recall": 3}\n```',
    "vicr": "4",
    "humanr": 'Here is my answer: {"raw": 3}',
    "arena": "a",
    "spans": '{"spans": [], "score": 80}',
}
SCORES = {
    "thumb": {"P": 4.0, "R": 3.0, "Total": 3.5},
    "vicr": {"rating": 4.0},
    "humanr": {"choice": 0.0},  # 3 < 5: the caption shown first
    "arena": {"choice": 0.0},
    "spans": {"score": 80.0},
}


def write_images(study) -> dict[int, bytes]:
    """A distinct file per image at its display path; caption id -> the bytes sent."""
    root = Path(settings.MEDIA_ROOT)
    data = {}
    for image in Image.objects.filter(study=study):
        path = root / image.display
        path.parent.mkdir(parents=True, exist_ok=True)
        content = b"\x89PNG\r\n\x1a\n" + f"image {image.pk}".encode()
        path.write_bytes(content)
        data[image.pk] = content
    return {c.pk: data[c.image_id] for c in Caption.objects.filter(study=study)}


def _captions_alone(study):
    return {(c.pk, None) for c in Caption.objects.filter(study=study, purpose="study")}


def _game_pairs(study):
    return {(i.spec["caption_id"], None) for i in Item.objects.filter(study=study, kind="game")}


def _battles(study):
    return {
        (i.spec["caption_a"], i.spec["caption_b"])
        for i in Item.objects.filter(study=study, kind="battle")
    }


def _comparisons(study):
    return {
        (t["reference_caption_id"], t["other_caption_id"])
        for i in Item.objects.filter(study=study)
        for t in i.spec["trials"]
        if t["kind"] == "comparison"
    }


def _in_context(study):
    return {(i.spec["caption"], i.spec["context"]) for i in Item.objects.filter(study=study)}


#: Per mode: a small study, and its questions worked out from the rows rather than from
#: ``Judging.units()`` (THumB and spans ask about each study caption, VICR each game pair,
#: the arena each battle, HUMANr each comparison trial).
CASES = {
    "thumb": (lambda researcher, make_study: thumb_study(make_study), _captions_alone),
    "vicr": (lambda researcher, make_study: vicr_study(researcher, game=4), _game_pairs),
    "humanr": (
        lambda researcher, make_study: humanr_study(
            researcher, images=3, humans=2, systems=("GIT",)
        ),
        _comparisons,
    ),
    "arena": (lambda researcher, make_study: arena_study(researcher, images=2), _battles),
    "spans": (lambda researcher, make_study: spans_study(researcher, images=2), _captions_alone),
    # Each description in each context of its image (the context is the unit's second id).
    "context": (lambda researcher, make_study: context_study(researcher, images=1), _in_context),
}


def make(mode, researcher, make_study):
    return CASES[mode][0](researcher, make_study)


def expected_units(study) -> set[tuple[int, int | None]]:
    return CASES[study.mode][1](study)


def save_endpoint(study, url, **extra):
    options = {"name": "toy-vlm", "base_url": url, "model": "judge-7b", "api_key": KEY}
    options.update(extra)
    # Saved as the owner, who runs it (test_judge_key_spending.py: only the saver may).
    return judge_endpoint_save(study=study, by=study.owner, **options)


def run(study, researcher) -> Job:
    # No broker in tests: the job runs eagerly when the request's transaction commits.
    with TestCase.captureOnCommitCallbacks(execute=True):
        job = enqueue(judge_run_request(study=study, by=researcher))
    job.refresh_from_db()
    return job


@pytest.mark.parametrize("mode", ["thumb", "vicr", "humanr", "arena", "spans"])
def test_a_judge_runs_over_a_study_of_each_mode(mode, researcher, make_study):
    study = make(mode, researcher, make_study)
    images = write_images(study)
    units = expected_units(study)
    assert units, "the factory's study asks something"
    with fake_judge(lambda prompt, n: REPLIES[mode]) as server:
        save_endpoint(study, server.url)
        job = run(study, researcher)
        assert job.status == Job.Status.DONE, job.error
        assert server.total == len(units)
        judge = Judge.objects.get(study=study)
        assert (judge.name, judge.model, judge.prompt_version, judge.kind) == (
            "toy-vlm",
            "judge-7b",
            "v1",
            Judge.Kind.VLM,
        )
        answers = list(JudgeAnswer.objects.filter(judge=judge))
        assert {(a.caption_id, a.caption_b_id) for a in answers} == units
        assert all(a.scores == SCORES[mode] and a.raw_reply == REPLIES[mode] for a in answers)
        # The request: the model, the bearer key, the prompt holding the caption text(s)
        # and the unit's own image as a data URL.
        texts = dict(Caption.objects.filter(study=study).values_list("pk", "text"))
        for body, headers in zip(server.bodies, server.headers, strict=True):
            assert body["model"] == "judge-7b" and body["temperature"] == 0.0
            assert headers["Authorization"] == f"Bearer {KEY}"
            part, image = body["messages"][-1]["content"]
            prompt = part["text"]
            # (Factories give several images the same caption text: any of theirs.)
            shown = [u for u in units if all(texts[c] in prompt for c in u if c)]
            sent = image["image_url"]["url"].split(";base64,")[1]
            assert sent in {base64.b64encode(images[u[0]]).decode() for u in shown}
        result = job.result
        assert result["answered"] == len(units) and result["failed"] == 0
        assert result["prompt_tokens"] == 100 * len(units)
        assert result["completion_tokens"] == 2 * len(units)
        # A rerun of the same judge asks nothing: every unit is answered already.
        server.reset()
        again = run(study, researcher)
        assert again.status == Job.Status.DONE and server.total == 0
        assert again.result["already_stored"] == len(units)
        assert JudgeAnswer.objects.filter(judge=judge).count() == len(units)


def test_the_cache_answers_a_second_judge_with_zero_requests(researcher):
    study = vicr_study(researcher, game=4)
    write_images(study)
    with fake_judge(lambda prompt, n: "3") as server:
        save_endpoint(study, server.url, price_prompt_per_1k=0.5, price_completion_per_1k=2.0)
        first = run(study, researcher)
        assert server.total == 4 and first.result["cached"] == 0
        # 4 x 100 prompt tokens at 0.5 per 1k + 4 x 2 completion tokens at 2.0 per 1k.
        assert first.result["cost"] == pytest.approx(0.4 * 0.5 + 0.008 * 2.0)
        assert JudgeCacheEntry.objects.filter(study=study).count() == 4
        server.reset()
        # Another judge name, same model and prompt version: the cache answers.
        save_endpoint(study, server.url, name="toy-vlm-again")
        second = run(study, researcher)
        assert server.total == 0
        assert second.result["cached"] == 4 and second.result["answered"] == 4
        assert second.result["cost"] == 0
        assert Judge.objects.get(name="toy-vlm-again").answers.count() == 4
        # A new prompt version is a new cache key: asked again.
        judge_prompt_save(study=study, text="Rate {caption} from 1 to 5.", by=researcher)
        third = run(study, researcher)
        assert server.total == 4 and third.result["prompt_version"] == "v2"


def vicr_script(texts):
    """Per game caption, one documented misbehaviour (hand-picked, see the test)."""

    def script(prompt, n):
        if texts[0] in prompt:
            return "I think it is quite good"  # malformed: no rating
        if texts[1] in prompt:
            return "9"  # out of range on a 5-level scale
        if texts[2] in prompt:
            return ("sleep", 1.5, "4")  # slower than the 0.5 s timeout, every time
        if texts[3] in prompt:
            return (
                (429, {"error": {"message": "slow down"}}, [("Retry-After", "1")])
                if n == 1
                else "2"
            )
        if texts[4] in prompt:
            return (500, {"error": {"message": "boom"}}) if n == 1 else "5"
        return (500, {"error": {"message": "boom"}})  # texts[5]: always

    return script


def test_each_misbehaviour_gives_its_documented_outcome(researcher):
    study = vicr_study(researcher, game=6)
    write_images(study)
    game = list(Caption.objects.filter(study=study, purpose="study").order_by("id"))
    texts = [c.text for c in game]
    with fake_judge(vicr_script(texts)) as server:
        save_endpoint(study, server.url, timeout=0.5, max_retries=1)
        job = run(study, researcher)
        assert job.status == Job.Status.DONE, job.error
        assert job.result["answered"] == 2 and job.result["failed"] == 4
        answers = {a.caption_id: a.answer["rating"] for a in JudgeAnswer.objects.all()}
        assert answers == {game[3].pk: 2, game[4].pk: 5}  # after a 429 and after a 500
        failures = {f.caption_id: f for f in JudgeFailure.objects.filter(job=job)}
        assert set(failures) == {game[0].pk, game[1].pk, game[2].pk, game[5].pk}
        assert failures[game[0].pk].error.startswith("unusable reply: the reply holds no JSON")
        assert failures[game[0].pk].raw_reply == "I think it is quite good"
        assert failures[game[1].pk].error.startswith("unusable reply: ")
        assert "rating" in failures[game[1].pk].error.lower()
        assert failures[game[1].pk].raw_reply == "9"
        assert failures[game[2].pk].error == "timed out after 0.5 s (2 attempts)"
        assert failures[game[5].pk].error == "HTTP 500 (2 attempts)"
        assert server.requests[next(p for p in server.requests if texts[3] in p)] == 2
        listed = {f["caption"]: f["error"] for f in job.result["failures"]}
        assert listed[game[2].pk] == "timed out after 0.5 s (2 attempts)"
        # Only answers that passed the mode's check are cached: the out-of-range "9" is not.
        cached = set(JudgeCacheEntry.objects.values_list("item_key", flat=True))
        assert cached == {f"c{game[3].pk}", f"c{game[4].pk}"}
        # A rerun asks the four failed questions again, and nothing else.
        server.reset()
        again = run(study, researcher)
        asked = {c.pk for c in game if any(c.text in p for p in server.requests)}
        assert asked == {game[0].pk, game[1].pk, game[2].pk, game[5].pk}
        assert again.result["already_stored"] == 2


def test_a_wrong_key_fails_the_job_with_one_reason_and_stores_nothing(researcher, caplog):
    study = vicr_study(researcher, game=4)
    write_images(study)
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-Key0123456789abcdefXYZ"
    with fake_judge(lambda prompt, n: "4") as server:
        # One request at a time: the first 401 stops the run before a second is sent.
        save_endpoint(study, server.url, api_key=wrong, concurrency=1)
        job = run(study, researcher)
        assert server.total == 1
    assert job.status == Job.Status.FAILED
    assert job.error == (
        "The endpoint refused the API key (HTTP 401); check the key in the judge's settings."
    )
    assert not Judge.objects.exists() and not JudgeFailure.objects.exists()
    assert wrong not in caplog.text and wrong not in json.dumps(job.result)
    assert_not_stored(wrong)


def test_a_missing_image_fails_its_question_without_a_request(researcher):
    study = vicr_study(researcher, game=2)
    write_images(study)
    first = Caption.objects.filter(study=study, purpose="study").order_by("id").first()
    (Path(settings.MEDIA_ROOT) / first.image.display).unlink()
    with fake_judge(lambda prompt, n: "4") as server:
        save_endpoint(study, server.url)
        job = run(study, researcher)
        assert server.total == 1
    failure = JudgeFailure.objects.get(job=job)
    assert (failure.caption_id, failure.error) == (first.pk, "the image file is missing")


@pytest.mark.parametrize("mode", ["humanr", "arena"])
def test_swap_and_repeats_ask_each_pair_both_ways_each_run(mode, researcher, make_study):
    study = make(mode, researcher, make_study)
    write_images(study)
    units = expected_units(study)
    with fake_judge(lambda prompt, n: REPLIES[mode]) as server:
        save_endpoint(study, server.url, swap=True, repeats=2, temperature=0.7)
        job = run(study, researcher)
        assert job.status == Job.Status.DONE, job.error
        assert server.total == len(units) * 2 * 2
        assert {b["temperature"] for b in server.bodies} == {0.7}
    rows = set(JudgeAnswer.objects.values_list("caption_id", "caption_b_id", "run"))
    both_ways = {(a, b) for a, b in units} | {(b, a) for a, b in units}
    assert rows == {(a, b, r) for a, b in both_ways for r in (0, 1)}


def test_the_default_prompt_is_version_one_and_edits_make_new_versions(researcher):
    study = vicr_study(researcher, game=2)
    default = get_mode("vicr").judging.default_prompt(study)
    assert "{caption}" in default and "Objects are incorrectly identified" in default
    write_images(study)
    with fake_judge(lambda prompt, n: "4") as server:
        save_endpoint(study, server.url)
        run(study, researcher)
        prompt = server.bodies[0]["messages"][-1]["content"][0]["text"]
    assert JudgePrompt.objects.get(study=study, version=1).text == default
    assert "game caption" in prompt and "{caption}" not in prompt
    v2 = judge_prompt_save(study=study, text='Rate {caption}. Reply {"rating": n}.', by=researcher)
    same = judge_prompt_save(study=study, text='Rate {caption}. Reply {"rating": n}.')
    assert (v2.version, same.pk) == (2, v2.pk)
    with pytest.raises(Exception, match=r"must contain \{caption\}"):
        judge_prompt_save(study=study, text="Rate the caption.")
    assert JudgePrompt.objects.filter(study=study).count() == 2


def test_pair_prompts_need_both_placeholders(researcher):
    study = arena_study(researcher, images=2)
    with pytest.raises(Exception, match=r"\{caption_a\} and \{caption_b\}"):
        judge_prompt_save(study=study, text="Which is better: {caption_a}?")


# ---------------------------------------------------------------------- the key stays secret


def assert_not_stored(secret: str) -> None:
    """No table of the database holds ``secret`` in any column's text."""
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                assert secret not in repr(row), f"{table} holds the key in plain text"


def test_the_key_is_never_shown_exported_logged_or_stored(researcher, client, caplog):
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=3)
    write_images(study)
    client.force_login(researcher)
    with fake_judge(lambda prompt, n: "4") as server:
        response = client.post(
            reverse("study_judge_settings", args=[study.pk]),
            {
                "name": "toy-vlm",
                "base_url": server.url,
                "model": "judge-7b",
                "api_key": KEY,
                "concurrency": "16",
                "timeout": "30",
                "max_retries": "2",
                "temperature": "0",
                "repeats": "1",
                "price_prompt_per_1k": "0",
                "price_completion_per_1k": "0",
            },
        )
        assert response.status_code == 302
        with TestCase.captureOnCommitCallbacks(execute=True):
            response = client.post(reverse("study_judge_run", args=[study.pk]))
        assert response.status_code == 302
        assert server.total == 3
    row = JudgeEndpoint.objects.get(study=study)
    assert row.api_key_masked == "sk-...cdef" and row.api_key_token
    pages = [
        client.get(reverse("study_judges", args=[study.pk])),
        client.get(reverse("api_study_judge_runs", args=[study.pk])),
        client.get(reverse("api_study_judges", args=[study.pk])),
        client.get(reverse("job_status", args=[Job.objects.get(kind="judge").pk])),
    ]
    for page in pages:
        assert page.status_code == 200
        assert KEY not in page.content.decode()
    assert "sk-...cdef" in pages[0].content.decode()
    for table in ("judgments", "judges"):
        with TestCase.captureOnCommitCallbacks(execute=True):
            client.post(reverse("study_export", args=[study.pk]), {"table": table})
    exports = Job.objects.filter(kind=Job.Kind.EXPORT, status=Job.Status.DONE)
    assert exports.count() == 2
    written = [Path(settings.CAPEVAL_EXPORT_DIR) / j.result_file for j in exports]
    assert all(p.is_file() for p in written)
    assert "toy-vlm" in written[0 if "judges" in written[0].name else 1].read_text()
    files = written + [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in caplog.text
    assert_not_stored(KEY)


# ---------------------------------------------------------------------- the page and the API

GOOD = {
    "name": "toy-vlm",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "judge-7b",
    "concurrency": "16",
    "timeout": "30",
    "max_retries": "2",
    "temperature": "0",
    "repeats": "1",
    "price_prompt_per_1k": "0",
    "price_completion_per_1k": "0",
}


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"base_url": "ftp://example.org/v1"}, "base_url", "http:// or https://"),
        ({"concurrency": "1000"}, "concurrency", "from 1 to 64"),
        ({"timeout": "0.1"}, "timeout", "from 0.5 to 600"),
        ({"temperature": "nan"}, "temperature", "Enter a number."),
        ({"repeats": "0"}, "repeats", "from 1 to 10"),
        ({"model": "judge\u202e7b"}, "model", "model"),
        ({"api_key": "sk-has a space-1234567890"}, "api_key", "no spaces"),
    ],
)
def test_bad_settings_are_refused_by_the_page_and_nothing_is_saved(
    change, field, message, researcher, client
):
    study = vicr_study(researcher, game=2)
    client.force_login(researcher)
    data = {**GOOD, "api_key": "sk-secret-abcdefghijklmnop", **change}
    response = client.post(reverse("study_judge_settings", args=[study.pk]), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page
    assert f'id="endpoint_{field}"' in page
    assert data["api_key"] not in page  # never rendered back, even on a refusal
    assert not JudgeEndpoint.objects.exists()


def test_the_settings_keep_the_key_when_left_empty_and_clear_it_on_request(researcher, client):
    study = vicr_study(researcher, game=2)
    client.force_login(researcher)
    url = reverse("study_judge_settings", args=[study.pk])
    client.post(url, {**GOOD, "api_key": "sk-first-abcdefghijkl1234"})
    token = JudgeEndpoint.objects.get().api_key_token
    assert client.post(url, {**GOOD, "model": "judge-13b"}).status_code == 302
    row = JudgeEndpoint.objects.get()
    assert (row.model, row.api_key_token, row.api_key_masked) == ("judge-13b", token, "sk-...1234")
    client.post(url, {**GOOD, "clear_key": "on"})
    row.refresh_from_db()
    assert (row.api_key_token, row.api_key_masked) == ("", "")


def test_a_member_who_repoints_the_endpoint_never_receives_the_owners_key(
    researcher, make_user, client
):
    """A rival researcher the study is shared with changes the base URL to their own
    server, leaves the key field empty (which keeps a stored key) and runs the judge: the
    owner's key must not travel to the new address."""
    study = vicr_study(researcher, game=2)
    write_images(study)
    rival = make_user("rival", researcher=True)
    study.members.add(rival)
    save_endpoint(study, "http://127.0.0.1:9/v1")  # the owner's key, for the owner's server
    client.force_login(rival)
    with fake_judge(lambda prompt, n: "4", key="whatever-they-get") as theirs:
        data = {**GOOD, "base_url": theirs.url}
        response = client.post(reverse("study_judge_settings", args=[study.pk]), data)
        assert response.status_code == 302
        with TestCase.captureOnCommitCallbacks(execute=True):
            client.post(reverse("study_judge_run", args=[study.pk]))
    sent = [value for headers in theirs.headers for value in headers.values()]
    assert not any(KEY in value for value in sent)
    row = JudgeEndpoint.objects.get()
    assert (row.base_url, row.api_key_token, row.api_key_masked) == (theirs.url, "", "")


def test_the_prompt_editor_shows_the_current_version_and_saves_new_ones(researcher, client):
    study = arena_study(researcher, images=2)
    client.force_login(researcher)
    page = client.get(reverse("study_judges", args=[study.pk])).content.decode()
    assert "Which one describes the image better" in page  # the mode's default
    url = reverse("study_judge_prompt", args=[study.pk])
    refused = client.post(url, {"text": "Which is better, {caption_a}?"})
    assert refused.status_code == 400
    assert "{caption_a} and {caption_b}" in refused.content.decode()
    assert not JudgePrompt.objects.exists()
    assert client.post(url, {"text": "A: {caption_a}\nB: {caption_b}\nWhich?"}).status_code == 302
    page = client.get(reverse("study_judges", args=[study.pk])).content.decode()
    assert "Prompt template v1" in page and "A: {caption_a}" in page


def test_a_run_without_an_endpoint_is_refused_and_queues_nothing(researcher, client):
    study = vicr_study(researcher, game=2)
    client.force_login(researcher)
    response = client.post(reverse("study_judge_run", args=[study.pk]))
    assert response.status_code == 409  # the study's state, not the request (issue 45)
    assert "endpoint settings first." in response.content.decode()
    assert not Job.objects.filter(kind=Job.Kind.JUDGE).exists()


def test_another_researcher_cannot_see_or_run_the_judge(researcher, other_researcher, client):
    study = vicr_study(researcher, game=2)
    save_endpoint(study, "http://127.0.0.1:9/v1")
    client.force_login(other_researcher)
    for name in ("study_judge_settings", "study_judge_prompt", "study_judge_run"):
        assert client.post(reverse(name, args=[study.pk]), GOOD).status_code == 404
    assert client.get(reverse("api_study_judge_runs", args=[study.pk])).status_code == 404
    assert JudgeEndpoint.objects.get().model == "judge-7b"
    assert not Job.objects.exists()


def test_the_run_button_answers_with_the_progress_fragment(researcher, client):
    study = vicr_study(researcher, game=3)
    write_images(study)
    client.force_login(researcher)
    with fake_judge(lambda prompt, n: "4") as server:
        save_endpoint(study, server.url)
        with TestCase.captureOnCommitCallbacks(execute=True):
            response = client.post(
                reverse("study_judge_run", args=[study.pk]), headers={"HX-Request": "true"}
            )
    job = Job.objects.get(kind=Job.Kind.JUDGE)
    html = response.content.decode()
    assert response.status_code == 200 and f'id="judge-job-{job.pk}"' in html
    poll = client.get(reverse("study_judge_job", args=[study.pk, job.pk])).content.decode()
    assert "3 answered, 0 failed" in poll and "Done" in poll


def test_the_api_starts_a_run_and_lists_it(researcher, client):
    study = vicr_study(researcher, game=3)
    write_images(study)
    client.force_login(researcher)
    url = reverse("api_study_judge_runs", args=[study.pk])
    with fake_judge(lambda prompt, n: "4") as server:
        save_endpoint(study, server.url)
        with TestCase.captureOnCommitCallbacks(execute=True):
            started = client.post(url)
        assert started.status_code == 202
        # A second run while one is pending is refused; this one already finished.
        listed = client.get(url).json()
    assert [r["id"] for r in listed] == [started.json()["id"]]
    assert listed[0]["status"] == "done" and listed[0]["result"]["answered"] == 3
    assert listed[0]["prompt_version"] == "v1"
    assert "api_key" not in listed[0]["settings"]
    assert listed[0]["settings"]["has_key"] is True


def test_a_failure_while_storing_leaves_nothing_half_written(researcher, monkeypatch):
    study = vicr_study(researcher, game=3)
    write_images(study)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full while writing the cache")

    # The cache rows are written after the answers and failures, in the same transaction.
    monkeypatch.setattr(JudgeCacheEntry.objects, "bulk_create", broken)
    with fake_judge(lambda prompt, n: "4") as server:
        save_endpoint(study, server.url)
        job = run(study, researcher)
        assert server.total == 3
    assert job.status == Job.Status.FAILED
    assert job.error == "disk full while writing the cache"
    assert not Judge.objects.exists() and not JudgeAnswer.objects.exists()
    assert not JudgeFailure.objects.exists() and not JudgeCacheEntry.objects.exists()
