"""Crowd integrity, round two (issue 29), rows 7 and 8: two-sided catch trials and the VICR
feedback after a catch trial, attacked through the real pages; and the pure two-sided
exclusion rule of ``rubrics.catch``, checked against hand-worked cases.

VICR players are crowd workers, each a Django test client of its own arriving through the
signed link, put in the game directly (``test_catch_trials.Player``). THumB annotators post
the item pages' forms (``test_catch_trials.Annotator``). With ``catch_rate`` 0.5 a catch
trial follows every ordinary item (insertion probability 0.5 / (1 - 0.5) = 1).
"""

from __future__ import annotations

import re

import pytest

from annotation.models import Caption, Judgment
from rubrics import catch as rules
from tests.annotation.test_catch_trials import Annotator, Player, catch_study, thumb_catch_study
from tests.factories.thumb import form_for

#: The kind of a control trial as stored in an item's spec (``rubrics.catch.CONTROL``).
CONTROL = "control"

# ---------------------------------------------------------------------- pure rule


def test_two_sided_rule_hand_worked_cases():
    rule = rules.breaks_two_sided
    # "Always 1": 2 of 2 altered caught, 2 of 2 controls missed. Pooled that is 2 missed
    # of 4, not more than half, so the one-sided rule lets it pass; controls alone: 2 > 1.
    assert rules.breaks_rule(4, 2, min_seen=3, max_missed_share=0.5) is False
    assert rule((2, 0), (2, 2), min_seen=3, max_missed_share=0.5) is True
    # "Always 5": every altered trial missed, every control passed.
    assert rule((2, 2), (2, 0), min_seen=3, max_missed_share=0.5) is True
    # An honest rater missing one of two of each kind: 1 > 0.5 * 2 is false on both sides.
    assert rule((2, 1), (2, 1), min_seen=3, max_missed_share=0.5) is False
    # Fewer than min_seen answered in all: never, whatever was missed.
    assert rule((1, 1), (1, 1), min_seen=3, max_missed_share=0.5) is False
    # Exactly min_seen: one control of one missed is 1 > 0.5.
    assert rule((2, 0), (1, 1), min_seen=3, max_missed_share=0.5) is True
    # A kind not seen yet cannot break the rule (0 > 0.5 * 0 is false).
    assert rule((3, 1), (0, 0), min_seen=3, max_missed_share=0.5) is False
    # Share 1 never excludes; share 0 excludes on any miss.
    assert rule((3, 3), (3, 3), min_seen=3, max_missed_share=1) is False
    assert rule((3, 0), (3, 1), min_seen=3, max_missed_share=0) is True
    with pytest.raises(ValueError):
        rule((1, 2), (0, 0), min_seen=1, max_missed_share=0.5)


@pytest.mark.parametrize("constant", [1, 2, 3, 4, 5])
def test_no_constant_answer_passes_both_kinds(constant):
    altered_vicr, control_vicr = rules.vicr_caught(constant), rules.vicr_control_passed(constant)
    altered_thumb = rules.thumb_caught("T_RW", constant, {})
    control_thumb = rules.thumb_control_passed(constant)
    assert not (altered_vicr and control_vicr)
    assert not (altered_thumb and control_thumb)


# ---------------------------------------------------------------------- THumB, row 7


def assert_alternating(catches) -> None:
    """Controls and altered trials alternate: after any number of catch trials, the two
    counts differ by at most one (so any two in a row hold one of each)."""
    controls = 0
    for n, item in enumerate(catches, start=1):
        controls += item.spec["catch"]["kind"] == CONTROL
        assert abs(2 * controls - n) <= 1, [i.spec["catch"]["kind"] for i in catches]


def altered_key_of(item) -> str | None:
    made = item.spec.get("catch") or {}
    return made.get("key") if made and made["kind"] != CONTROL else None


@pytest.mark.django_db
def test_thumb_bot_answering_precision_1_everywhere_is_flagged(make_study, make_user):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    bot = Annotator(study, make_user("ones"))

    items = bot.play(lambda item: 1)

    assert sum(item.kind == "catch" for item in items) >= 3
    assert_alternating([item for item in items if item.kind == "catch"])
    row = bot.participant
    assert [flag["kind"] for flag in row.flags] == ["catch_failed"]
    assert not Judgment.objects.filter(participant=row, excluded=False).exists()


