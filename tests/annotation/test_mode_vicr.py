"""The VICR mode: settings, items, refusals, the phase machine, priming, pages, report, export.

The studies and players come from ``tests.factories.vicr``.
"""

from __future__ import annotations

import io
import random
import re
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next, lease_seconds
from annotation.services.exports import export_file
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from rubrics import vicr as rules
from tests.factories.vicr import (
    PROBATION_TRUTHS,
    TUTORIAL_TRUTHS,
    exact,
    far,
    in_game,
    one_off,
    play,
    play_block,
    player,
    truth_of,
    vicr_study,
)

pytestmark = pytest.mark.django_db

MODE = get_mode("vicr")


# ---------------------------------------------------------------------------- settings, items


def test_defaults_follow_the_protocol():
    settings = MODE.clean_settings({})
    assert (
        settings["min_ratings"],
        settings["max_ratings"],
        settings["seconds_before_submit"],
    ) == (3, 7, 3)
    assert (settings["tutorial_pass"], settings["probation_pass"]) == (10, 25)
    assert (settings["first_game_ratings"], settings["first_game_pass"]) == (20, 25)
    assert settings["max_probation_attempts"] == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"min_ratings": 5, "max_ratings": 3},
        {"min_ratings": -1},
        {"seconds_before_submit": -1},
        {"max_probation_attempts": 0},
        {"scale_levels": 7},
        {"first_game_pass": 41},
        {"max_ratings": True},
        {"min_ratings": "3"},
        {"collapse_top": "yes"},
        {"colour": "blue"},
    ],
)
def test_nonsense_settings_are_refused(bad):
    with pytest.raises(ServiceError):
        MODE.clean_settings(bad)


def test_items_are_built_per_caption_with_kinds_targets_and_order(researcher):
    study = vicr_study(researcher, game=12, max_ratings=5)
    items = list(study.items.order_by("kind", "position"))
    kinds = [item.kind for item in items]
    assert kinds.count("tutorial") == len(TUTORIAL_TRUTHS)
    assert kinds.count("probation") == len(PROBATION_TRUTHS)
    assert kinds.count("game") == 12
    game = [item for item in items if item.kind == "game"]
    assert {item.target for item in game} == {5}
    # tutorial/probation pairs go to every player: their target never binds
    assert min(item.target for item in items if item.kind != "game") > 10**9
    tutorial = [item for item in items if item.kind == "tutorial"]
    assert [truth_of(item) for item in tutorial] == TUTORIAL_TRUTHS, "the pool in import order"
    for item in items:
        assert Caption.objects.get(pk=item.spec["caption_id"]).image_id == item.image_id
    game_order = [Caption.objects.get(pk=i.spec["caption_id"]).text for i in game]
    again = vicr_study(researcher, game=12, max_ratings=5)
    again_order = [
        Caption.objects.get(pk=i.spec["caption_id"]).text
        for i in again.items.filter(kind="game").order_by("position")
    ]
    assert game_order == again_order, "the study seed fixes the shuffle"
    assert game_order != sorted(game_order, key=lambda t: int(t.split()[-1])), "shuffled"


def test_a_study_without_tutorial_or_with_an_unreachable_pass_mark_is_not_opened(researcher):
    with pytest.raises(ServiceError, match="tutorial pairs"):
        vicr_study(researcher, tutorial=[])
    with pytest.raises(ServiceError, match="tutorial_pass is 5 but 2 tutorial pairs"):
        vicr_study(researcher, tutorial_pairs=2, tutorial_pass=5)
    with pytest.raises(ServiceError, match="probation_pass is 41 but 20 probation pairs"):
        MODE.clean_settings({"probation_pass": 41})


def test_a_study_whose_pools_are_smaller_than_one_player_needs_is_not_opened(researcher):
    # the tutorial: one block; probation: one block per attempt, never a pair twice
    with pytest.raises(ServiceError, match=r"tutorial pool has 9 pairs but one player needs 10"):
        vicr_study(researcher, tutorial=[3] * 9)
    with pytest.raises(
        ServiceError,
        match=r"probation pool has 39 pairs but one player needs 40 \(probation_pairs 20 x "
        r"max_probation_attempts 2",
    ):
        vicr_study(researcher, probation=[3] * 39)
    # exactly enough opens; smaller blocks or fewer attempts need smaller pools
    assert vicr_study(researcher, tutorial=[3] * 10, probation=[3] * 40).status == "live"
    smaller = vicr_study(
        researcher,
        probation=[3] * 30,
        probation_pairs=10,
        probation_pass=12,
        max_probation_attempts=3,
    )
    assert smaller.status == "live"


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("bad", [None, "", "0", "6", "abc", "3.5", 0, 6, True])
def test_a_rating_outside_1_to_5_is_refused_and_nothing_is_stored(researcher, bad):
    study = vicr_study(researcher)
    participant = in_game(study)
    lease = assignment_next(participant=participant)
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={"rating": bad},
            now=lease.served_at + timedelta(seconds=5),
        )
    assert refused.value.field == "rating"
    assert "1 to 5" in refused.value.message
    assert not Judgment.objects.exists()
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.OPEN, "the player may still answer"


