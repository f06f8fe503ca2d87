"""Prolific end to end against a local stand-in of its API (tests/factories/crowd_platforms.py):
the webhook (signature, freshness, once per event, reclaim), approve, reject and bonus from
the review page, a bonus retried after a timeout paid once, and the token kept secret."""

import base64
import hashlib
import hmac
import json
import logging
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from annotation.crowd.signature import prolific_signature
from annotation.models import (
    Assignment,
    CrowdCredential,
    CrowdEvent,
    CrowdLedgerEntry,
    Judgment,
    Participant,
)
from annotation.services.assignments import assignment_next
from annotation.services.crowd.credentials import credential_save
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker
from annotation.tasks import crowd_sync_live
from tests.factories.core import vehicle_study
from tests.factories.crowd_platforms import PlatformServer

pytestmark = pytest.mark.django_db

TOKEN = "prolific-token-Zq8vX3kP0wLr5"
SECRET = "webhook-secret-Hn4tY7"
PSTUDY = "60f1a2b3c4d5e6f7a8b9c0d1"


@pytest.fixture
def platform(settings):
    with PlatformServer() as server:
        server.state.prolific_token = TOKEN
        settings.CAPEVAL_PROLIFIC_API_URL = server.url
        settings.CAPEVAL_CROWD_TIMEOUT = 1
        yield server


@pytest.fixture
def study(researcher):
    credential_save(
        user=researcher,
        values={"prolific_token": TOKEN, "prolific_webhook_secret": SECRET},
        mturk_sandbox=True,
    )
    return vehicle_study(researcher, captions=2, target=1, prolific_study_id=PSTUDY)


def worker(study, pid, session):
    participant, _ = participant_for_crowd_worker(
        study=study,
        source=Participant.Source.PROLIFIC,
        external_id=pid,
        meta={"PROLIFIC_PID": pid, "STUDY_ID": PSTUDY, "SESSION_ID": session},
    )
    return participant


def post_webhook(client, payload, *, secret=SECRET, timestamp=None, signature=None):
    body = json.dumps(payload).encode()
    timestamp = str(int(time.time())) if timestamp is None else timestamp
    if signature is None:
        signature = prolific_signature(secret=secret, timestamp=timestamp, body=body)
    return client.post(
        "/crowd/prolific/webhook/",
        data=body,
        content_type="application/json",
        HTTP_X_PROLIFIC_REQUEST_TIMESTAMP=timestamp,
        HTTP_X_PROLIFIC_REQUEST_SIGNATURE=signature,
    )


def status_event(pid, session, status):
    return {
        "event_type": "submission.status.change",
        "resource_id": session,
        "participant_id": pid,
        "study_id": PSTUDY,
        "status": status,
    }


def test_signature_is_the_one_prolifics_docs_compute():
    # Prolific's documented example, written out independently of the module: base64 of
    # HMAC-SHA256(secret, timestamp + body).
    body = json.dumps({"event_type": "submission.status.change", "status": "RETURNED"})
    timestamp = "1700000000"
    documented = base64.b64encode(
        hmac.new(SECRET.encode(), str.encode(timestamp + body), hashlib.sha256).digest()
    ).decode()
    assert prolific_signature(secret=SECRET, timestamp=timestamp, body=body.encode()) == documented
    assert prolific_signature(secret="other", timestamp=timestamp, body=body.encode()) != documented


def started(study):
    """Worker A answered item 1 and holds item 2 (the last slot); worker B is turned away."""
    a = worker(study, "pidA", "subA")
    lease = assignment_next(participant=a)
    judgment_submit(participant=a, token=lease.token, data={"rating": 4})
    held = assignment_next(participant=a)
    assert held is not None
    b = worker(study, "pidB", "subB")
    assert assignment_next(participant=b) is None  # every slot is taken
    return a, b, held


