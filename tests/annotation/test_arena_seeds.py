"""The arena's draws never depend on primary keys (issue 47): one study seed and one crowd
give the same battles, on the same sides, whatever ids the database hands out. The lease id
once drew the sides, so the bench's results changed with the database (the audit's seed
2002: 180/120 battles against the project's 300/390).
"""

from __future__ import annotations

import pytest

from annotation.models import Assignment
from tests.factories.arena import arena_study, judge, shown_left, worker

pytestmark = pytest.mark.django_db


def served(study, names, rounds=4):
    """Each worker's battles in turn: (worker, battle position, pair, side shown left)."""
    out = []
    workers = [worker(study, name) for name in names]
    for _ in range(rounds):
        for participant in workers:
            lease, _ = judge(participant, lambda lease: "a")
            if lease is None:
                continue
            spec = lease.item.spec
            pair = (spec.get("system_a"), spec.get("system_b"))
            out.append((participant.external_id, lease.item.position, pair, shown_left(lease)))
    return out


def test_one_seed_and_one_crowd_give_the_same_battles_and_sides_on_any_ids(researcher):
    names = ["crowd-a", "crowd-b", "crowd-c"]
    first = served(arena_study(researcher, seed=2002, images=8, catch_rate=0), names)
    # Other rows in between, so the second study's leases get other ids.
    filler = arena_study(researcher, seed=7, images=3, catch_rate=0)
    served(filler, ["x", "y"], rounds=2)
    second = served(arena_study(researcher, seed=2002, images=8, catch_rate=0), names)
    assert len(first) == 12 and first == second
    ids = [lease.pk for lease in Assignment.objects.order_by("pk")]
    assert len(set(ids)) == len(ids)  # the second study's leases had other ids
    # Both sides occur (a constant side would pass the equality too).
    assert {side for *_, side in first} == {"a", "b"}
