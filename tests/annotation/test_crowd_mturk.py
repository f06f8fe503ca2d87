"""MTurk through boto3 pointed at a local stand-in of the requester API: the sync reclaims
rejected and abandoned assignments; approve, reject and bonus reach it with the right ids;
a bonus retried after an error or a lost answer is paid once (UniqueRequestToken)."""

import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, CrowdLedgerEntry, Participant
from annotation.services.assignments import assignment_next
from annotation.services.crowd.credentials import credential_save
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker
from tests.factories.core import vehicle_study
from tests.factories.crowd_platforms import PlatformServer

pytestmark = pytest.mark.django_db

KEY_ID = "AKIAEXAMPLEKEY1234"
SECRET_KEY = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
HIT = "3HITEXAMPLE0000000000000000"


@pytest.fixture
def platform(settings):
    with PlatformServer() as server:
        settings.CAPEVAL_MTURK_SANDBOX_ENDPOINT = server.url
        settings.CAPEVAL_MTURK_ENDPOINT = "http://127.0.0.1:9"  # live: never used here
        settings.CAPEVAL_CROWD_TIMEOUT = 2
        yield server


@pytest.fixture
def study(researcher):
    credential_save(
        user=researcher,
        values={"mturk_access_key_id": KEY_ID, "mturk_secret_access_key": SECRET_KEY},
        mturk_sandbox=True,
    )
    return vehicle_study(researcher, captions=2, target=1, mturk_hit_ids=f" {HIT} ")


def worker(study, worker_id, assignment):
    participant, _ = participant_for_crowd_worker(
        study=study,
        source=Participant.Source.MTURK,
        external_id=worker_id,
        meta={"workerId": worker_id, "assignmentId": assignment, "hitId": HIT},
    )
    return participant


def started(study):
    a = worker(study, "WA", "ASG-A")
    lease = assignment_next(participant=a)
    judgment_submit(participant=a, token=lease.token, data={"rating": 4})
    held = assignment_next(participant=a)
    b = worker(study, "WB", "ASG-B")
    assert assignment_next(participant=b) is None
    return a, b, held


def test_sync_reclaims_a_rejected_assignment(study, platform, capsys):
    a, b, held = started(study)
    platform.state.assignments[HIT] = [
        {"AssignmentId": "ASG-A", "WorkerId": "WA", "HITId": HIT, "AssignmentStatus": "Rejected"}
    ]
    call_command("crowd_sync", str(study.pk))
    assert "1 worker(s) who left, 1 lease(s) released" in capsys.readouterr().out
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.RELEASED
    assert assignment_next(participant=b).item_id == held.item_id
    (listed,) = platform.state.calls("ListAssignmentsForHIT")
    assert listed[3]["HITId"] == HIT


def test_sync_reclaims_an_abandoned_assignment_only_after_its_duration(study, platform):
    a, b, held = started(study)
    platform.state.assignment_seconds = 600
    call_command("crowd_sync", str(study.pk))  # just arrived: still working
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.OPEN
    Participant.objects.filter(pk=a.pk).update(created_at=timezone.now() - timedelta(seconds=601))
    call_command("crowd_sync", str(study.pk))  # not listed after 10 minutes: gone
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.RELEASED
    a.refresh_from_db()
    assert a.external_meta["platform_status"] == "Abandoned"


def review(client, study, **data):
    return client.post(reverse("study_crowd_review", args=[study.pk]), data=data)


def test_approve_reject_and_bonus_reach_mturk(client, researcher, study, platform):
    good = worker(study, "WG", "ASG-G")
    bad = worker(study, "WX", "ASG-X")
    client.force_login(researcher)
    base = {"filter": "all", "step": "confirm"}
    review(client, study, **base, action="approve", participants=[good.pk])
    review(client, study, **base, action="reject", participants=[bad.pk])
    review(client, study, **base, action="bonus", participants=[good.pk], amount="0.75")
    state = platform.state
    assert [c[3] for c in state.calls("ApproveAssignment")] == [{"AssignmentId": "ASG-G"}]
    (reject,) = state.calls("RejectAssignment")
    assert reject[3]["AssignmentId"] == "ASG-X" and reject[3]["RequesterFeedback"]
    (bonus,) = state.calls("SendBonus")
    entry = CrowdLedgerEntry.objects.get(action="bonus")
    # The idempotency key is the row's own: its id, then its creation time (so another
    # CapEval sharing the MTurk account cannot reuse it), within MTurk's 64 characters.
    token = bonus[3].pop("UniqueRequestToken")
    assert token.startswith(f"capeval-{entry.pk}-") and len(token) <= 64
    assert bonus[3] == {
        "WorkerId": "WG",
        "AssignmentId": "ASG-G",
        "BonusAmount": "0.75",
        "Reason": "bonus",
    }
    # boto3 signed with the stored key pair (SigV4 names the key id).
    assert all(f"Credential={KEY_ID}/" in c[4]["Authorization"] for c in state.requests)
    assert set(CrowdLedgerEntry.objects.values_list("status", flat=True)) == {"done"}


def test_a_bonus_retried_after_a_lost_answer_is_paid_once(client, researcher, study, platform):
    good = worker(study, "WG", "ASG-G")
    client.force_login(researcher)
    data = {"filter": "all", "step": "confirm", "action": "bonus", "amount": "1"}
    review(client, study, **data, participants=[good.pk])
    # As if the answer had been lost: the row is uncertain, MTurk has paid, and its
    # ListBonusPayments does not show the bonus yet (a listing that lags).
    CrowdLedgerEntry.objects.update(status="uncertain")
    platform.state.bonus_records.clear()
    review(client, study, **data, participants=[good.pk])
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "done" and "already paid" in entry.answer
    assert len(platform.state.calls("ListBonusPayments")) == 1  # checked first,
    assert len(platform.state.calls("SendBonus")) == 2  # then the retry reached MTurk ...
    assert list(platform.state.bonus_tokens.values()) == [2]  # ... with the same token,
    assert platform.state.bonuses_paid == [("WG", "1.00")]  # which MTurk refused: paid once


def test_the_secret_key_is_never_in_a_page_an_export_a_log_or_the_database(
    client, researcher, platform, caplog
):
    """The key pair goes in through the account form, is used to sign a real call, and its
    secret half is nowhere afterwards: not in a page, a dump, the table or the log."""
    caplog.set_level(logging.DEBUG)  # botocore's own debug log included
    client.force_login(researcher)
    form = {"mturk_access_key_id": KEY_ID, "mturk_secret_access_key": SECRET_KEY}
    page = client.post(reverse("account_crowd"), {**form, "mturk_mode": "sandbox"}, follow=True)
    study = vehicle_study(researcher, captions=1, target=1, mturk_hit_ids=HIT)
    good = worker(study, "WG", "ASG-G")
    review(client, study, filter="all", step="confirm", action="approve", participants=[good.pk])
    assert len(platform.state.calls("ApproveAssignment")) == 1  # the stored pair signed it
    pages = [
        page.content.decode(),
        client.get(reverse("account_crowd")).content.decode(),
        client.get(reverse("study_crowd_review", args=[study.pk])).content.decode(),
        client.get(f"/api/studies/{study.pk}/crowd/ledger/").content.decode(),
    ]
    dump = StringIO()
    call_command("dumpdata", "annotation", stdout=dump)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM annotation_crowdcredential")
        rows = " ".join(str(value) for row in cursor.fetchall() for value in row)
    assert rows.count("gAAAA") >= 2  # both halves stored as Fernet tokens
    for text in [*pages, dump.getvalue(), rows, caplog.text]:
        assert SECRET_KEY not in text