def test_a_rating_faster_than_3_seconds_by_the_servers_clock_is_refused(researcher):
    study = vicr_study(researcher)
    participant = in_game(study)
    lease = assignment_next(participant=participant)
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={"rating": "3"},
            now=lease.served_at + timedelta(seconds=2.9),
        )
    assert refused.value.status == 429
    assert "2.9" in refused.value.message and "3 seconds" in refused.value.message
    assert not Judgment.objects.exists()
    # a reload returns the same lease and the same clock
    assert assignment_next(participant=participant).served_at == lease.served_at
    stored = judgment_submit(
        participant=participant,
        token=lease.token,
        data={"rating": "3"},
        now=lease.served_at + timedelta(seconds=3),
    )
    assert stored.created and stored.judgment.dwell_ms == 3000


def test_the_tutorial_has_the_minimum_time_too(researcher):
    study = vicr_study(researcher)
    participant = player(study)
    lease = assignment_next(participant=participant)
    assert lease.item.kind == "tutorial"
    with pytest.raises(ServiceError):
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={"rating": "3"},
            now=lease.served_at + timedelta(seconds=1),
        )


def test_a_pair_is_never_rated_twice_by_one_player(researcher):
    study = vicr_study(researcher, game=5)
    participant = in_game(study)
    judgments = [play(participant, 3) for _ in range(5)]
    assert len({j.item_id for j in judgments}) == 5
    assert assignment_next(participant=participant) is None, "every pair rated once"
    again = judgment_submit(
        participant=participant, token=judgments[0].assignment.token, data={"rating": "1"}
    )
    assert not again.created and again.judgment.pk == judgments[0].pk
    assert Judgment.objects.filter(participant=participant).count() == 5


def test_a_pair_not_served_to_the_player_is_refused_with_404(researcher):
    study = vicr_study(researcher)
    owner, intruder = in_game(study), in_game(study)
    lease = assignment_next(participant=owner)
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=intruder,
            token=lease.token,
            data={"rating": "3"},
            now=lease.served_at + timedelta(seconds=10),
        )
    assert refused.value.status == 404
    assert not Judgment.objects.exists()


def rate_an_unserved_pair(participant, item_id: int):
    """Lease ``item_id`` to the participant behind the assignment service's back (as a
    forged or stale page would name it) and rate it 10 s later."""
    now = timezone.now()
    lease = Assignment.objects.create(
        participant=participant, item_id=item_id, served_at=now, expires_at=now + timedelta(hours=1)
    )
    return judgment_submit(
        participant=participant,
        token=lease.token,
        data={"rating": "3"},
        now=now + timedelta(seconds=10),
    )


def test_a_tutorial_pair_submitted_as_a_game_rating_is_refused(researcher):
    study = vicr_study(researcher)
    participant = in_game(study)
    tutorial_item = study.items.filter(kind="tutorial").first()
    with pytest.raises(ServiceError) as refused:
        rate_an_unserved_pair(participant, tutorial_item.pk)
    assert "tutorial pair" in refused.value.message and "game" in refused.value.message
    assert not Judgment.objects.exists()


# ---------------------------------------------------------------------------- phases


def drawn(participant, kind, attempt=0):
    """The item ids of a player's block, as rubrics.vicr draws them from the pool."""
    pool = list(
        participant.study.items.filter(kind=kind)
        .order_by("position", "id")
        .values_list("id", flat=True)
    )
    settings = MODE.settings(participant.study)
    positions = rules.block_draw(
        len(pool),
        pairs=settings.block_pairs(kind),
        attempt=attempt,
        study_seed=participant.study.seed,
        player=participant.pk,
        kind=kind,
    )
    return [pool[position] for position in positions]


def test_passing_the_tutorial_leads_to_the_game(researcher):
    study = vicr_study(researcher)
    participant = player(study)
    judgments = play_block(participant, 10, exact)
    assert [j.item.kind for j in judgments] == ["tutorial"] * 10
    assert [j.item_id for j in judgments] == drawn(participant, "tutorial"), "the draw's order"
    assert all(j.result["points"] == 2 for j in judgments)
    assert participant.status == "game"
    assert participant.state["tutorial_score"] == 20
    assert (
        judgments[-1]
        .result["transition"]["message"]
        .startswith("You passed the tutorial with 20 of 20 points")
    )
    assert "transition" not in judgments[0].result
    assert play(participant, 3).item.kind == "game"


def test_exactly_10_points_passes_and_9_do_not(researcher):
    study = vicr_study(researcher)
    passing, failing = player(study), player(study)
    play_block(passing, 10, one_off)  # 10 x 1 point
    assert passing.status == "game" and passing.state["tutorial_score"] == 10
    answers = iter([one_off] * 9 + [far])
    play_block(failing, 10, lambda item: next(answers)(item))
    assert failing.state["tutorial_score"] <= 9
    assert failing.status == "probation"
    assert player_item_kind(failing) == "probation"


def player_item_kind(participant):
    lease = assignment_next(participant=participant)
    return lease.item.kind if lease else None