@pytest.mark.parametrize(
    "how",
    ["bad signature", "wrong secret", "old timestamp", "future timestamp", "no timestamp"],
)
def test_a_refused_webhook_answers_401_and_changes_nothing(client, study, how):
    a, b, held = started(study)
    payload = status_event("pidA", "subA", "RETURNED")
    now = int(time.time())
    kwargs = {
        "bad signature": {"signature": "AAAA" + "=" * 40},
        "wrong secret": {"secret": "not-the-secret"},
        "old timestamp": {"timestamp": str(now - 3600)},
        "future timestamp": {"timestamp": str(now + 3600)},
        "no timestamp": {"timestamp": ""},
    }[how]
    before_flags = list(Participant.objects.get(pk=a.pk).flags)
    response = post_webhook(client, payload, **kwargs)
    assert response.status_code == 401
    assert CrowdEvent.objects.count() == 0
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.OPEN
    assert Participant.objects.get(pk=a.pk).flags == before_flags
    assert not Judgment.objects.filter(excluded=True).exists()
    assert assignment_next(participant=b) is None


def test_returned_frees_the_lease_and_the_next_worker_gets_that_item_at_once(client, study):
    a, b, held = started(study)
    kept = list(Judgment.objects.filter(participant=a).values_list("id", "payload"))
    response = post_webhook(client, status_event("pidA", "subA", "RETURNED"))
    assert response.status_code == 200, response.content
    assert response.json()["outcome"] == "RETURNED: 1 lease(s) released"
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.RELEASED
    # The judgments stay, flagged with the reason; none is deleted.
    assert list(Judgment.objects.filter(participant=a).values_list("id", "payload")) == kept
    assert all(
        j.excluded and "RETURNED" in j.exclusion_reason
        for j in Judgment.objects.filter(participant=a)
    )
    a.refresh_from_db()
    assert [f["kind"] for f in a.flags] == ["crowd_left"]
    assert a.external_meta["platform_status"] == "RETURNED"
    served = assignment_next(participant=b)
    assert served is not None and served.item_id == held.item_id


def test_a_rival_researchers_secret_cannot_reclaim_another_owners_workers(
    client, study, other_researcher
):
    # The attack: a rival links a study of their own to the same Prolific study id (seen on
    # a study they share, or guessed), stores a webhook secret they know, and signs a
    # RETURNED event for the victim's worker. Only the secret of a study's own owner may
    # act on that study's workers.
    a, b, held = started(study)
    credential_save(
        user=other_researcher,
        values={"prolific_webhook_secret": "rival-secret-Kd9"},
        mturk_sandbox=True,
    )
    vehicle_study(other_researcher, captions=2, target=1, prolific_study_id=PSTUDY)
    before = list(Participant.objects.get(pk=a.pk).flags)
    response = post_webhook(
        client, status_event("pidA", "subA", "RETURNED"), secret="rival-secret-Kd9"
    )
    assert response.status_code == 200 and response.json()["outcome"] == "no matching participant"
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.OPEN
    assert Participant.objects.get(pk=a.pk).flags == before
    assert not Judgment.objects.filter(excluded=True).exists()
    # The owner's own secret still works.
    assert post_webhook(client, status_event("pidA", "subA", "RETURNED")).status_code == 200
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.RELEASED


def test_a_worker_who_returned_is_served_nothing_more(client, study):
    # The attack: return the submission (the slot is freed for the next worker), keep the
    # tab open and go on taking leases, so the slot is held again by answers nobody pays
    # for and the analysis would count.
    a, b, held = started(study)
    assert post_webhook(client, status_event("pidA", "subA", "RETURNED")).status_code == 200
    assert assignment_next(participant=a) is None
    served = assignment_next(participant=b)
    assert served is not None and served.item_id == held.item_id


@pytest.mark.parametrize("status", ["TIMED-OUT", "REJECTED"])
def test_timed_out_and_rejected_reclaim_too(client, study, status):
    a, b, held = started(study)
    assert post_webhook(client, status_event("pidA", "subA", status)).status_code == 200
    assert assignment_next(participant=b).item_id == held.item_id


def test_the_same_event_twice_is_processed_once(client, study):
    a, b, held = started(study)
    first = post_webhook(client, status_event("pidA", "subA", "RETURNED"))
    # Make a new open lease for A: a second processing would release it.
    b_lease = assignment_next(participant=b)
    assert b_lease is not None
    second = post_webhook(client, status_event("pidA", "subA", "RETURNED"))
    assert first.json()["outcome"].startswith("RETURNED")
    assert second.status_code == 200 and second.json()["outcome"] == "duplicate"
    assert CrowdEvent.objects.count() == 1
    a.refresh_from_db()
    assert [f["kind"] for f in a.flags] == ["crowd_left"]


