"""Leases: which item a participant gets, how many leases an item allows, expiry, races."""

from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Assignment, Judgment
from annotation.services.assignments import assignment_next, assignment_release_expired
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_close
from annotation.tasks import release_expired_leases
from tests.factories.core import (
    assert_counts_exact,
    crowd_participant,
    require_postgres,
    run_together,
    vehicle_study,
)

pytestmark = pytest.mark.django_db


def submit(participant, assignment, *, now=None, rating=3, part=0):
    return judgment_submit(
        participant=participant,
        token=assignment.token,
        data={"rating": rating},
        part=part,
        now=now,
    )


def test_concurrent_participants_are_spread_over_the_items_least_taken_first(researcher):
    study = vehicle_study(researcher, captions=3, target=2)
    items = list(study.items.order_by("position"))
    participants = [crowd_participant(study, f"w{n}") for n in range(7)]

    served = [assignment_next(participant=p) for p in participants]

    assert [a.item_id for a in served[:6]] == [item.pk for item in items] * 2
    assert served[6] is None, "every slot of every item is leased"
    assert_counts_exact(study)


def test_items_are_filled_least_judged_first(researcher):
    study = vehicle_study(researcher, captions=3, target=3)
    for worker in ("a", "b"):
        participant = crowd_participant(study, worker)
        submit(participant, assignment_next(participant=participant))

    later = assignment_next(participant=crowd_participant(study, "c"))

    judged = Counter(Judgment.objects.filter(study=study).values_list("item_id", flat=True))
    assert sorted(judged.values()) == [1, 1], "the first two went to different items"
    assert judged[later.item_id] == 0, "an unjudged item comes before a judged one"


def test_a_participant_never_gets_an_item_twice_and_then_gets_none(researcher):
    study = vehicle_study(researcher, captions=3, target=5)
    participant = crowd_participant(study)
    seen = []
    while (lease := assignment_next(participant=participant)) is not None:
        seen.append(lease.item_id)
        submit(participant, lease)
        assert len(seen) <= 3

    assert sorted(seen) == sorted(study.items.values_list("id", flat=True))
    assert_counts_exact(study)


def test_a_reload_returns_the_same_lease_without_restarting_the_clock(researcher):
    study = vehicle_study(researcher, captions=2)
    participant = crowd_participant(study)
    start = timezone.now()

    first = assignment_next(participant=participant, now=start)
    again = assignment_next(participant=participant, now=start + timedelta(minutes=5))

    assert (again.pk, again.token, again.served_at) == (first.pk, first.token, start)
    assert Assignment.objects.filter(participant=participant).count() == 1
    assert study.items.get(pk=first.item_id).open_lease_count == 1


def test_no_more_open_leases_than_the_target_allows(researcher):
    study = vehicle_study(researcher, captions=1, target=2)
    holders = [crowd_participant(study, w) for w in ("a", "b")]
    leases = [assignment_next(participant=p) for p in holders]
    submit(holders[0], leases[0])

    assert assignment_next(participant=crowd_participant(study, "c")) is None
    item = study.items.get()
    assert (item.judgment_count, item.open_lease_count) == (1, 1)
    assert_counts_exact(study)


def test_expired_leases_are_released_and_their_item_served_again(researcher, settings):
    # Crowd leases last the study's crowd_lease_seconds.
    study = vehicle_study(researcher, captions=1, target=1, crowd_lease_seconds=60)
    slow, other = crowd_participant(study, "slow"), crowd_participant(study, "other")
    start = timezone.now()
    lease = assignment_next(participant=slow, now=start)
    assert assignment_next(participant=other, now=start + timedelta(seconds=30)) is None

    assert assignment_release_expired(now=start + timedelta(seconds=59)) == 0
    assert assignment_release_expired(now=start + timedelta(seconds=61)) == 1
    assert assignment_release_expired(now=start + timedelta(seconds=62)) == 0, "only once"

    lease.refresh_from_db()
    assert lease.status == Assignment.Status.RELEASED
    assert_counts_exact(study)
    taken_over = assignment_next(participant=other, now=start + timedelta(seconds=62))
    assert taken_over.item_id == lease.item_id

    with pytest.raises(ServiceError) as refused:
        submit(slow, lease, now=start + timedelta(seconds=70))
    assert refused.value.status == 409
    assert "time ran out" in refused.value.message
    assert not Judgment.objects.filter(assignment=lease).exists()
    assert_counts_exact(study)


def test_a_returning_participant_whose_lease_lapsed_gets_it_back_with_a_new_clock(
    researcher, settings
):
    # Crowd leases last the study's crowd_lease_seconds.
    study = vehicle_study(researcher, captions=2, target=1, crowd_lease_seconds=60)
    participant = crowd_participant(study)
    start = timezone.now()
    lapsed = assignment_next(participant=participant, now=start)
    # Back after the wait a lapse costs (issue 29's squatting rule, CAPEVAL_LAPSE_WAIT_SECONDS).
    returned_at = start + timedelta(seconds=61 + settings.CAPEVAL_LAPSE_WAIT_SECONDS)

    again = assignment_next(participant=participant, now=returned_at)

    # A lapsed, unanswered item was never judged by them, so it may come back (a VICR
    # tutorial pair must); the lease is reopened, not duplicated, and its clock restarts.
    assert again.pk == lapsed.pk
    assert again.status == Assignment.Status.OPEN
    assert again.served_at == returned_at
    assert Assignment.objects.filter(participant=participant).count() == 1
    assert_counts_exact(study)