@pytest.mark.django_db
def test_thumb_scout_marks_the_altered_captions_and_a_bot_answering_5_elsewhere_is_excluded(
    make_study, make_user
):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    # The scout, answering carefully, writes down the form field of every caption it saw
    # altered: the altered caption of a catch trial is always the image's human caption,
    # and its field name (c1, ...) is the same whatever the display order.
    scout = Annotator(study, make_user("scout"))
    seen = scout.play(lambda item: 4)
    marks = {key for item in seen if (key := altered_key_of(item))}
    assert marks, "the scout met altered captions"

    bot = Annotator(study, make_user("bot"))
    bot_client_items = []
    for _ in range(40):
        _, item, action = bot.page()
        if item is None:
            break
        body = form_for(item, precision=5)
        for group in item.spec["groups"]:
            if group["key"] in marks:
                body[f"{group['key']}-precision"] = "1"
        assert bot.client.post(action, body).status_code == 302
        bot_client_items.append(item)

    assert sum(item.kind == "catch" for item in bot_client_items) >= 3
    row = bot.participant
    assert [flag["kind"] for flag in row.flags] == ["catch_failed"]
    assert not Judgment.objects.filter(participant=row, excluded=False).exists()


@pytest.mark.django_db
def test_thumb_careful_annotator_passes_both_kinds(make_study, make_user):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    careful = Annotator(study, make_user("careful2"))
    done = []
    for _ in range(40):
        _, item, action = careful.page()
        if item is None:
            break
        body = form_for(item, precision=4)
        if key := altered_key_of(item):
            body[f"{key}-precision"] = "1"
        assert careful.client.post(action, body).status_code == 302
        done.append(item)
    kinds = {
        (item.spec.get("catch") or {}).get("kind") == CONTROL
        for item in done
        if item.kind == "catch"
    }
    assert kinds == {True, False}, "both controls and altered trials were served"
    assert careful.participant.flags == []


# ---------------------------------------------------------------------- VICR, row 7


@pytest.mark.django_db
def test_vicr_bot_answering_2_everywhere_is_flagged(researcher):
    study = catch_study(researcher, catch_rate=0.5, catch_min_seen=3, catch_max_missed_share=0.5)
    bot = Player(study, "twos")

    log = bot.play(lambda item: 2)

    row = bot.participant
    assert [flag["kind"] for flag in row.flags] == ["catch_failed"]
    catches = [item for item, *_ in log if item.kind == "catch"]
    assert len(catches) >= 3
    assert_alternating(catches)
    controls = [item for item in catches if item.spec["catch"]["kind"] == CONTROL]
    assert controls, "controls were served"
    for item in controls:
        # A control is an untouched human caption on its own image.
        caption = Caption.objects.get(pk=item.spec["caption_id"])
        assert caption.system == Caption.HUMAN and item.spec["catch"]["text"] == caption.text
    assert not Judgment.objects.filter(participant=row, excluded=False).exists()


@pytest.mark.django_db
def test_vicr_honest_player_passes_controls_and_altered_trials(researcher):
    study = catch_study(researcher, catch_rate=0.5, catch_min_seen=3, catch_max_missed_share=0.5)
    player = Player(study, "honest")

    def answer(item):
        made = item.spec.get("catch")
        if made:
            return 4 if made["kind"] == CONTROL else 1
        return 3

    log = player.play(answer)

    assert sum(item.kind == "catch" for item, *_ in log) >= 3
    assert player.participant.flags == []


# ---------------------------------------------------------------------- VICR, row 8

FEEDBACK = re.compile(r'<div role="status" class="vicr-feedback">(.*?)</div>', re.S)
SCORE = re.compile(r"<p>Your score: .*?</p>")


@pytest.mark.django_db
def test_feedback_after_a_catch_trial_reads_as_after_a_game_pair_with_the_same_basis(researcher):
    study = catch_study(researcher, catch_rate=0.5)
    # Every game pair primed like an altered catch trial: two starting ratings of 1.
    Caption.objects.filter(study=study, purpose="study").update(spec={"prime_ratings": [1, 1]})
    player = Player(study, "reader")

    def answer(item):
        return 1

    log = player.play(answer, limit=12)
    by_kind: dict[str, list[str]] = {"game": [], "catch": []}
    for item, _caption, _page, feedback in log:
        made = item.spec.get("catch")
        if item.kind == "catch" and made["kind"] == CONTROL:
            continue
        result = Judgment.objects.get(item=item, participant=player.participant).result
        if result.get("pool_human"):
            continue  # the consensus also rests on other players: another basis
        block = SCORE.sub("", FEEDBACK.search(feedback).group(1))
        by_kind[item.kind].append(" ".join(block.split()))
    assert by_kind["game"] and by_kind["catch"]
    assert set(by_kind["catch"]) == set(by_kind["game"]) and len(set(by_kind["game"])) == 1
    assert "2 starting ratings" in by_kind["catch"][0]
    assert "reference" not in by_kind["catch"][0] and "machine" not in by_kind["catch"][0]