def test_probation_pass_fail_retry_and_exclusion(researcher):
    study = vicr_study(researcher)
    # passes probation at the first attempt
    good = player(study)
    play_block(good, 10, far)
    assert good.status == "probation"
    last = play_block(good, 20, one_off)[-1]  # 20 points < 25: fails
    assert good.status == "probation" and good.state["probation_scores"] == [20]
    assert "attempt 2 of 2" in last.result["transition"]["message"]
    first = set(drawn(good, "probation", 0))
    probation = Judgment.objects.filter(participant=good, item__kind="probation")
    assert {j.item_id for j in probation} == first
    # the retry serves 20 other pairs of the pool, none of the first attempt's
    retry = play_block(good, 20, exact)
    assert [j.item_id for j in retry] == drawn(good, "probation", 1)
    assert not first & {j.item_id for j in retry}
    assert {j.assignment.round for j in retry} == {0}
    # the attempt is kept with each probation rating instead
    assert {j.result["attempt"] for j in retry} == {2}
    assert {
        j.result["attempt"] for j in Judgment.objects.filter(item_id__in=first, participant=good)
    } == {1}
    assert good.status == "game" and good.state["probation_scores"] == [20, 40]
    assert retry[-1].result["transition"]["message"] == (
        "You passed probation with 40 of 40 points. On to the game!"
    )
    # fails both attempts: excluded, nothing more is served, a crafted submit is refused
    bad = player(study)
    play_block(bad, 10, far)
    play_block(bad, 20, far)
    last = play_block(bad, 20, far)[-1]
    assert bad.status == "excluded"
    assert "no attempt is left" in last.result["transition"]["message"]
    assert assignment_next(participant=bad) is None
    assert MODE.eligible_items(bad).count() == 0


def test_the_first_game_ratings_rule_resets_the_score_and_sends_to_probation(researcher):
    study = vicr_study(researcher, game=10, primes=(5, 5), first_game_ratings=3, first_game_pass=4)
    participant = in_game(study)
    first = play(participant, 5)
    assert first.result["points"] == 2 and participant.state["player"]["score"] == 2
    play(participant, 1)  # far from 5: -2
    last = play(participant, 5)
    assert last.result["points"] == 2
    assert participant.status == "probation"
    assert participant.state["player"]["score"] == 0, "score reset"
    assert last.result["transition"]["message"] == (
        "Your first 3 game ratings scored 2 of the 4 needed: your score is reset and you go "
        "back to probation."
    )
    assert player_item_kind(participant) == "probation"
    assert MODE.current_round(participant) == 0, "one round: no pair twice"


def test_passing_the_first_game_ratings_keeps_the_player_in_the_game(researcher):
    study = vicr_study(researcher, game=10, primes=(5, 5), first_game_ratings=3, first_game_pass=4)
    participant = in_game(study)
    for _ in range(4):
        play(participant, 5)
    assert participant.status == "game" and participant.state["player"]["score"] == 8


def test_failing_the_first_game_ratings_with_no_attempt_left_excludes(researcher):
    study = vicr_study(
        researcher,
        game=10,
        primes=(5, 5),
        first_game_ratings=2,
        first_game_pass=4,
        max_probation_attempts=1,
    )
    participant = in_game(study)
    participant.state["player"]["probation_attempts"] = 1
    participant.save()
    play(participant, 1)
    last = play(participant, 1)
    assert participant.status == "excluded"
    assert "no probation attempt is left" in last.result["transition"]["message"]


# ---------------------------------------------------------------------------- priming, scoring


def test_a_return_to_probation_draws_pairs_of_no_earlier_attempt(researcher):
    study = vicr_study(
        researcher,
        game=10,
        primes=(5, 5),
        first_game_ratings=2,
        first_game_pass=4,
        max_probation_attempts=3,
        probation=PROBATION_TRUTHS + PROBATION_TRUTHS[:20],  # 3 attempts x 20
    )
    participant = player(study)
    play_block(participant, 10, far)
    play_block(participant, 20, one_off)  # 20 < 25: attempt 1 failed
    play_block(participant, 20, exact)  # attempt 2 passed
    assert participant.status == "game"
    play(participant, 1)
    play(participant, 1)  # -4 over the first 2: back to probation
    assert participant.status == "probation"
    third = play_block(participant, 20, exact)
    earlier = set(drawn(participant, "probation", 0)) | set(drawn(participant, "probation", 1))
    assert [j.item_id for j in third] == drawn(participant, "probation", 2)
    assert not earlier & {j.item_id for j in third}
    assert participant.status == "game"


def test_the_phase_is_the_status_and_after_submit_only_answers(researcher):
    study = vicr_study(researcher, game=2, primes=(4, 4))
    newcomer = player(study)
    assert newcomer.status == "active", "the generic initial status"
    assert MODE.eligible_items(newcomer).get().kind == "tutorial", "no phase yet: the tutorial"
    participant = in_game(study)
    lease = assignment_next(participant=participant)
    lease.participant = participant
    payload = {"rating": 4}
    judgment = Judgment(
        study=study,
        item=lease.item,
        participant=participant,
        assignment=lease,
        payload=payload,
        result=MODE.score(item=lease.item, assignment=lease, part=0, payload=payload),
        dwell_ms=4000,
    )
    with CaptureQueriesContext(connection) as queries:
        outcome = MODE.after_submit(participant, judgment)
    writes = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith("SELECT")]
    assert not writes, writes
    assert judgment.pk is None and judgment.result["points"] == 2
    assert "score_after" not in judgment.result, "the service merges the outcome, not the mode"
    assert outcome.status == "game"
    assert outcome.result == {"score_after": 2, "phase_after": "game"}
    assert outcome.state["player"] == {"probation_attempts": 0, "score": 2, "game_ratings": 1}
    assert (outcome.state["game_total"], outcome.state["game_points"]) == (1, 2)
    assert (outcome.exclusion, outcome.new_items) == ("", ())
    participant.refresh_from_db()
    assert participant.state["player"]["score"] == 0, "nothing was written"
    # through the service: the phase is kept in the status only
    stored = play(participant, 4)
    assert stored.result["score_after"] == 2 and stored.result["phase_after"] == "game"
    assert participant.status == "game" and "phase" not in participant.state["player"]


