"""Two players rating the same game pair at the same instant (PostgreSQL, real transactions).

Each rating must be scored against the ratings committed before its own: the item row lock
taken by the submission service serialises them, so the two scores equal those of the
serial order in which they were stored (Judgment id order).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Judgment
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from rubrics import vicr as rules
from tests.factories.core import require_postgres, run_together
from tests.factories.vicr import in_game, vicr_study

pytestmark = pytest.mark.django_db(transaction=True)


def replay(pair_judgments, primes):
    """Score the ratings in commit order through rubrics.vicr alone."""
    humans, scores = [], []
    for judgment in pair_judgments:
        pool = rules.consensus_pool(humans, primes)
        scored = rules.score_rating(judgment.payload["rating"], pool)
        scores.append((len(pool), scored.consensus, scored.points))
        humans.append(judgment.payload["rating"])
    return scores


@pytest.mark.parametrize("rounds", [5])
def test_simultaneous_ratings_of_one_pair_are_scored_as_in_a_serial_order(researcher, rounds):
    require_postgres()
    for attempt in range(rounds):
        study = vicr_study(researcher, game=1, primes=(2, 2), max_ratings=7)
        earlier = in_game(study)
        first = assignment_next(participant=earlier)
        judgment_submit(
            participant=earlier,
            token=first.token,
            data={"rating": "5"},
            now=first.served_at + timedelta(seconds=4),
        )
        racers = [in_game(study) for _ in range(2)]
        leases = [assignment_next(participant=p) for p in racers]
        assert len({lease.item_id for lease in leases}) == 1, "both hold the same pair"
        later = timezone.now() + timedelta(seconds=10)
        calls = [
            lambda p=p, lease=lease, r=r, later=later: judgment_submit(
                participant=p, token=lease.token, data={"rating": r}, now=later
            )
            for p, lease, r in zip(racers, leases, ("1", "4"), strict=True)
        ]
        results, errors = run_together(calls)
        assert not errors, errors
        stored = list(Judgment.objects.filter(study=study, item__kind="game").order_by("id"))
        assert len(stored) == 3
        expected = replay(stored, [2, 2])
        got = [(j.result["pool_size"], j.result["consensus"], j.result["points"]) for j in stored]
        assert got == expected, f"attempt {attempt}"
        # the later of the two racers saw the earlier one's rating in its pool
        assert [j.result["pool_human"] for j in stored] == [0, 1, 2]
