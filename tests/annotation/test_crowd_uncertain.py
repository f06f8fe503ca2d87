"""Issue 45 row 1: a payment, approval or rejection whose outcome is unknown is never sent
twice. The local stand-in of Prolific and MTurk (tests/factories/crowd_platforms.py) acts on
the call, then answers 500, 502, 503 or 504 (a gateway in front of the platform), resets
the connection, or answers after CapEval stopped waiting. The researcher clicks again on
the review page, as anyone would: the stand-in counts every call that reached it."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import CrowdLedgerEntry, Participant
from annotation.services.assignments import assignment_next
from annotation.services.crowd.credentials import credential_save
from annotation.services.crowd.review import CLAIM_STALE
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker
from tests.factories.core import vehicle_study
from tests.factories.crowd_platforms import PlatformServer

pytestmark = pytest.mark.django_db

TOKEN = "prolific-token-Uc3rTa1n"
PSTUDY = "60f1a2b3c4d5e6f7a8b9c0ff"
KEY_ID = "AKIAUNCERTAIN0000001"
SECRET_KEY = "uNcErTaInSeCrEtKeY-0000000000000000000000"
HIT = "3HITUNCERTAIN00000000000000"
#: Every way a call can end with its outcome unknown.
UNKNOWN = ["500", "502", "503", "504", "reset", "hang"]
#: What the review page says about such a call.
SAYS_UNKNOWN = "Outcome unknown"


@pytest.fixture
def platform(settings):
    with PlatformServer() as server:
        server.state.prolific_token = TOKEN
        server.state.hang_seconds = 1.6  # CapEval waits 1 s
        settings.CAPEVAL_PROLIFIC_API_URL = server.url
        settings.CAPEVAL_MTURK_SANDBOX_ENDPOINT = server.url
        settings.CAPEVAL_MTURK_ENDPOINT = "http://127.0.0.1:9"  # live: never used here
        settings.CAPEVAL_CROWD_TIMEOUT = 1
        yield server


@pytest.fixture
def prolific_worker(researcher):
    credential_save(user=researcher, values={"prolific_token": TOKEN}, mturk_sandbox=True)
    study = vehicle_study(researcher, captions=2, target=1, prolific_study_id=PSTUDY)
    person, _ = participant_for_crowd_worker(
        study=study,
        source=Participant.Source.PROLIFIC,
        external_id="pidU",
        meta={"PROLIFIC_PID": "pidU", "STUDY_ID": PSTUDY, "SESSION_ID": "subU"},
    )
    lease = assignment_next(participant=person)
    judgment_submit(participant=person, token=lease.token, data={"rating": 3})
    return person


@pytest.fixture
def mturk_worker(researcher):
    credential_save(
        user=researcher,
        values={"mturk_access_key_id": KEY_ID, "mturk_secret_access_key": SECRET_KEY},
        mturk_sandbox=True,
    )
    study = vehicle_study(researcher, captions=2, target=1, mturk_hit_ids=HIT)
    person, _ = participant_for_crowd_worker(
        study=study,
        source=Participant.Source.MTURK,
        external_id="WU",
        meta={"workerId": "WU", "assignmentId": "ASG-U", "hitId": HIT},
    )
    return person


def click(client, person, action, **extra):
    """What "Confirm and send" posts on the review page."""
    data = {"filter": "all", "step": "confirm", "action": action, "participants": [person.pk]}
    if action == "bonus":
        data.update(amount="1.50", reason="quality")
    if action == "reject":
        data["message"] = "Your answers failed the study's attention checks. " * 3
    data.update(extra)
    return client.post(reverse("study_crowd_review", args=[person.study_id]), data=data)


def assert_unknown_on_page(response, person):
    page = response.content.decode()
    assert response.status_code == 200, page[:500]
    assert CrowdLedgerEntry.objects.get().status == "uncertain"
    assert f"{person.pseudonym}: {SAYS_UNKNOWN}" in page


def resolve(client, entry, **data):
    url = reverse("study_crowd_resolve", args=[entry.study_id, entry.pk])
    return client.post(url, data=data, follow=True)


# --- Prolific ------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", UNKNOWN)
def test_a_prolific_bonus_with_an_unknown_outcome_is_never_paid_twice(
    client, researcher, prolific_worker, platform, fault
):
    client.force_login(researcher)
    platform.state.faults["bonus_pay"] = fault  # Prolific pays, the answer is lost
    assert_unknown_on_page(click(client, prolific_worker, "bonus"), prolific_worker)
    assert platform.state.pays == {"bonus-1": 1}
    platform.state.faults.clear()  # Prolific answers again: the researcher clicks again
    again = click(client, prolific_worker, "bonus")
    assert_unknown_on_page(again, prolific_worker)
    assert len(platform.state.calls("bonus_pay")) == 1 and platform.state.set_ups == 1
    assert platform.state.pays == {"bonus-1": 1}
    # The ledger offers the owner's check, with the confirmation it needs.
    ledger = client.get(reverse("study_crowd_review", args=[prolific_worker.study_id]))
    assert 'name="confirm"' in ledger.content.decode()


@pytest.mark.parametrize("action", ["approve", "reject"])
@pytest.mark.parametrize("fault", UNKNOWN)
def test_a_prolific_decision_with_an_unknown_outcome_is_read_back_not_sent_again(
    client, researcher, prolific_worker, platform, fault, action
):
    operation = f"transition:{action.upper()}"
    client.force_login(researcher)
    platform.state.faults[operation] = fault
    assert_unknown_on_page(click(client, prolific_worker, action), prolific_worker)
    platform.state.faults.clear()
    click(client, prolific_worker, action)
    # The second click read the submission's status and found the decision made.
    assert len(platform.state.calls(operation)) == 1
    assert len(platform.state.calls("get_submission")) == 1
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "done" and "Prolific shows" in entry.answer


@pytest.mark.parametrize("fault", ["504", "reset"])
def test_a_prolific_decision_that_did_not_happen_is_sent_again_after_the_read_back(
    client, researcher, prolific_worker, platform, fault
):
    client.force_login(researcher)
    platform.state.fault_acts = False  # the gateway failed before Prolific acted
    platform.state.faults["transition:APPROVE"] = fault
    assert_unknown_on_page(click(client, prolific_worker, "approve"), prolific_worker)
    platform.state.faults.clear()
    click(client, prolific_worker, "approve")
    assert len(platform.state.calls("transition:APPROVE")) == 2
    assert platform.state.statuses == {"subU": "APPROVED"}
    assert CrowdLedgerEntry.objects.get().status == "done"


def test_an_unknown_decision_stays_unknown_while_prolific_cannot_be_read(
    client, researcher, prolific_worker, platform
):
    client.force_login(researcher)
    platform.state.faults.update({"transition:APPROVE": "502", "get_submission": "503"})
    click(client, prolific_worker, "approve")
    del platform.state.faults["transition:APPROVE"]
    assert_unknown_on_page(click(client, prolific_worker, "approve"), prolific_worker)
    assert len(platform.state.calls("transition:APPROVE")) == 1


def test_the_owner_resolves_an_unknown_bonus_only_with_a_confirmation(
    client, researcher, prolific_worker, platform
):
    client.force_login(researcher)
    platform.state.fault_acts = False  # this time Prolific did not pay
    platform.state.faults["bonus_pay"] = "504"
    click(client, prolific_worker, "bonus")
    platform.state.faults.clear()
    entry = CrowdLedgerEntry.objects.get()
    # "It was not paid" without ticking the confirmation changes nothing.
    page = resolve(client, entry, paid="no").content.decode()
    assert "Tick the confirmation" in page
    assert CrowdLedgerEntry.objects.get().status == "uncertain"
    click(client, prolific_worker, "bonus")
    assert platform.state.pays == {}
    # Confirmed: the next click pays with the stored set-up, once.
    resolve(client, entry, paid="no", confirm="yes")
    entry.refresh_from_db()
    assert entry.status == "set_up" and "checked Prolific: not paid" in entry.answer
    click(client, prolific_worker, "bonus")
    click(client, prolific_worker, "bonus")
    assert platform.state.pays == {"bonus-1": 1} and platform.state.set_ups == 1
    assert CrowdLedgerEntry.objects.get().status == "done"


def test_the_owner_confirms_an_unknown_bonus_was_paid(
    client, researcher, prolific_worker, platform
):
    client.force_login(researcher)
    platform.state.faults["bonus_pay"] = "500"
    click(client, prolific_worker, "bonus")
    platform.state.faults.clear()
    entry = CrowdLedgerEntry.objects.get()
    resolve(client, entry, paid="yes", confirm="yes")
    entry.refresh_from_db()
    assert entry.status == "done" and "checked Prolific: paid" in entry.answer
    click(client, prolific_worker, "bonus")
    assert platform.state.pays == {"bonus-1": 1}


def test_a_refusal_is_definite_and_a_connect_error_sent_nothing(
    client, researcher, prolific_worker, platform, settings
):
    client.force_login(researcher)
    settings.CAPEVAL_PROLIFIC_API_URL = "http://127.0.0.1:9"  # nothing listens: not sent
    click(client, prolific_worker, "approve")
    assert CrowdLedgerEntry.objects.get().status == "failed"
    settings.CAPEVAL_PROLIFIC_API_URL = platform.url
    platform.state.statuses["subU"] = "REJECTED"  # approving it is refused (a 400)
    click(client, prolific_worker, "approve")
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "failed" and "Prolific answered 400" in entry.answer
    assert len(platform.state.calls("transition:APPROVE")) == 1


def test_a_call_interrupted_by_a_dead_process_is_treated_as_unknown(
    client, researcher, prolific_worker, platform
):
    # The process died while paying: the row is still "claimed", with its set-up id, and
    # nobody knows whether the pay reached Prolific. Once the claim is stale a click takes
    # it over as uncertain, and pays nothing.
    client.force_login(researcher)
    click(client, prolific_worker, "bonus")
    long_ago = timezone.now() - CLAIM_STALE - timedelta(seconds=1)
    CrowdLedgerEntry.objects.update(status="claimed", updated_at=long_ago)
    assert_unknown_on_page(click(client, prolific_worker, "bonus"), prolific_worker)
    assert platform.state.pays == {"bonus-1": 1} and platform.state.set_ups == 1


# --- MTurk ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", UNKNOWN)
def test_an_mturk_bonus_with_an_unknown_outcome_is_reconciled_not_sent_again(
    client, researcher, mturk_worker, platform, fault
):
    client.force_login(researcher)
    platform.state.faults["SendBonus"] = fault  # MTurk pays, the answer is lost
    assert_unknown_on_page(click(client, mturk_worker, "bonus"), mturk_worker)
    assert len(platform.state.calls("SendBonus")) == 1  # boto3 did not retry on its own
    platform.state.faults.clear()
    click(client, mturk_worker, "bonus")
    # ListBonusPayments showed the bonus: done, no second SendBonus.
    assert len(platform.state.calls("SendBonus")) == 1
    (listed,) = platform.state.calls("ListBonusPayments")
    assert listed[3]["AssignmentId"] == "ASG-U"
    assert platform.state.bonuses_paid == [("WU", "1.50")]
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "done" and "ListBonusPayments" in entry.answer


def test_an_mturk_bonus_not_listed_is_sent_again_with_the_same_token(
    client, researcher, mturk_worker, platform
):
    client.force_login(researcher)
    platform.state.fault_acts = False  # the gateway failed before MTurk paid
    platform.state.faults["SendBonus"] = "503"
    click(client, mturk_worker, "bonus")
    platform.state.faults.clear()
    click(client, mturk_worker, "bonus")
    tokens = [call[3]["UniqueRequestToken"] for call in platform.state.calls("SendBonus")]
    assert len(tokens) == 2 and len(set(tokens)) == 1
    assert platform.state.bonuses_paid == [("WU", "1.50")]
    assert CrowdLedgerEntry.objects.get().status == "done"


def test_an_unknown_mturk_bonus_stays_unknown_while_the_listing_cannot_be_read(
    client, researcher, mturk_worker, platform
):
    client.force_login(researcher)
    platform.state.faults.update({"SendBonus": "504", "ListBonusPayments": "500"})
    click(client, mturk_worker, "bonus")
    del platform.state.faults["SendBonus"]
    assert_unknown_on_page(click(client, mturk_worker, "bonus"), mturk_worker)
    assert len(platform.state.calls("SendBonus")) == 1


@pytest.mark.parametrize("action", ["approve", "reject"])
@pytest.mark.parametrize("fault", UNKNOWN)
def test_an_mturk_decision_with_an_unknown_outcome_is_read_back_not_sent_again(
    client, researcher, mturk_worker, platform, fault, action
):
    operation = "ApproveAssignment" if action == "approve" else "RejectAssignment"
    client.force_login(researcher)
    platform.state.faults[operation] = fault
    assert_unknown_on_page(click(client, mturk_worker, action), mturk_worker)
    platform.state.faults.clear()
    click(client, mturk_worker, action)
    assert len(platform.state.calls(operation)) == 1
    assert len(platform.state.calls("GetAssignment")) == 1
    entry = CrowdLedgerEntry.objects.get()
    assert entry.status == "done" and "MTurk shows" in entry.answer


def test_only_the_owner_settles_an_unknown_decision_and_not_done_sends_it_once_more(
    client, researcher, other_researcher, mturk_worker, platform
):
    client.force_login(researcher)
    platform.state.fault_acts = False
    platform.state.faults.update({"ApproveAssignment": "502", "GetAssignment": "502"})
    click(client, mturk_worker, "approve")
    entry = CrowdLedgerEntry.objects.get()
    mturk_worker.study.members.add(other_researcher)
    client.force_login(other_researcher)  # a member sees the study, never settles or pays
    url = reverse("study_crowd_resolve", args=[entry.study_id, entry.pk])
    assert client.post(url, {"paid": "no", "confirm": "yes"}).status_code == 404
    assert CrowdLedgerEntry.objects.get().status == "uncertain"
    client.force_login(researcher)
    page = client.get(reverse("study_crowd_review", args=[entry.study_id])).content.decode()
    assert "I checked on MTurk" in page and "It was not done" in page
    resolve(client, entry, paid="no", confirm="yes")
    entry.refresh_from_db()
    assert entry.status == "failed" and "checked MTurk: not done" in entry.answer
    platform.state.faults.clear()
    click(client, mturk_worker, "approve")
    click(client, mturk_worker, "approve")
    assert len(platform.state.calls("ApproveAssignment")) == 2  # the lost one, then one
    assert platform.state.assignment_status == {"ASG-U": "Approved"}
    assert CrowdLedgerEntry.objects.get().status == "done"