def test_a_practice_pair_out_of_the_draws_order_is_refused(researcher):
    study = vicr_study(researcher)
    participant = player(study)
    expected, other = drawn(participant, "tutorial")[:2]
    with pytest.raises(ServiceError) as refused:
        rate_an_unserved_pair(participant, other)
    assert refused.value.status == 409 and "not the tutorial pair you are at" in (
        refused.value.message
    )
    assert not Judgment.objects.exists()
    assert MODE.eligible_items(participant).get().pk == expected, "only the draw's next pair"


def test_the_completion_is_earned_by_game_ratings_in_good_standing(researcher):
    study = vicr_study(researcher, game=6, primes=(3, 3), completion_game_ratings=3)
    participant = player(study)
    play_block(participant, 10, exact)
    assert participant.status == "game"
    for done in range(3):
        assert not MODE.completion_earned(participant), f"after {done} game ratings"
        assert participant.completed_at is None
        last = play(participant, 3)
    assert MODE.completion_earned(participant)
    # the submission service stamps the crowd worker's completion with that rating
    assert participant.completed_at == last.created_at
    # the same count earns nothing for a player outside the game
    for status in ("probation", "excluded"):
        participant.status = status
        assert not MODE.completion_earned(participant), status


@pytest.mark.parametrize(
    "bad",
    [
        {"tutorial_pairs": 0},
        {"probation_pairs": 1001},
        {"completion_game_ratings": 0},
        {"completion_game_ratings": True},
        {"tutorial_pairs": 4, "tutorial_pass": 9},
    ],
)
def test_gate_and_completion_settings_are_bounded(bad):
    with pytest.raises(ServiceError, match=next(iter(bad))):
        MODE.clean_settings(bad)


def test_a_crowd_lease_lasts_a_few_minutes_and_an_account_lease_the_site_default(
    researcher, settings
):
    study = vicr_study(researcher)
    crowd = player(study)
    assert 60 <= lease_seconds(participant=crowd) <= 10 * 60
    assert lease_seconds(participant=crowd) < settings.CAPEVAL_LEASE_SECONDS


def test_priming_replaces_one_prime_per_human_rating(researcher):
    study = vicr_study(researcher, game=1, primes=(1, 5))
    raters = [in_game(study) for _ in range(4)]
    scored = [play(rater, rating) for rater, rating in zip(raters, (4, 2, 3, 3), strict=True)]
    pools = [(j.result["pool_human"], j.result["pool_primed"]) for j in scored]
    assert pools == [(0, 2), (1, 1), (2, 0), (3, 0)]
    # 0 humans: pool [1, 5] -> consensus 3; rating 4, var 4, n 3, v = 1 + (1 + 2*4/4)/3 = 2
    assert scored[0].result["consensus"] == 3
    assert scored[0].result["d"] == pytest.approx(0.5)
    assert scored[0].result["points"] == 1, "d <= 0.5"
    # 1 human: pool [4, 1] -> mean 2.5 rounds half up to 3
    assert scored[1].result["consensus"] == 3
    # 2 humans: pool [4, 2] -> 3; rating 3 matches
    assert (scored[2].result["consensus"], scored[2].result["points"]) == (3, 2)
    # 3 humans: pool [4, 2, 3]
    assert scored[3].result["n"] == 4 and scored[3].result["consensus"] == 3


def test_an_empty_pool_scores_0_with_no_consensus_yet(researcher):
    study = vicr_study(researcher, game=1, primes=())
    judgment = play(in_game(study), 4)
    assert judgment.result["points"] == 0 and judgment.result["consensus"] is None
    assert "no consensus yet" in judgment.result["reason"]


def test_real_valued_primes_count_as_the_nearest_level(researcher):
    study = vicr_study(researcher, game=1, primes=(3.5, 4.4))
    judgment = play(in_game(study), 4)
    assert judgment.result["consensus"] == 4 and judgment.result["points"] == 2


def test_a_flagged_judgment_leaves_the_consensus_pool(researcher):
    study = vicr_study(researcher, game=1, primes=())
    first = play(in_game(study), 1)
    Judgment.objects.filter(pk=first.pk).update(excluded=True, exclusion_reason="spam")
    second = play(in_game(study), 5)
    assert second.result["consensus"] is None


def test_tutorial_points_use_the_expert_truth(researcher):
    study = vicr_study(researcher)
    participant = player(study)
    judgment = play(participant, answer=lambda item: 1 if truth_of(item) >= 3 else 5)
    truth = truth_of(judgment.item)
    assert judgment.result == {
        **judgment.result,
        "points": 2 - abs(truth - judgment.payload["rating"]),
        "truth": truth,
    }


# ---------------------------------------------------------------------------- pages


def crowd_client(client, study, worker="W1"):
    client.get(reverse("crowd_entry", args=[crowd_link_token(study)]) + f"?PROLIFIC_PID={worker}")
    return client


