"""Adaptive stopping wired into VICR (issue 15): through the real lease and submit services.

The stopping rule itself (``rubrics.adaptive``) is checked against brute force in
``tests/rubrics``; here: the setting is off by default, a settled pair stops taking ratings
and is not served again, a disputed pair goes on to ``max_ratings``, and the study page
says what the rule saved.

Hand-worked numbers. The stated model (``RaterModel.symmetric``: exact 0.6, adjacent 0.3,
5 levels, uniform prior) has, for true level 5, the rating distribution
(1/30, 1/30, 1/30, 0.15, 0.6) / 0.85, for 4 (0.05, 0.05, 0.15, 0.6, 0.15), for 3
(0.05, 0.15, 0.6, 0.15, 0.05), for 2 (0.15, 0.6, 0.15, 0.05, 0.05) and for 1 the mirror of
5. After ratings [5, 5] with ``max_ratings`` 3 the consensus changes iff the third rating
is <= 3 ((10 + x) / 3 < 4.5). P([5, 5] | level) = 0.4983, 0.0225, 0.0025, 0.0025, 0.0015
(levels 5..1) and P(x <= 3 | level) = 0.1176, 0.25, 0.8, 0.9, 0.9216, so
P(change) = 0.0699 / 0.5273 = 0.133: the pair stops at risk 0.2 and goes on at risk 0.1.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from annotation.dashboard import study_adaptive_saving
from annotation.models import Item, Judgment
from annotation.modes import get_mode
from annotation.modes.vicr.protocol import ADAPTIVE_FIT_MIN_PAIRS, adaptive_rater_model
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from tests.factories.humanr import crowd, do_group, honest, humanr_study
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db


def game_item(study) -> Item:
    return Item.objects.get(study=study, kind="game")


def rate_in_turn(study, ratings) -> list[Judgment]:
    """One new player per rating, each rating the study's next pair."""
    return [play(in_game(study), rating) for rating in ratings]


def test_adaptive_stopping_is_off_by_default(researcher):
    study = vicr_study(researcher, game=1, min_ratings=2, max_ratings=3)
    assert study.settings.get("adaptive_stopping", False) is False
    rate_in_turn(study, [5, 5, 5])
    item = game_item(study)
    assert (item.judgment_count, item.target) == (3, 3)
    assert all("adaptive" not in j.result for j in Judgment.objects.filter(item=item))
    assert study_adaptive_saving(study) is None


def test_a_settled_pair_stops_at_min_ratings_and_is_not_served_again(researcher):
    study = vicr_study(
        researcher,
        game=1,
        min_ratings=2,
        max_ratings=3,
        adaptive_stopping=True,
        adaptive_risk=0.2,  # above the hand-worked 0.133
    )
    first, second = rate_in_turn(study, [5, 5])
    assert "adaptive" not in first.result  # below min_ratings: never stops
    assert second.result["adaptive"] == {"stopped": True, "ratings": 2, "model": "assumed"}
    item = game_item(study)
    assert (item.judgment_count, item.target, item.open_lease_count) == (2, 2, 0)
    assert assignment_next(participant=in_game(study)) is None
    saving = study_adaptive_saving(study)
    assert saving == {"pairs_stopped": 1, "ratings_saved": 1, "ratings_fixed": 3}


def test_below_the_risk_the_same_pair_goes_on(researcher):
    study = vicr_study(
        researcher,
        game=1,
        min_ratings=2,
        max_ratings=3,
        adaptive_stopping=True,
        adaptive_risk=0.1,  # below the hand-worked 0.133
    )
    rate_in_turn(study, [5, 5, 5])
    item = game_item(study)
    assert (item.judgment_count, item.target) == (3, 3)
    assert study_adaptive_saving(study) == {
        "pairs_stopped": 0,
        "ratings_saved": 0,
        "ratings_fixed": 3,
    }


def test_a_disputed_pair_goes_on_to_max_ratings(researcher):
    study = vicr_study(
        researcher, game=1, min_ratings=2, max_ratings=4, adaptive_stopping=True, adaptive_risk=0.1
    )
    judgments = rate_in_turn(study, [5, 1, 5, 1])
    assert all("adaptive" not in j.result for j in judgments)
    item = game_item(study)
    assert (item.judgment_count, item.target) == (4, 4)
    assert assignment_next(participant=in_game(study)) is None


def test_a_lease_out_when_the_pair_stops_may_still_be_answered(researcher):
    study = vicr_study(
        researcher, game=1, min_ratings=2, max_ratings=5, adaptive_stopping=True, adaptive_risk=0.4
    )
    # [5, 5] with max 5: P(change) is below 0.4 (the rubrics tests check the number).
    play(in_game(study), 5)
    late = in_game(study)
    held = assignment_next(participant=late)  # leased before the pair stops
    play(in_game(study), 5)
    item = game_item(study)
    assert (item.judgment_count, item.open_lease_count, item.target) == (2, 1, 3)
    assert assignment_next(participant=in_game(study)) is None
    judgment_submit(
        participant=late,
        token=held.token,
        data={"rating": "5"},
        now=held.served_at + timedelta(seconds=4),
    )
    item.refresh_from_db()
    assert (item.judgment_count, item.open_lease_count) == (3, 0)


