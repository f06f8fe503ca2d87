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
from django.urls import reverse

from annotation.models import Item, Judgment
from annotation.modes import get_mode
from annotation.modes.humanr.allocation import ADAPTIVE_MIN_WORKERS
from annotation.modes.vicr.protocol import ADAPTIVE_FIT_MIN_PAIRS, adaptive_rater_model
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from tests.factories.humanr import crowd, do_group, honest, humanr_study
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db


def adaptive_saving(study):
    """What VICR's dashboard panel says adaptive stopping saved (None: no panel)."""
    panel = get_mode("vicr").dashboard.panel(study)
    return None if panel is None else panel.context["saving"]


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
    assert adaptive_saving(study) is None


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
    saving = adaptive_saving(study)
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
    assert adaptive_saving(study) == {
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


def group_systems(study) -> dict[int, set[str]]:
    """The systems of each group's comparisons, by item id."""
    return {
        item.pk: {t["system"] for t in item.spec["trials"] if t["kind"] == "comparison"}
        for item in Item.objects.filter(study=study, kind="group")
    }


def noisy_gpt(trial, on_left):
    """GPT's answers alternate between the two ends (sd ~1): its interval stays wide."""
    if trial["kind"] == "comparison" and trial["system"] == "GPT":
        return 1 if trial["image_id"] % 2 else 9
    return honest(trial, on_left)


def test_with_allocation_on_groups_hold_one_system_and_nine_images(researcher):
    # 30 images, two systems and the baseline: per system 3 full groups and one short one
    # (30 = 3 x 9 + 3), each with one attention check and no image twice.
    study = humanr_study(
        researcher, images=30, systems=("GIT", "GPT"), adaptive_target_half_width=0.1
    )
    items = list(Item.objects.filter(study=study, kind="group").order_by("position"))
    assert len(items) == 3 * 4
    for item in items:
        trials = item.spec["trials"]
        comparisons = [t for t in trials if t["kind"] == "comparison"]
        assert sum(t["kind"] == "attention_check" for t in trials) == 1
        assert len({t["system"] for t in comparisons}) == 1
        assert len({t["image_id"] for t in comparisons}) == len(comparisons)
        assert len(comparisons) == (3 if item.spec["short"] else 9)
    # Every comparison once: 30 images x 3 systems.
    assert sum(len(i.spec["trials"]) - 1 for i in items) == 90
    # Served in turn: the first three positions are one group of each system.
    assert {next(iter(group_systems(study)[i.pk])) for i in items[:3]} == {"GIT", "GPT", "Human"}


def test_humanr_stops_serving_the_groups_of_settled_systems_only(researcher):
    # 135 images: per system 15 groups of 9. Honest workers give Human and GIT comparisons
    # one value each (sd 0), so each is settled as soon as it has ADAPTIVE_MIN_WORKERS
    # workers (10 groups, 90 values): its other 5 groups are never served. Noisy GPT never
    # reaches 0.1, so all 15 of its groups are served.
    assert ADAPTIVE_MIN_WORKERS == 10
    study = humanr_study(
        researcher, images=135, systems=("GIT", "GPT"), adaptive_target_half_width=0.1
    )
    systems = group_systems(study)
    assert len(systems) == 45
    done, last = serve_groups_until_none(study, noisy_gpt)
    served = Item.objects.filter(study=study, kind="group", judgment_count__gt=0)
    per_system = Counter(next(iter(systems[pk])) for pk in served.values_list("pk", flat=True))
    assert per_system == {"Human": 10, "GIT": 10, "GPT": 15}
    assert done == 35
    assert last == {"Human": 90, "GIT": 90, "GPT": 135}
    # What was saved is the settled systems' groups, and the dashboard's summary says so.
    summary = get_mode("humanr").dashboard.panel(study).context["allocation"]
    assert summary["settled_systems"] == ["GIT", "Human"]
    assert summary["groups_not_served"] == 10


def test_humanr_keeps_serving_while_a_system_is_noisy(researcher):
    # GIT's answers alternate between the two ends (sd ~1, half-width ~0.4 over 30 values):
    # it never reaches 0.1, so all its groups are served; Human, with 30 values from 4
    # workers, never has ADAPTIVE_MIN_WORKERS, so all of its are served too.
    def split(trial, on_left):
        if trial["kind"] == "comparison" and trial["system"] == "GIT":
            return 1 if trial["image_id"] % 2 else 9
        return honest(trial, on_left)

    study = humanr_study(researcher, images=30, systems=("GIT",), adaptive_target_half_width=0.1)
    groups = Item.objects.filter(study=study, kind="group").count()
    done, _ = serve_groups_until_none(study, split)
    assert done == groups


def test_an_adaptive_humanr_report_shows_the_worker_interval(
    client, researcher, django_capture_on_commit_callbacks
):
    # With allocation on, a group holds nine comparisons of one system, so one worker's
    # leaning moves nine values at once and the t-interval over values is too narrow
    # (bench/results-adaptive.md: 80% coverage). The page must show the interval over one
    # mean per worker, the one the rule stops on, under its own heading.
    study = humanr_study(researcher, images=30, systems=("GPT",), adaptive_target_half_width=0.1)
    serve_groups_until_none(study, noisy_gpt)
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(report_request(study=study, user=researcher))
    job.refresh_from_db()
    assert job.status == "done", job.error
    rows = {row["system"]: row for row in job.result["humanr"]["rows"]}
    low, high = rows["GPT"]["worker_t_interval"]
    assert [low, high] != rows["GPT"]["t_interval"]
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Worker t-interval" in page
    assert f"[{low:.3f}, {high:.3f}]" in page