def test_item_page_shows_the_pair_the_scale_and_a_disabled_submit(client, researcher):
    study = vicr_study(researcher)
    crowd_client(client, study)
    page = client.get(reverse("participate_next", args=[study.public_id]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Tutorial pair 1 of 10" in html
    lease = Assignment.objects.get()
    assert Caption.objects.get(pk=lease.item.spec["caption_id"]).text in html
    assert 'alt="Photo' in html and "display/" in html
    assert "<fieldset" in html and "<legend>" in html
    assert html.count('type="radio" name="rating"') == 5
    assert 'id="vicr-submit" disabled' in html
    assert "<dialog" in html and rules.SCALE[5].text in html
    assert "<noscript>" in html
    assert len(page.content) < 20_000


def test_a_reload_does_not_restart_the_clock(client, researcher):
    study = vicr_study(researcher)
    crowd_client(client, study)
    client.get(reverse("participate_next", args=[study.public_id]))
    Assignment.objects.update(served_at=timezone.now() - timedelta(seconds=10))
    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
    assert 'id="vicr-submit" disabled' not in html
    assert 'data-remaining="0' in html


def test_an_early_submit_through_the_page_is_refused_with_a_message(client, researcher):
    study = vicr_study(researcher)
    crowd_client(client, study)
    client.get(reverse("participate_next", args=[study.public_id]))
    lease = Assignment.objects.get()
    response = client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]), {"rating": "3"}
    )
    assert response.status_code == 429
    assert "at least 3 seconds" in response.content.decode()
    assert not Judgment.objects.exists()


def test_feedback_pages_show_truth_explanation_consensus_and_leaderboard(client, researcher):
    study = vicr_study(researcher, game=3, primes=(4, 4))
    crowd_client(client, study)
    for index in range(11):
        client.get(reverse("participate_next", args=[study.public_id]))
        lease = Assignment.objects.get(status="open")
        Assignment.objects.filter(pk=lease.pk).update(
            served_at=timezone.now() - timedelta(seconds=5)
        )
        rating = truth_of(lease.item) if lease.item.kind == "tutorial" else 3
        response = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {"rating": str(rating)},
            follow=True,  # the feedback is a page after a redirect (issue 42)
        )
        html = response.content.decode()
        assert response.status_code == 200
        if index == 0:
            explanation = Caption.objects.get(pk=lease.item.spec["caption_id"]).spec["explanation"]
            assert "the expert rating is <strong" in html and f"{explanation}</p>" in html
        if index == 9:
            assert "You passed the tutorial with 20 of 20 points" in html
    # the 11th was a game rating: consensus 4 from the two primes, rated 3
    assert 'the consensus is <strong id="vicr-consensus">4</strong>' in html
    assert "2 starting ratings" in html
    assert "Leaderboard" in html and "(you)" in html


def _pages_queries(client, study, worker):
    crowd_client(client, study, worker)
    url = reverse("participate_next", args=[study.public_id])
    client.get(url)
    lease = Assignment.objects.get(status="open", participant__external_id=worker)
    Assignment.objects.filter(pk=lease.pk).update(served_at=timezone.now() - timedelta(seconds=5))
    with CaptureQueriesContext(connection) as shown:
        client.get(url)
    submit = reverse("participate_submit", args=[study.public_id, lease.token])
    with CaptureQueriesContext(connection) as submitted:
        client.post(submit, {"rating": "3"})
    print([q["sql"][:150] for q in submitted.captured_queries])
    return len(shown), len(submitted)


def test_page_queries_do_not_grow_with_the_study(client, researcher):
    small = vicr_study(researcher, game=3)
    large = vicr_study(researcher, game=300)
    for study in (small, large):
        for _ in range(30):  # a crowd of players already in the game
            in_game(study)
        for participant in Participant.objects.filter(study=study)[:12]:
            play(participant, 3)
    small_game = _in_game_client_queries(client, small, "S1")
    large_game = _in_game_client_queries(client, large, "L1")
    assert small_game == large_game
    assert max(small_game) < 40


def _in_game_client_queries(client, study, worker):
    participant = in_game(study, worker)
    participant.source = Participant.Source.PROLIFIC
    participant.save()
    return _pages_queries(client, study, worker)


# ---------------------------------------------------------------------------- leaderboard


def test_leaderboard_lists_the_top_players_and_the_own_rank(researcher):
    study = vicr_study(researcher, leaderboard_size=3)
    scores = [7, 12, 3, 9, 1]
    players = []
    for score in scores:
        participant = in_game(study)
        participant.state["player"]["score"] = score
        participant.save()
        players.append(participant)
    board = MODE.pages.leaderboard(players[4])
    assert [row["score"] for row in board["leaderboard"]] == [12, 9, 7]
    assert board["own_rank"] == 5
    board = MODE.pages.leaderboard(players[1])
    assert board["leaderboard"][0]["me"] and board["own_rank"] is None


def _leaderboard_ranks(html):
    """The rank column of the leaderboard on a page, top to bottom."""
    board = html.split('id="leaderboard-heading"', 1)[1].split("</table>", 1)[0]
    return [int(rank) for rank in re.findall(r'<tr[^>]*><td class="num">(\d+)</td>', board)]


def test_tied_players_share_a_rank_on_the_feedback_and_finished_pages(client, researcher):
    study = vicr_study(researcher, game=1)
    for score in (12, 9, 12, 9):
        participant = in_game(study)
        participant.state["player"]["score"] = score
        participant.save()
    crowd_client(client, study)
    worker = Participant.objects.get(external_id="W1")
    worker.state = {"player": {"probation_attempts": 0, "score": 0, "game_ratings": 0}}
    worker.status = "game"
    worker.save()
    client.get(reverse("participate_next", args=[study.public_id]))
    lease = Assignment.objects.get(status="open")
    Assignment.objects.filter(pk=lease.pk).update(served_at=timezone.now() - timedelta(seconds=5))
    feedback = client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]),
        {"rating": "1"},
        follow=True,  # the feedback is a page after a redirect (issue 42)
    )
    # the worker's 1 is 2.5 levels from the primes' 3.5 -> 4: 0 points or less, so last
    assert _leaderboard_ranks(feedback.content.decode()) == [1, 1, 3, 3, 5]
    finished = client.get(reverse("participate_next", args=[study.public_id]))
    assert "rated 1 pair" in finished.content.decode()
    assert _leaderboard_ranks(finished.content.decode()) == [1, 1, 3, 3, 5]


