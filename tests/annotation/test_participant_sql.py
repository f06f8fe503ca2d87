"""The hand-written read of a crowd worker's participant gives what the ORM gave (issue 48).

``participant_sql.crowd_participant`` replaced ``Participant.objects.select_related("study")
.filter(pk__in=ids, study__public_id=..., user__isnull=True).first()`` on every crowd request.
Each case below runs both and requires the same rows, every concrete column of the
participant and its study equal (JSON, timestamps, UUIDs and addresses converted as the ORM
converts them), on whichever database the suite runs.
"""

import uuid
from datetime import UTC, datetime

import pytest

from annotation.models import Judgment, Participant
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participant_sql import crowd_participant, latest_answer
from tests.factories.core import crowd_participant as new_worker
from tests.factories.core import vehicle_study

pytestmark = pytest.mark.django_db


def _orm(ids, public_id):
    return (
        Participant.objects.select_related("study")
        .filter(pk__in=ids, study__public_id=public_id, user__isnull=True)
        .first()
    )


def _columns(row) -> dict:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def _same(ids, public_id):
    expected, got = _orm(ids, public_id), crowd_participant(ids, public_id)
    if expected is None:
        assert got is None
        return None
    assert _columns(got) == _columns(expected)
    assert _columns(got.study) == _columns(expected.study)
    assert not got._state.adding and got._state.db == expected._state.db
    return got


def _filled(study, name):
    """A worker with every kind of column set: JSON state and flags, an address, a network,
    a browser, a completion time."""
    worker = new_worker(study, name)
    worker.state = {"player": {"score": 3, "game_ratings": 2}, "text": "é ✓"}
    worker.flags = [["lease_lapsed", "2026-03-02T09:00:00+00:00", "why"]]
    worker.external_meta = {"STUDY_ID": "s", "SESSION_ID": "x"}
    worker.address = "2001:db8::7"
    worker.network = "2001:db8::/48"
    worker.browser_id = "b" * 32
    worker.completed_at = datetime(2026, 3, 2, 9, 30, 15, 123456, tzinfo=UTC)
    worker.status = "game"
    worker.save()
    return worker


def test_the_worker_of_the_study_is_read_whole(researcher):
    study = vehicle_study(researcher)
    worker = _filled(study, "w-full")
    got = _same([worker.pk], study.public_id)
    assert got.pk == worker.pk and got.study.pk == study.pk
    assert got.state["text"] == "é ✓" and got.completed_at == worker.completed_at


def test_the_session_holds_workers_of_several_studies(researcher):
    """Only the URL's study's worker is read, whatever else the session holds."""
    first, second = vehicle_study(researcher), vehicle_study(researcher)
    ids = [new_worker(first, "a").pk, _filled(second, "b").pk]
    assert _same(ids, second.public_id).study.pk == second.pk
    assert _same(ids, first.public_id).study.pk == first.pk


def test_no_worker_for_another_study_an_account_or_no_uuid(researcher, annotator):
    study, other = vehicle_study(researcher), vehicle_study(researcher)
    worker = new_worker(study, "w")
    assert _same([worker.pk], other.public_id) is None
    assert _same([worker.pk], uuid.uuid4()) is None
    account = Participant.objects.create(
        study=study, source=Participant.Source.ACCOUNT, user=annotator
    )
    assert _same([account.pk], study.public_id) is None
    assert crowd_participant([worker.pk], "not-a-uuid") is None
    assert crowd_participant([], study.public_id) is None


def _orm_latest(token, participant_id):
    return (
        Judgment.objects.select_related("item")
        .filter(assignment__token=token, assignment__participant_id=participant_id)
        .order_by("-part")
        .first()
    )


def test_the_latest_answer_of_a_lease_is_the_orms(researcher):
    """The feedback page's read: the highest part answered on the worker's own lease."""
    study = vehicle_study(researcher, parts=2)
    worker, other = new_worker(study, "w-parts"), new_worker(study, "w-other")
    lease = assignment_next(participant=worker)
    for part in (0, 1):
        judgment_submit(
            participant=worker, token=lease.token, part=part, data={"rating": str(part + 2)}
        )
    got, expected = latest_answer(lease.token, worker.pk), _orm_latest(lease.token, worker.pk)
    assert got.part == 1 and got.payload == {"rating": 3}
    assert _columns(got) == _columns(expected)
    assert _columns(got.item) == _columns(expected.item)
    # Another worker's token, or none stored: nothing, as the ORM gives.
    assert latest_answer(lease.token, other.pk) is None is _orm_latest(lease.token, other.pk)
    unanswered = assignment_next(participant=other)
    assert latest_answer(unanswered.token, other.pk) is None