def test_the_rater_model_is_fitted_from_the_study_once_it_has_enough_pairs(researcher):
    study = vicr_study(
        researcher,
        game=ADAPTIVE_FIT_MIN_PAIRS + 1,
        min_ratings=2,
        max_ratings=2,  # every pair closes at 2 on its own: the rule is not needed yet
        adaptive_stopping=True,
        first_game_pass=-40,  # the first-game check must not send the players away
    )
    config = get_mode("vicr").settings(study)
    item = Item.objects.filter(study=study, kind="game").first()
    # Each player rates every pair once (least-rated first), so pairs fill in turn.
    for _ in range(2):
        assert adaptive_rater_model(item, config)[1] == "assumed"  # no pair has 2 ratings
        player = in_game(study)
        for _rating in range(ADAPTIVE_FIT_MIN_PAIRS + 1):
            play(player, 5)
    # The other 30 pairs have 2 ratings each: enough to fit the study's own model.
    model, source = adaptive_rater_model(item, config)
    assert source == "study"
    assert model.levels == 5


def test_the_study_page_shows_what_adaptivity_saved(client, researcher):
    study = vicr_study(
        researcher, game=2, min_ratings=2, max_ratings=3, adaptive_stopping=True, adaptive_risk=0.2
    )
    players = [in_game(study), in_game(study)]
    for player in players:  # each rates both pairs 5: both stop at 2
        play(player, 5)
        play(player, 5)
    client.force_login(researcher)
    html = client.get(f"/studies/{study.pk}/").content.decode()
    assert "What adaptive stopping saved" in html
    assert "2 pairs stopped early as settled: 2 of the 6 ratings" in html


def test_the_study_page_says_nothing_about_adaptivity_when_it_is_off(client, researcher):
    study = vicr_study(researcher, game=1, min_ratings=2, max_ratings=3)
    client.force_login(researcher)
    html = client.get(f"/studies/{study.pk}/").content.decode()
    assert "adaptive stopping saved" not in html


# ---------------------------------------------------------------------- HUMANr allocation


def serve_groups_until_none(study, answer=honest):
    """New crowd workers take one whole group each until nothing is served; the counts of
    kept comparison values per system seen before each lease attempt, and the groups done."""
    for done in range(100):
        per_system = Counter(
            Judgment.objects.filter(
                study=study, excluded=False, result__kind="comparison"
            ).values_list("result__system", flat=True)
        )
        worker = crowd(study, f"PID-{done}")
        if assignment_next(participant=worker) is None:
            return done, per_system
        do_group(worker, answer)
    raise AssertionError("more groups than the study has")


def test_humanr_allocation_is_off_by_default(researcher):
    study = humanr_study(researcher, images=30, systems=("GIT",))
    groups = Item.objects.filter(study=study, kind="group").count()
    done, _ = serve_groups_until_none(study)
    assert done == groups


def test_humanr_stops_serving_groups_whose_systems_reached_the_target(researcher):
    # 45 images, one model system: 45 Human-vs-Human and 45 GIT comparisons in groups of 9.
    # An honest worker's answers give every comparison the same value, so a system's sd
    # and half-width are 0 and it is settled once it has 27 values (ADAPTIVE_MIN_VALUES).
    # Every group holds both systems' comparisons, so groups stop only when both have 27.
    study = humanr_study(researcher, images=45, systems=("GIT",), adaptive_target_half_width=0.1)
    groups = Item.objects.filter(study=study, kind="group").count()
    done, last = serve_groups_until_none(study)
    assert last["Human"] >= 27 and last["GIT"] >= 27
    assert done < groups  # the rest were never served
    served = Item.objects.filter(study=study, kind="group", judgment_count__gt=0).count()
    assert served == done
    # One group fewer and a system would still be open: the last group was needed.
    last_group = Judgment.objects.filter(study=study, result__kind="comparison").order_by("-id")
    removed = Counter(
        last_group.filter(assignment=last_group.first().assignment).values_list(
            "result__system", flat=True
        )
    )
    assert min(last["Human"] - removed["Human"], last["GIT"] - removed["GIT"]) < 27


def test_humanr_keeps_serving_while_a_system_is_noisy(researcher):
    # GIT's answers alternate between the two ends (sd ~1, half-width ~0.4 over 30 values):
    # it never reaches 0.1, and every group holds a GIT comparison, so all are served.
    def split(trial, on_left):
        if trial["kind"] == "comparison" and trial["system"] == "GIT":
            return 1 if trial["image_id"] % 2 else 9
        return honest(trial, on_left)

    study = humanr_study(researcher, images=30, systems=("GIT",), adaptive_target_half_width=0.1)
    groups = Item.objects.filter(study=study, kind="group").count()
    done, _ = serve_groups_until_none(study, split)
    assert done == groups