def test_an_unknown_event_is_ignored_with_a_log_line(client, study, caplog):
    a, b, held = started(study)
    caplog.set_level(logging.INFO)
    payload = {"event_type": "study.status.change", "resource_id": PSTUDY, "study_id": PSTUDY}
    response = post_webhook(client, payload)
    assert response.status_code == 200
    assert "ignored: unknown event 'study.status.change'" in caplog.text
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.OPEN


def test_a_session_that_is_not_the_workers_is_not_reclaimed(client, study):
    a, b, held = started(study)
    response = post_webhook(client, status_event("pidA", "another-session", "RETURNED"))
    assert response.json()["outcome"] == "no matching participant"
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.OPEN


def review(client, study, **data):
    return client.post(reverse("study_crowd_review", args=[study.pk]), data=data)


def completed(study, pid, session, answers=1):
    person = worker(study, pid, session)
    for _ in range(answers):
        lease = assignment_next(participant=person)
        judgment_submit(participant=person, token=lease.token, data={"rating": 3})
    return person


def test_approve_reject_and_bonus_reach_prolific_with_the_right_ids_and_bodies(
    client, researcher, study, platform
):
    good = completed(study, "pidG", "subG")
    bad = completed(study, "pidX", "subX")
    client.force_login(researcher)
    ids = {"filter": "all", "step": "confirm"}
    assert review(client, study, **ids, action="approve", participants=[good.pk]).status_code == 200
    response = review(client, study, **ids, action="reject", participants=[bad.pk])
    assert response.status_code == 200
    response = review(
        client, study, **ids, action="bonus", participants=[good.pk], amount="1.25", reason="q"
    )
    assert response.status_code == 200
    state = platform.state
    (approve,) = state.calls("transition:APPROVE")
    assert approve[2] == "/api/v1/submissions/subG/transition/"
    assert approve[3] == {"action": "APPROVE"}
    (reject,) = state.calls("transition:REJECT")
    assert reject[2] == "/api/v1/submissions/subX/transition/"
    assert len(reject[3]["message"]) >= 100 and reject[3]["rejection_category"] == "FAILED_CHECK"
    (set_up,) = state.calls("bonus_set_up")
    assert set_up[3] == {"study_id": PSTUDY, "csv_bonuses": "pidG,1.25"}
    (pay,) = state.calls("bonus_pay")
    assert pay[2] == "/api/v1/bulk-bonus-payments/bonus-1/pay/"
    assert all(r[4]["Authorization"] == f"Token {TOKEN}" for r in state.requests)
    statuses = dict(CrowdLedgerEntry.objects.values_list("action", "status"))
    assert statuses == {"approve": "done", "reject": "done", "bonus": "done"}


def test_a_short_rejection_reason_is_refused_before_prolific_is_called(
    client, researcher, study, platform
):
    bad = completed(study, "pidX", "subX")
    client.force_login(researcher)
    response = review(
        client, study, filter="all", step="confirm", action="reject",
        participants=[bad.pk], message="too short",
    )  # fmt: skip
    assert response.status_code == 400
    assert "at least 100 characters" in response.content.decode()
    assert platform.state.requests == [] and not CrowdLedgerEntry.objects.exists()


def test_a_double_click_pays_once(client, researcher, study, platform):
    good = completed(study, "pidG", "subG")
    client.force_login(researcher)
    data = {"filter": "all", "step": "confirm", "action": "bonus", "amount": "2"}
    review(client, study, **data, participants=[good.pk])
    review(client, study, **data, participants=[good.pk])
    assert platform.state.set_ups == 1 and platform.state.pays == {"bonus-1": 1}
    assert CrowdLedgerEntry.objects.get().status == "done"