def test_a_lapsed_lease_frees_its_slot_for_someone_else(researcher, settings):
    # Crowd leases last the study's crowd_lease_seconds.
    study = vehicle_study(researcher, captions=1, target=1, crowd_lease_seconds=60)
    start = timezone.now()
    lapsed = assignment_next(participant=crowd_participant(study), now=start)
    other = crowd_participant(study, "next")
    assert assignment_next(participant=other, now=start + timedelta(seconds=30)) is None

    assert assignment_release_expired(now=start + timedelta(seconds=61)) == 1

    taken_over = assignment_next(participant=other, now=start + timedelta(seconds=62))
    assert taken_over.item_id == lapsed.item_id
    assert_counts_exact(study)


def test_the_beat_task_releases_expired_leases(researcher, settings):
    schedule = django_settings.CELERY_BEAT_SCHEDULE.values()
    assert "annotation.tasks.release_expired_leases" in {entry["task"] for entry in schedule}
    # Crowd leases last the study's crowd_lease_seconds.
    study = vehicle_study(researcher, captions=2, target=1, crowd_lease_seconds=60)
    long_ago = timezone.now() - timedelta(minutes=5)
    expired = assignment_next(participant=crowd_participant(study, "a"), now=long_ago)
    current = assignment_next(participant=crowd_participant(study, "b"))

    release_expired_leases.delay()

    expired.refresh_from_db()
    current.refresh_from_db()
    assert (expired.status, current.status) == ("released", "open")
    assert_counts_exact(study)


def test_a_new_round_serves_an_item_again_even_when_others_hold_it_in_that_round(researcher):
    study = vehicle_study(researcher, captions=1, target=5)
    repeater, other = crowd_participant(study, "repeat"), crowd_participant(study, "other")
    submit(repeater, assignment_next(participant=repeater))
    assert assignment_next(participant=repeater) is None
    other.state = {"round": 1}
    other.save()
    assert assignment_next(participant=other).round == 1

    repeater.state = {"round": 1}
    repeater.save()
    again = assignment_next(participant=repeater)

    assert again is not None and again.round == 1
    assert again.item_id == study.items.get().pk


def test_a_study_that_is_not_live_serves_nothing(researcher):
    study = vehicle_study(researcher, captions=2)
    participant = crowd_participant(study)
    study_close(study=study)

    assert assignment_next(participant=participant) is None
    assert not Assignment.objects.exists()


# Races, on PostgreSQL: each thread has its own connection (Django's are per thread).


@pytest.mark.django_db(transaction=True)
def test_two_participants_racing_for_the_last_lease_only_one_wins(researcher):
    require_postgres()
    for attempt in range(10):
        study = vehicle_study(researcher, captions=1, target=1, name=f"race {attempt}")
        racers = [crowd_participant(study, w) for w in ("a", "b")]

        results, errors = run_together([lambda p=p: assignment_next(participant=p) for p in racers])

        assert not errors
        assert sum(result is not None for result in results) == 1
        assert Assignment.objects.filter(item__study=study).count() == 1
        assert_counts_exact(study)


@pytest.mark.django_db(transaction=True)
def test_two_participants_racing_for_two_items_get_one_each(researcher):
    require_postgres()
    for attempt in range(10):
        study = vehicle_study(researcher, captions=2, target=1, name=f"race {attempt}")
        racers = [crowd_participant(study, w) for w in ("a", "b")]

        results, errors = run_together([lambda p=p: assignment_next(participant=p) for p in racers])

        assert not errors
        assert None not in results
        assert results[0].item_id != results[1].item_id
        assert_counts_exact(study)


@pytest.mark.django_db(transaction=True)
def test_one_participant_in_two_tabs_gets_one_lease(researcher):
    require_postgres()
    study = vehicle_study(researcher, captions=3, target=3)
    participant = crowd_participant(study)

    results, errors = run_together([lambda: assignment_next(participant=participant)] * 2)

    assert not errors
    assert results[0].token == results[1].token
    assert Assignment.objects.filter(participant=participant).count() == 1


@pytest.mark.django_db(transaction=True)
def test_many_participants_hammering_never_exceed_targets_or_repeat_items(researcher):
    require_postgres()
    threads, requests, items, target = 8, 20, 30, 3
    study = vehicle_study(researcher, captions=items, target=target)
    participants = [crowd_participant(study, f"w{n}") for n in range(threads)]

    def work(participant):
        served = 0
        for _ in range(requests):
            lease = assignment_next(participant=participant)
            if lease is None:
                break
            submit(participant, lease)
            served += 1
        return served

    results, errors = run_together([lambda p=p: work(p) for p in participants])

    assert not errors
    assert_counts_exact(study)
    judged = Judgment.objects.filter(study=study)
    assert judged.count() == sum(results) == items * target, "every slot filled, none twice"
    pairs = list(judged.values_list("participant_id", "item_id"))
    assert len(pairs) == len(set(pairs)), "a participant judged an item twice"
    assert all(item.judgment_count == target for item in study.items.all())