def test_a_player_tied_just_off_the_board_gets_the_shared_rank(researcher):
    study = vicr_study(researcher, leaderboard_size=2)
    players = []
    for score in (12, 9, 9):
        participant = in_game(study)
        participant.state["player"]["score"] = score
        participant.save()
        players.append(participant)
    board = MODE.pages.leaderboard(players[2])
    assert [(row["rank"], row["score"]) for row in board["leaderboard"]] == [(1, 12), (2, 9)]
    assert board["own_rank"] == 2  # tied with the 9 on the board


# ---------------------------------------------------------------------------- report


def ratings_study(researcher, table, *, statuses=None, levels=5, seed=0):
    """A VICR study whose game pairs carry the given ratings (rows: pair, columns: player)."""
    study = vicr_study(researcher, game=len(table), primes=(), seed=seed, scale_levels=levels)
    items = list(study.items.filter(kind="game").order_by("position"))
    players = [in_game(study) for _ in range(len(table[0]))]
    for index, status in enumerate(statuses or []):
        if status:
            players[index].status = status
            players[index].save()
    now = timezone.now()
    for item, row in zip(items, table, strict=True):
        for participant, rating in zip(players, row, strict=True):
            if rating is None:
                continue
            lease = Assignment.objects.create(
                participant=participant,
                item=item,
                status="submitted",
                served_at=now,
                expires_at=now,
                submitted_at=now,
            )
            Judgment.objects.create(
                study=study,
                item=item,
                participant=participant,
                assignment=lease,
                payload={"rating": rating},
                result={"points": 0},
                dwell_ms=4000 + 1000 * rating,
            )
    return study, items, players


def test_report_on_a_hand_checkable_study(researcher):
    table = [  # players A B C D; D is excluded and leaves the final view
        [1, 1, 2, 5],
        [2, 3, 3, 5],
        [4, 5, 5, 1],
        [5, 5, 4, None],
        [3, None, None, None],
        [None, None, None, None],
    ]
    study, items, players = ratings_study(
        researcher, table, statuses=[None, None, None, "excluded"]
    )
    messages = []
    result = MODE.report.run(study, lambda pct, msg: messages.append(pct))
    assert messages == sorted(messages)
    assert result["imported"] is False
    # final view: A, B, C only; pair means 1.33->1, 2.67->3, 4.67->5, 4.67->5, 3->3
    assert [row["pairs"] for row in result["distribution"]] == [1, 0, 2, 0, 2]
    assert result["included"] == {
        "pairs": 5,
        "pairs_virtual": 4,
        "players": 3,
        "ratings": 13,
        "game_ratings": 16,
    }
    assert [(row["label"], row["pairs"], row["final"]) for row in result["coverage"]] == [
        ("0", 1, 1),
        ("1", 1, 1),
        ("2", 0, 0),
        ("3 or more", 4, 4),
    ]
    final = [[1, 1, 2], [2, 3, 3], [4, 5, 5], [5, 5, 4], [3]]
    expected = rules.virtual_raters(final, repetitions=100, seed=0)
    assert {row["key"]: row["mean"] for row in result["agreement"]} == {
        key: value["mean"] for key, value in expected.items()
    }
    by_name = {row["pseudonym"]: row for row in result["players"]}
    a, d = by_name[players[0].pseudonym], by_name[players[3].pseudonym]
    # A against the consensus of the OTHER raters of each pair (B and C): pair 1: 1, 2 ->
    # 1.5 -> 2; pair 2: 3, 3 -> 3; pair 3: 5, 5 -> 5; pair 4: 5, 4 -> 4.5 -> 5; pair 5: A
    # alone, not compared. A rated 1, 2, 4, 5: exact once, one off three times, on 4 pairs.
    assert (a["ratings"], a["compared"], a["exact"], a["adjacent"]) == (5, 4, 1 / 4, 3 / 4)
    assert a["median_dwell_s"] == 7.0
    # D (excluded) is in no consensus, so it meets the whole final view: 1.33 -> 1,
    # 2.67 -> 3, 4.67 -> 5; D's 5 is 4 off, 5 is 2 off, 1 is 4 off
    assert (d["status"], d["ratings"], d["compared"], d["exact"], d["adjacent"]) == (
        "excluded",
        3,
        3,
        0,
        0,
    )


def test_report_explains_when_agreement_cannot_be_computed(researcher):
    study, _, _ = ratings_study(researcher, [[3, 4], [2, 2]])
    result = MODE.report.run(study, lambda *args: None)
    assert result["agreement"] is None
    assert "at least 2 pairs with 3 or more ratings" in result["agreement_error"]


def test_report_figure_is_a_bar_chart_of_the_distribution(researcher):
    study, _, _ = ratings_study(researcher, [[1, 1, 2], [5, 5, 4], [3, 3, 3]])
    result = MODE.report.run(study, lambda *args: None)
    figure = MODE.report.figure("rating-distribution", result)
    heights = [patch.get_height() for patch in figure.axes[0].patches]
    assert heights == [1, 0, 1, 0, 1]
    with pytest.raises(KeyError):
        MODE.report.figure("nope", result)


