"""Submissions: validation, idempotent repeats, too-fast refusals, multi-part order, races."""

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Assignment, Judgment, Participant
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_close
from tests.factories.core import (
    assert_counts_exact,
    crowd_participant,
    require_postgres,
    run_together,
    vehicle_study,
)

pytestmark = pytest.mark.django_db


def leased(researcher, **settings):
    study = vehicle_study(researcher, captions=2, **settings)
    participant = crowd_participant(study)
    return study, participant, assignment_next(participant=participant)


def test_a_valid_submission_is_stored_and_completes_the_lease(researcher):
    study, participant, lease = leased(researcher)
    later = lease.served_at + timedelta(seconds=4)

    outcome = judgment_submit(
        participant=participant, token=lease.token, data={"rating": "4"}, now=later
    )

    assert outcome.created
    judgment = outcome.judgment
    assert (judgment.payload, judgment.dwell_ms, judgment.item_id) == (
        {"rating": 4},
        4000,
        lease.item_id,
    )
    assert judgment.result == {"judgments_before": 0}, "scored against the locked item row"
    lease.refresh_from_db()
    assert (lease.status, lease.submitted_at) == (Assignment.Status.SUBMITTED, later)
    assert participant.state == {"answered": 1}, "the caller sees the mode's new state"
    assert_counts_exact(study)


def test_submitting_the_same_token_twice_returns_the_stored_judgment(researcher):
    study, participant, lease = leased(researcher)
    first = judgment_submit(participant=participant, token=lease.token, data={"rating": 2})

    repeat = judgment_submit(participant=participant, token=lease.token, data={"rating": 5})

    assert not repeat.created
    assert repeat.judgment.pk == first.judgment.pk
    assert repeat.judgment.payload == {"rating": 2}, "the stored answer, not the new one"
    assert Judgment.objects.count() == 1
    participant.refresh_from_db()
    assert participant.state == {"answered": 1}, "after_submit ran once"
    assert study.items.get(pk=lease.item_id).judgment_count == 1


@pytest.mark.parametrize("bad", [None, "", "six", 0, 6, 2.5, True, [3]])
def test_an_invalid_rating_is_refused_naming_the_field_and_nothing_is_stored(researcher, bad):
    study, participant, lease = leased(researcher)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=participant, token=lease.token, data={"rating": bad})

    assert (refused.value.field, refused.value.status) == ("rating", 400)
    assert "1 to 5" in refused.value.message
    assert not Judgment.objects.exists()
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.OPEN, "the participant may correct and resend"
    participant.refresh_from_db()
    assert participant.state == {}


def test_a_submission_faster_than_the_protocol_allows_is_refused(researcher):
    study, participant, lease = leased(researcher, min_seconds=3)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={"rating": 3},
            now=lease.served_at + timedelta(seconds=1.2),
        )

    assert refused.value.status == 429
    assert "at least 3 seconds" in refused.value.message
    assert "1.2 s" in refused.value.message
    assert "Nothing was saved" in refused.value.message
    assert not Judgment.objects.exists()
    assert_counts_exact(study)

    accepted = judgment_submit(
        participant=participant,
        token=lease.token,
        data={"rating": 3},
        now=lease.served_at + timedelta(seconds=3),
    )
    assert accepted.created and accepted.judgment.dwell_ms == 3000


def test_parts_are_answered_in_order_and_the_lease_completes_after_the_last(researcher):
    study, participant, lease = leased(researcher, parts=3, min_seconds=2)
    start = lease.served_at

    def send(part, seconds, rating=3):
        # The clock, not just ``now``: a later part's serving time is the stored row's
        # created_at, which Django stamps itself.
        with mock.patch(
            "django.utils.timezone.now", return_value=start + timedelta(seconds=seconds)
        ):
            return judgment_submit(
                participant=participant, token=lease.token, part=part, data={"rating": rating}
            )

    with pytest.raises(ServiceError) as out_of_order:
        send(1, 10)
    assert out_of_order.value.status == 409
    assert "part 1 first" in out_of_order.value.message
    with pytest.raises(ServiceError) as missing:
        send(3, 10)
    assert "does not exist" in missing.value.message
    assert not Judgment.objects.exists()

    first = send(0, 2, rating=1)
    assert send(0, 3, rating=5).judgment.pk == first.judgment.pk, "a second answer: the stored one"
    with pytest.raises(ServiceError) as too_fast:
        send(1, 3)  # part 1 was shown when part 0 was stored, one second earlier
    assert too_fast.value.status == 429
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.OPEN, "the lease stays open between parts"
    assert study.items.get(pk=lease.item_id).judgment_count == 0

    send(1, 30)
    send(2, 60)

    lease.refresh_from_db()
    assert lease.status == Assignment.Status.SUBMITTED
    assert list(lease.judgments.values_list("part", flat=True)) == [0, 1, 2]
    assert study.items.get(pk=lease.item_id).judgment_count == 1, "one per assignment"
    assert_counts_exact(study)