def test_a_bonus_retried_after_a_timeout_is_paid_once(client, researcher, study, platform):
    good = completed(study, "pidG", "subG")
    client.force_login(researcher)
    platform.state.pay_delay = 2.5  # the answer comes after CapEval's 1 s timeout
    data = {"filter": "all", "step": "confirm", "action": "bonus", "amount": "2"}
    first = review(client, study, **data, participants=[good.pk])
    assert first.status_code == 200
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "uncertain" and entry.platform_ref == "bonus-1"
    assert "check the bonus on Prolific" in first.content.decode()
    platform.state.pay_delay = 0
    review(client, study, **data, participants=[good.pk])
    review(client, study, **data, participants=[good.pk])
    time.sleep(2.6)  # let the first, slow answer finish before counting
    assert platform.state.pays == {"bonus-1": 1}
    assert platform.state.set_ups == 1
    # The researcher checks Prolific and confirms it was paid: done, still one payment.
    client.post(
        reverse("study_crowd_resolve", args=[study.pk, entry.pk]),
        data={"paid": "yes", "confirm": "yes"},
    )
    assert CrowdLedgerEntry.objects.get().status == "done"
    assert platform.state.pays == {"bonus-1": 1}


def test_a_pay_prolific_refused_is_retried_with_the_stored_set_up(
    client, researcher, study, platform
):
    good = completed(study, "pidG", "subG")
    client.force_login(researcher)
    data = {"filter": "all", "step": "confirm", "action": "bonus", "amount": "2"}
    platform.state.prolific_token = "expired"  # set-up and pay answer 401
    review(client, study, **data, participants=[good.pk])
    assert CrowdLedgerEntry.objects.get().status == "failed"
    assert "Prolific answered 401" in CrowdLedgerEntry.objects.get().answer
    platform.state.prolific_token = TOKEN
    review(client, study, **data, participants=[good.pk])
    assert platform.state.pays == {"bonus-1": 1} and platform.state.set_ups == 1
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "done" and entry.attempts == 2


def test_the_confirmation_shows_the_total_and_sends_nothing(client, researcher, study, platform):
    one = completed(study, "pid1", "sub1")
    two = completed(study, "pid2", "sub2")
    client.force_login(researcher)
    response = review(
        client, study, filter="all", step="preview", action="bonus",
        per_judgment="0.35", participants=[one.pk, two.pk],
    )  # fmt: skip
    page = response.content.decode()
    # Each kept one judgment: 2 x 0.35.
    assert "total 0.70" in page and "Confirm and send 0.70" in page
    assert platform.state.requests == [] and not CrowdLedgerEntry.objects.exists()


def test_sync_reclaims_returned_submissions_once(researcher, study, platform, capsys):
    a, b, held = started(study)
    platform.state.submissions = [
        {"id": "subA", "participant_id": "pidA", "status": "RETURNED", "study_id": PSTUDY},
        {"id": "subB", "participant_id": "pidB", "status": "ACTIVE", "study_id": PSTUDY},
    ]
    call_command("crowd_sync", str(study.pk))
    assert "1 worker(s) who left, 1 lease(s) released" in capsys.readouterr().out
    assert assignment_next(participant=b).item_id == held.item_id
    call_command("crowd_sync", str(study.pk))
    assert "0 worker(s) who left" in capsys.readouterr().out
    b.refresh_from_db()
    assert b.external_meta["platform_status"] == "ACTIVE"


def test_crowd_review_command_dry_run_sends_nothing(researcher, study, platform, capsys):
    person = completed(study, "pidG", "subG")
    Participant.objects.filter(pk=person.pk).update(completed_at="2026-01-01T00:00:00Z")
    call_command("crowd_review", str(study.pk), "--approve-complete", "--dry-run")
    out = capsys.readouterr().out
    assert f"{person.pseudonym}: approve: would be sent" in out and "Dry run: 1 worker(s)" in out
    assert platform.state.requests == []
    call_command("crowd_review", str(study.pk), "--approve-complete")
    assert len(platform.state.calls("transition:APPROVE")) == 1


def test_the_api_reviews_and_lists_the_ledger(
    client, researcher, other_researcher, study, platform
):
    person = completed(study, "pidG", "subG")
    client.force_login(researcher)
    url = f"/api/studies/{study.pk}/crowd/review/"
    body = {"action": "bonus", "filter": "all", "amount_cents": 40, "reason": "api"}
    dry = client.post(url, {**body, "dry_run": True}, content_type="application/json")
    assert dry.status_code == 200 and dry.json()["total_cents"] == 40
    assert platform.state.requests == []
    done = client.post(url, body, content_type="application/json")
    assert done.json()["rows"][0]["ledger"]["status"] == "done"
    ledger = client.get(f"/api/studies/{study.pk}/crowd/ledger/").json()
    assert [(r["participant"], r["amount_cents"]) for r in ledger] == [(person.pseudonym, 40)]
    study.members.add(other_researcher)
    client.force_login(other_researcher)  # a member sees pseudonyms, never pays
    assert client.post(url, body, content_type="application/json").status_code == 404