def test_a_player_alone_on_a_pair_does_not_agree_with_themself(client, researcher):
    # players A, B, C; A is alone on pairs 1 and 2, meets B on pair 3; C is alone on pair 4
    table = [[3, None, None], [4, None, None], [2, 4, None], [None, None, 5]]
    study, _, players = ratings_study(researcher, table)
    result = MODE.report.run(study, lambda *args: None)
    by_name = {row["pseudonym"]: row for row in result["players"]}
    a, b, c = (by_name[p.pseudonym] for p in players)
    # A is compared on pair 3 only, with B's 4: two levels off
    assert (a["ratings"], a["compared"], a["exact"], a["adjacent"]) == (3, 1, 0, 0)
    assert (b["compared"], b["exact"], b["adjacent"]) == (1, 0, 0)
    # C met nobody: nothing to agree with, no 100%
    assert (c["ratings"], c["compared"], c["exact"], c["adjacent"]) == (1, 0, None, None)
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    row = re.search(rf"<tr><td>{players[2].pseudonym}</td>.*?</tr>", html).group(0)
    assert "100%" not in row
    assert re.search(r'<td class="num" data-column="compared">0</td>', row)


def test_fleiss_kappa_merges_4_and_5_only_when_the_study_says_so(client, researcher):
    table = [[1, 1, 2], [2, 3, 3], [4, 5, 5], [5, 5, 4], [5, 4, 4], [3, 3, 4]]
    final = [list(row) for row in table]
    merged = rules.virtual_raters(final, repetitions=100, seed=0, collapse_top=True)
    separate = rules.virtual_raters(final, repetitions=100, seed=0, collapse_top=False)
    assert merged["fleiss_kappa"]["mean"] != separate["fleiss_kappa"]["mean"]
    assert MODE.clean_settings({})["collapse_top"] is False
    client.force_login(researcher)
    for settings, expected, note in (
        ({}, separate, False),
        ({"collapse_top": True}, merged, True),
    ):
        study, _, _ = ratings_study(researcher, table)
        study.settings = MODE.clean_settings({**study.settings, **settings})
        study.save()
        result = MODE.report.run(study, lambda *args: None)
        kappa = {row["key"]: row["mean"] for row in result["agreement"]}["fleiss_kappa"]
        assert kappa == expected["fleiss_kappa"]["mean"]
        with TestCase.captureOnCommitCallbacks(execute=True):
            enqueue(report_request(study=study, user=researcher))
        html = client.get(reverse("study_report", args=[study.pk])).content.decode()
        assert ("levels 4 and 5 merged" in html) is note


def test_an_imported_vicr_dataset_merges_4_and_5_as_the_paper_did(researcher, tmp_path):
    csv_file = tmp_path / "sample.csv"
    csv_file.write_text(
        "image,caption,ratings,rating_2,rating_3\n"
        "http://x/a.jpg,a dog,4,5,5\nhttp://x/b.jpg,a cat,1,2,2\nhttp://x/c.jpg,a car,3,3,4\n",
        encoding="utf-8",
    )
    call_command(
        "import_ratings", str(csv_file), format="vicr-csv", owner=researcher.username, name="S"
    )
    study = Study.objects.get(name="S")
    assert study.settings["collapse_top"] is True and study.settings["scale_levels"] == 5
    result = MODE.report.run(study, lambda *args: None)
    assert result["collapse_top"] is True
    assert result["imported"] is True  # its "players" are rating positions


def test_players_share_ranks_by_score_in_the_report(researcher):
    study, _, players = ratings_study(researcher, [[3, 3, 4, 4], [2, 2, 2, 3]])
    for participant, score in zip(players, (7, 9, 7, 2), strict=True):
        participant.state["player"]["score"] = score
        participant.save()
    players[3].status = "probation"  # off the game: no rank
    players[3].save()
    result = MODE.report.run(study, lambda *args: None)
    ranks = {row["pseudonym"]: row["rank"] for row in result["players"]}
    assert [ranks[p.pseudonym] for p in players] == [2, 1, 2, None]
    assert [row["rank"] for row in result["players"]] == [1, 2, 2, None]


def game_table(seed, pairs=80, good=6):
    """Ratings of a random responder (column 0) and ``good`` raters who agree up to noise.

    Each pair has a true level and an ambiguity: a good rater is one level off with
    that probability. The random responder picks any level.
    """
    rng = random.Random(seed)
    table = []
    for _ in range(pairs):
        level, ambiguity = rng.randint(1, 5), rng.uniform(0.0, 0.8)
        row = [rng.randint(1, 5)]
        for _ in range(good):
            off = rng.choice((-1, 1)) if rng.random() < ambiguity else 0
            row.append(min(5, max(1, level + off)))
        table.append(row)
    return table