def test_a_token_not_served_to_the_participant_is_refused(researcher):
    study, owner_of_lease, lease = leased(researcher)
    intruder = crowd_participant(study, "intruder")

    for token in (lease.token, "no-such-token"):
        with pytest.raises(ServiceError) as refused:
            judgment_submit(participant=intruder, token=token, data={"rating": 3})
        assert refused.value.status == 404
        assert "not served to you" in refused.value.message

    assert not Judgment.objects.exists()


def test_a_lease_of_another_study_is_refused(researcher):
    _, _, lease = leased(researcher)
    elsewhere = crowd_participant(vehicle_study(researcher, name="Other"), "worker-1")

    with pytest.raises(ServiceError):
        judgment_submit(participant=elsewhere, token=lease.token, data={"rating": 3})
    assert not Judgment.objects.exists()


def test_a_closed_study_takes_no_new_judgments_but_repeats_still_answer(researcher):
    study = vehicle_study(researcher, captions=2)
    participant = crowd_participant(study)
    done = assignment_next(participant=participant)
    stored = judgment_submit(participant=participant, token=done.token, data={"rating": 3})
    pending = assignment_next(participant=participant)
    study_close(study=study)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=participant, token=pending.token, data={"rating": 3})
    # 410 Gone: the study is over for good (docs/participation.md, study_closed; issue 42).
    assert refused.value.status == 410 and "closed" in refused.value.message
    repeat = judgment_submit(participant=participant, token=done.token, data={"rating": 3})
    assert repeat.judgment.pk == stored.judgment.pk
    assert Judgment.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_token_submitted_twice_at_the_same_instant_stores_one_judgment(researcher):
    require_postgres()
    for attempt in range(10):
        study = vehicle_study(researcher, captions=1, name=f"double {attempt}")
        participant = crowd_participant(study)
        lease = assignment_next(participant=participant)
        now = timezone.now()

        def send(rating, lease=lease, participant=participant, now=now):
            return judgment_submit(
                participant=participant, token=lease.token, data={"rating": rating}, now=now
            )

        results, errors = run_together([lambda: send(2), lambda: send(4)])

        assert not errors
        assert Judgment.objects.filter(assignment=lease).count() == 1
        assert results[0].judgment.pk == results[1].judgment.pk
        assert sorted(r.created for r in results) == [False, True]
        participant.refresh_from_db()
        assert participant.state == {"answered": 1}
        assert_counts_exact(study)


@pytest.mark.django_db(transaction=True)
def test_two_leases_of_one_participant_submitted_together_keep_both_state_updates(researcher):
    require_postgres()
    study = vehicle_study(researcher, captions=2)
    participant = crowd_participant(study)
    first = assignment_next(participant=participant)
    first_token = first.token
    # A second open lease, as after a lapsed lease was answered late in another tab.
    second = Assignment.objects.create(
        participant=participant,
        item=study.items.exclude(pk=first.item_id).get(),
        served_at=first.served_at,
        expires_at=first.expires_at,
    )
    study.items.filter(pk=second.item_id).update(open_lease_count=1)

    def send(token):
        own_copy = Participant.objects.get(pk=participant.pk)
        return judgment_submit(participant=own_copy, token=token, data={"rating": 3})

    results, errors = run_together([lambda: send(first_token), lambda: send(second.token)])

    assert not errors
    participant.refresh_from_db()
    assert participant.state == {"answered": 2}, "neither submission lost the other's update"
    assert_counts_exact(study)
