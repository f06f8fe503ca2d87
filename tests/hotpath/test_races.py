"""Real races on PostgreSQL, old services against new (issue 48): the same guarantees when
calls overlap in threads, each with its own connection and transaction.

Which racer wins is the scheduler's choice, so the two paths cannot be compared call by
call as in ``test_differential.py``. What must not depend on it is compared instead: how
many leases and judgments each race produced, on how many distinct items, the repeats
recognised, and counters that match the rows. Each race runs on a fresh study per path,
several times.
"""

from __future__ import annotations

from collections import Counter

import pytest

from annotation.models import Assignment, Item, Judgment
from tests.factories.core import (
    assert_counts_exact,
    crowd_participant,
    require_postgres,
    run_together,
    vehicle_study,
)
from tests.hotpath.test_differential import NEW, OLD

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS = 4


def _study(owner, name, *, captions, target):
    return vehicle_study(owner, name=name, captions=captions, target=target, completion_after=50)


def _racers(study, count):
    return [crowd_participant(study, f"racer-{n}") for n in range(count)]


def _summary(study, results, errors):
    """What a race left that does not depend on who won it."""
    assert not errors, errors
    assert_counts_exact(study)
    leases = Assignment.objects.filter(item__study=study)
    return {
        "results": Counter(type(result).__name__ for result in results),
        "leases": leases.count(),
        "leased items": leases.values("item_id").distinct().count(),
        "judgments": Judgment.objects.filter(study=study).count(),
        "counted": sorted(
            Item.objects.filter(study=study).values_list("judgment_count", flat=True)
        ),
    }


def race_for_the_last_slots(path, owner, name):
    """Four participants ask at once for two items of one slot each."""
    study = _study(owner, name, captions=2, target=1)
    racers = _racers(study, 4)
    results, errors = run_together([lambda p=p: path.next(participant=p) for p in racers])
    return _summary(study, results, errors)


def race_of_two_tabs(path, owner, name):
    """One participant asks twice at once: one lease, returned to both."""
    study = _study(owner, name, captions=3, target=3)
    (racer,) = _racers(study, 1)
    results, errors = run_together([lambda: path.next(participant=racer)] * 2)
    summary = _summary(study, results, errors)
    summary["same lease"] = results[0].pk == results[1].pk
    return summary


def race_of_a_double_submission(path, owner, name):
    """One answer sent twice at once: stored once, the other call gets the stored one."""
    study = _study(owner, name, captions=1, target=1)
    (racer,) = _racers(study, 1)
    lease = path.next(participant=racer)

    def send():
        return path.submit(participant=racer, token=lease.token, data={"rating": 3})

    results, errors = run_together([send, send])
    summary = _summary(study, results, errors)
    summary["created"] = sorted(result.created for result in results)
    summary["same judgment"] = results[0].judgment.pk == results[1].judgment.pk
    return summary


def race_of_workers_filling_a_study(path, owner, name):
    """Four workers ask and answer until nothing is left: every slot filled, none twice."""
    study = _study(owner, name, captions=6, target=2)
    racers = _racers(study, 4)

    def work(participant):
        served = 0
        for _ in range(10):
            lease = path.next(participant=participant)
            if lease is None:
                break
            path.submit(participant=participant, token=lease.token, data={"rating": 2})
            served += 1
        return served

    results, errors = run_together([lambda p=p: work(p) for p in racers])
    summary = _summary(study, results, errors)
    summary["results"] = sum(results)
    return summary


RACES = [
    race_for_the_last_slots,
    race_of_two_tabs,
    race_of_a_double_submission,
    race_of_workers_filling_a_study,
]


@pytest.mark.parametrize("race", RACES, ids=lambda race: race.__name__)
def test_old_and_new_services_leave_the_same_after_a_race(researcher, race):
    require_postgres()
    for number in range(ROUNDS):
        old = race(OLD, researcher, f"old {number}")
        new = race(NEW, researcher, f"new {number}")
        assert old == new, (number, old, new)