def test_rater_competency_flags_a_planted_random_responder(client, researcher):
    study, items, players = ratings_study(researcher, game_table(seed=4))
    result = MODE.report.run(study, lambda *args: None)
    rasch = result["rasch"]
    assert rasch["error"] == "" and rasch["converged"]
    rows = {row["pseudonym"]: row for row in rasch["players"]}
    randomer = rows[players[0].pseudonym]
    good = [rows[p.pseudonym] for p in players[1:]]
    # the random responder agrees least and fits worst; the consistent raters fit
    assert randomer["measure"] < min(row["measure"] for row in good)
    assert randomer["infit"] > 1.5 and randomer["flag"] == "noisy"
    assert randomer["infit"] > max(row["infit"] for row in good)
    assert all(row["flag"] == "" for row in good)
    assert all(row["responses"] == 80 for row in rasch["players"])
    assert len(rasch["thresholds"]) == 2
    assert rasch["pairs"]["measured"] + rasch["pairs"]["unmeasured"] == 80
    # the Wright map holds every measured player and pair on one logit scale
    figure = MODE.report.figure("wright-map", result)
    players_axes, pairs_axes = figure.axes[:2]
    assert sum(patch.get_width() for patch in players_axes.patches) == 7
    assert players_axes.get_ylim() == pairs_axes.get_ylim()
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Rater competency" in html and "Linacre" in html
    row = re.search(
        rf"<tr><td>{players[0].pseudonym}</td>.*?</tr>", html.split("Rater competency")[1]
    )
    assert "noisy" in row.group(0)
    svg = client.get(reverse("report_figure", args=[study.pk, "wright-map", "svg"]))
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"


def test_a_report_stored_before_the_rasch_section_still_renders(client, researcher):
    study, _, _ = ratings_study(researcher, [[1, 1, 2], [2, 3, 3], [4, 5, 5], [5, 5, 4]])
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    job = study.jobs.get(kind="report")
    old = {key: value for key, value in job.result.items() if key != "rasch"}
    for row in old["players"]:
        for key in ("compared", "rank"):
            row.pop(key, None)
    job.result = old
    job.save()
    page = client.get(reverse("study_report", args=[study.pk]))
    assert page.status_code == 200 and "Recompute" in page.content.decode()
    svg = client.get(reverse("report_figure", args=[study.pk, "wright-map", "svg"]))
    assert svg.status_code == 200


def test_report_page_renders_the_tables(client, researcher):
    study, _, _ = ratings_study(researcher, [[1, 1, 2], [2, 3, 3], [4, 5, 5], [5, 5, 4]])
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Agreement by virtual raters" in html and "Kendall" in html
    assert "Rating distribution" in html and "Players" in html
    expected = rules.virtual_raters([[1, 1, 2], [2, 3, 3], [4, 5, 5], [5, 5, 4]], seed=0)
    assert f"{expected['kendall_w']['mean']:.1f}" in html
    svg = client.get(reverse("report_figure", args=[study.pk, "rating-distribution", "svg"]))
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
    # Opened on its own the SVG is a document: matplotlib's style attributes must apply
    # under its policy, and it may still run and fetch nothing.
    assert b'style="' in svg.content
    policy = dict((d.split()[0], d.split()[1:]) for d in svg["Content-Security-Policy"].split("; "))
    assert policy["style-src"] == ["'unsafe-inline'"]
    assert policy["script-src"] == ["'none'"] and policy["default-src"] == ["'none'"]
    assert policy["connect-src"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]


# ---------------------------------------------------------------------------- export


def test_export_has_one_row_per_rating_with_pool_and_player_status(researcher, tmp_path):
    study = vicr_study(researcher, game=2, primes=(2, 4))
    participant = in_game(study)
    judgment = play(participant, 3)
    tutorial = play(player(study), 1)

    export_file(study=study, path=tmp_path / "export.parquet", export_format="parquet")

    rows = {
        row["judgment_id"]: row for row in pq.read_table(tmp_path / "export.parquet").to_pylist()
    }
    assert set(rows) == {judgment.pk, tutorial.pk}
    row = rows[judgment.pk]
    assert {k: row[k] for k in (
        "rating", "phase", "points", "truth", "consensus", "pool_size", "pool_human",
        "pool_primed", "score_after", "player_status", "final_view",
    )} == {
        "rating": 3,
        "phase": "game",
        "points": 2,
        "truth": None,
        "consensus": 3,
        "pool_size": 2,
        "pool_human": 0,
        "pool_primed": 2,
        "score_after": 2,
        "player_status": "game",
        "final_view": True,
    }  # fmt: skip
    caption = Caption.objects.get(pk=judgment.item.spec["caption_id"])
    assert (row["caption_id"], row["caption"], row["system"]) == (
        caption.pk,
        caption.text,
        caption.system,
    )
    row = rows[tutorial.pk]
    truth = truth_of(tutorial.item)  # the player's own draw decides which pair came first
    assert (row["phase"], row["truth"], row["points"], row["final_view"]) == (
        "tutorial",
        truth,
        2 - abs(truth - 1),
        False,
    )


def test_the_demo_vicr_study_opens_with_pools_large_enough_for_its_draws(db):
    # The live demo study only: the finished ones and the published releases are tested in
    # test_demo.py and cost half a minute here.
    call_command("load_demo", "--no-finished", "--no-published", stdout=io.StringIO())
    study = Study.objects.get(mode="vicr", name="Demo: VICR rating game")
    assert study.status == Study.Status.LIVE
    settings = MODE.settings(study)
    pools = {kind: study.items.filter(kind=kind).count() for kind in ("tutorial", "probation")}
    assert pools["tutorial"] > settings.tutorial_pairs, "two players' tutorials may differ"
    assert pools["probation"] >= settings.probation_pairs * settings.max_probation_attempts
    participant = player(study)
    tutorial = play_block(participant, settings.tutorial_pairs, exact)
    assert participant.status == "game"
    assert [j.item_id for j in tutorial] == drawn(participant, "tutorial")
