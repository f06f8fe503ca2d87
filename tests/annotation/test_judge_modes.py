"""Each mode's judging hook: a judge's answer checked by the mode's own rules and turned
into the score the mode's report gives people; and a pair mode end to end (the arena, from
a battle log) with the two biased judges of the issue."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.errors import ServiceError
from annotation.models import Caption, Item, JudgeAnswer, Judgment, Study
from annotation.modes import get_mode
from annotation.registry import MODES

pytestmark = pytest.mark.django_db


def _caption(text="a dog runs on the grass"):
    return Caption(pk=1, text=text)


def test_every_protocol_takes_a_judge():
    assert {
        name: MODES[name].judging.unit for name in ("thumb", "vicr", "humanr", "arena", "spans")
    } == {
        "thumb": "caption",
        "vicr": "caption",
        "humanr": "pair",
        "arena": "pair",
        "spans": "caption",
    }


def test_thumb_answer_is_the_stage_one_form(make_study):
    study = make_study("thumb")
    judging = get_mode("thumb").judging
    answer = judging.clean_answer(study, [_caption()], {"precision": 4, "recall": 3})
    assert judging.scores(answer) == {"P": 4.0, "R": 3.0, "Total": 3.5}
    penalised = judging.clean_answer(
        study, [_caption()], {"precision": 5, "recall": 5, "conciseness": 0.5}
    )
    assert judging.scores(penalised)["Total"] == 4.5
    with pytest.raises(ServiceError, match="precision"):
        judging.clean_answer(study, [_caption()], {"precision": 7, "recall": 3})
    with pytest.raises(ServiceError):
        judging.clean_answer(study, [_caption()], [4, 3])


def test_vicr_answer_follows_the_study_scale(make_study):
    judging = get_mode("vicr").judging
    five = make_study("vicr")
    assert judging.scores(judging.clean_answer(five, [_caption()], {"rating": "5"})) == {
        "rating": 5.0
    }
    four = make_study("vicr", settings={"scale_levels": 4}, name="four")
    with pytest.raises(ServiceError, match="1 to 4"):
        judging.clean_answer(four, [_caption()], {"rating": 5})
    assert judging.scale(four) == {"rating": (1, 4)}
    for bad in (True, 2.5, "٣", None):
        with pytest.raises(ServiceError):
            judging.clean_answer(five, [_caption()], {"rating": bad})


def test_humanr_slider_is_a_choice_between_the_shown_captions(make_study):
    study = make_study("humanr")
    judging = get_mode("humanr").judging
    pair = [_caption(), Caption(pk=2, text="a cat")]
    choices = [judging.scores(judging.clean_answer(study, pair, {"raw": r})) for r in (1, 5, 9)]
    assert choices == [{"choice": 0.0}, {"choice": 0.5}, {"choice": 1.0}]
    with pytest.raises(ServiceError, match="1 .* to 9"):
        judging.clean_answer(study, pair, {"raw": 10})


def test_arena_outcome_is_one_of_the_four(make_study):
    study = make_study("arena")
    judging = get_mode("arena").judging
    pair = [_caption(), Caption(pk=2, text="a cat")]
    scores = {
        o: judging.scores(judging.clean_answer(study, pair, {"outcome": o}))["choice"]
        for o in ("a", "b", "tie", "bothbad")
    }
    assert scores == {"a": 0.0, "b": 1.0, "tie": 0.5, "bothbad": 0.5}
    with pytest.raises(ServiceError, match="Choose one of"):
        judging.clean_answer(study, pair, {"outcome": "model_a"})


def test_spans_answer_is_checked_against_the_caption_text(make_study):
    study = make_study("spans")
    judging = get_mode("spans").judging
    text = "a dog runs on the grass"
    mark = {"start": 2, "end": 5, "severity": "major", "category": "object", "text": "dog"}
    answer = judging.clean_answer(study, [_caption(text)], {"spans": [mark], "score": 40})
    assert answer["spans"][0]["text"] == "dog" and judging.scores(answer) == {"score": 40.0}
    with pytest.raises(ServiceError):  # the offsets do not point at the text sent
        judging.clean_answer(
            study, [_caption(text)], {"spans": [{**mark, "text": "cat"}], "score": 40}
        )
    with pytest.raises(ServiceError, match="0 to 100"):
        judging.clean_answer(study, [_caption(text)], {"spans": [], "score": 101})


# ---------------------------------------------------------------------- arena end to end

SYSTEMS = {
    "alpha": "a short one",
    "beta": "a somewhat longer caption here",
    "gamma": "mid size text",
}


@pytest.fixture
def arena(researcher, tmp_path) -> Study:
    """Two images, three systems, every pair battled by three people (a log)."""
    battles = []
    for image in ("i1", "i2"):
        for a, b in (("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")):
            for judge, winner in zip(
                ("p1", "p2", "p3"), ("model_a", "model_a", "model_b"), strict=True
            ):
                battles.append(
                    {"model_a": a, "model_b": b, "winner": winner, "judge": judge,
                     "caption_a": f"{SYSTEMS[a]} {image}", "caption_b": f"{SYSTEMS[b]} {image}",
                     "image": image}
                )  # fmt: skip
    log = tmp_path / "arena.jsonl"
    log.write_text("\n".join(json.dumps(b) for b in battles) + "\n")
    call_command(
        "import_ratings", str(log), "--format", "battles", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    return Study.objects.get(owner=researcher)


def _pairs(study):
    ids = {
        (c.image.name, c.system): c.pk
        for c in Caption.objects.filter(study=study).select_related("image")
    }
    return [
        (image, ids[(image, a)], ids[(image, b)])
        for image in ("i1", "i2")
        for a, b in (("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma"))
    ]


def _post(api, study, name, rows):
    return api.post(
        reverse("api_study_judges", args=[study.pk]),
        {"judge": name, "lines": "\n".join(json.dumps(r) for r in rows)},
        format="json",
    )


def test_arena_judges_position_and_length_bias_through_the_api(arena, researcher):
    human_judgments = Judgment.objects.filter(study=arena).count()
    api = APIClient()
    api.force_login(researcher)
    left = [
        {"caption_a": x, "caption_b": y, "answer": {"outcome": "a"}}
        for _, a, b in _pairs(arena)
        for x, y in ((a, b), (b, a))
    ]
    assert _post(api, arena, "always-left", left).status_code == 201
    lengths = {c.pk: len(c.text.split()) for c in Caption.objects.filter(study=arena)}
    longer = [
        {"caption_a": a, "caption_b": b, "answer": {"outcome": "a" if lengths[a] > lengths[b]
                                                      else "b"}}
        for _, a, b in _pairs(arena)
    ]  # fmt: skip
    assert _post(api, arena, "longer", longer).status_code == 201
    # By image and system names, as a release without caption ids gives them.
    named = [{"image": "i1", "system_a": "alpha", "system_b": "beta", "answer": {"outcome": "tie"}}]
    assert _post(api, arena, "named", named).status_code == 201

    report = api.get(reverse("api_study_judges", args=[arena.pk])).json()
    assert report["unit"] == "pair" and "split evenly" in report["tie_rule"]
    by_name = {j["name"]: j["pairs"] for j in report["judges"]}
    position = by_name["always-left"]["position_bias"]
    assert position["flip_rate"] == 1.0 and position["n"] == 6
    assert position["first_position_rate"] == 1.0
    assert by_name["longer"]["length_bias"]["judge"]["longer_wins"] == 1.0
    assert by_name["named"]["n_pairs"] == 1 and by_name["named"]["judge_ties"] == 1
    # The humans (p1, p2 for the caption shown first, p3 against) prefer the first system
    # of every pair: the longer-caption judge agrees on the pairs where the first is longer.
    expected = sum(1 for _, a, b in _pairs(arena) if lengths[a] > lengths[b]) / len(_pairs(arena))
    assert by_name["longer"]["accuracy"]["value"] == pytest.approx(expected)
    assert Judgment.objects.filter(study=arena).count() == human_judgments
    # Dawid-Skene with the judges as three more raters, marked, beside the three people.
    workers = report["reliability"]["workers"]
    judges = sorted(w["participant"] for w in workers if w["judge"])
    assert judges == ["Judge: always-left", "Judge: longer", "Judge: named"]
    assert sum(1 for w in workers if not w["judge"]) == 3


def test_arena_answers_keyed_by_battle_item(arena, researcher, make_study):
    # The log battles each pair three times (three items); a judge answers a pair once
    # per run, so one item of each pair.
    battles = list(
        {
            (i.spec["caption_a"], i.spec["caption_b"]): i
            for i in Item.objects.filter(study=arena).order_by("-id")
        }.values()
    )
    assert len(battles) == 6
    other = make_study("arena", name="other")
    api = APIClient()
    api.force_login(researcher)
    rows = [{"item_id": item.pk, "answer": {"outcome": "b"}} for item in battles]
    assert _post(api, arena, "by-item", rows).status_code == 201
    for item in battles:
        answer = JudgeAnswer.objects.get(judge__name="by-item", item=item)
        assert (answer.caption_id, answer.caption_b_id) == (
            item.spec["caption_a"],
            item.spec["caption_b"],
        )
    refused = _post(api, arena, "bad", [{"item_id": other.pk * 1000, "answer": {"outcome": "a"}}])
    assert refused.status_code == 400
    assert "line 1: item_id" in json.dumps(refused.json())