def test_the_token_is_never_in_a_page_an_export_a_log_or_the_database(
    client, researcher, platform, caplog
):
    caplog.set_level(logging.DEBUG)
    client.force_login(researcher)
    response = client.post(
        reverse("account_crowd"),
        {"prolific_token": TOKEN, "prolific_webhook_secret": SECRET, "mturk_mode": "sandbox"},
        follow=True,
    )
    page = response.content.decode()
    assert "Stored (not shown)" in page
    study = vehicle_study(researcher, captions=1, target=1, prolific_study_id=PSTUDY)
    person = completed(study, "pidG", "subG")
    review(client, study, filter="all", step="confirm", action="approve", participants=[person.pk])
    assert len(platform.state.calls("transition:APPROVE")) == 1  # the token was usable
    pages = [
        page,
        client.get(reverse("account_crowd")).content.decode(),
        client.get(reverse("study_crowd_review", args=[study.pk])).content.decode(),
        client.get(reverse("study_detail", args=[study.pk])).content.decode(),
        client.get(f"/api/studies/{study.pk}/crowd/ledger/").content.decode(),
    ]
    dump = StringIO()
    call_command("dumpdata", "annotation", stdout=dump)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM annotation_crowdcredential")
        rows = " ".join(str(value) for row in cursor.fetchall() for value in row)
    assert rows and "gAAAA" in rows  # Fernet tokens are stored
    for secret in (TOKEN, SECRET):
        for text in [*pages, dump.getvalue(), rows, caplog.text]:
            assert secret not in text


def test_only_the_owner_reviews_and_pays(client, study, other_researcher, platform):
    person = completed(study, "pidG", "subG")
    study.members.add(other_researcher)
    client.force_login(other_researcher)
    url = reverse("study_crowd_review", args=[study.pk])
    assert client.get(url).status_code == 404
    data = {"filter": "all", "step": "confirm", "action": "approve", "participants": [person.pk]}
    assert client.post(url, data).status_code == 404
    assert client.post(reverse("study_crowd_sync", args=[study.pk])).status_code == 404
    assert platform.state.requests == [] and not CrowdLedgerEntry.objects.exists()


def test_a_credential_with_spaces_is_refused_and_nothing_is_written(client, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("account_crowd"),
        {"prolific_token": "two words", "mturk_access_key_id": "AKIAOK", "mturk_mode": "live"},
    )
    assert response.status_code == 400
    assert "no spaces" in response.content.decode()
    assert "two words" not in response.content.decode()
    assert not CrowdCredential.objects.exists()


def test_the_beat_task_syncs_linked_studies_and_logs_a_failing_one(
    study, other_researcher, platform, caplog
):
    a, b, held = started(study)
    vehicle_study(other_researcher, captions=1, target=1, prolific_study_id="OTHER")  # no token
    vehicle_study(other_researcher, captions=1, target=1)  # linked to nothing: skipped
    platform.state.submissions = [
        {"id": "subA", "participant_id": "pidA", "status": "TIMED-OUT", "study_id": PSTUDY}
    ]
    assert crowd_sync_live() == 1
    assert "has not stored a Prolific API token" in caplog.text
    assert assignment_next(participant=b).item_id == held.item_id


def test_a_missing_token_refuses_the_review_before_any_row_is_claimed(
    client, other_researcher, platform
):
    study = vehicle_study(other_researcher, captions=1, target=1, prolific_study_id=PSTUDY)
    person = completed(study, "pidG", "subG")
    client.force_login(other_researcher)
    data = {"filter": "all", "step": "confirm", "action": "approve", "participants": [person.pk]}
    response = review(client, study, **data)
    assert response.status_code == 400
    assert "has not stored a Prolific API token" in response.content.decode()
    assert not CrowdLedgerEntry.objects.exists() and platform.state.requests == []
