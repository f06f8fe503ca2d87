"""The crowd review's confirmation says what a payment costs and whether it can be sent
(issue 46, row 15).

A new user reviewed a bonus of 2 x 2.75, saw "total 5.50" with no currency and no fee,
pressed "Confirm and send" and only then learnt that no Prolific token was stored. The
confirmation (``step=preview``) must warn about a missing credential with a link to the
credentials page, before anything is confirmed, and state the currency and the platform's
service fee. The expected amounts below are worked by hand from the rates each test sets.
"""

import re

import pytest
from django.urls import reverse

from annotation.models import CrowdLedgerEntry, Participant
from annotation.services.assignments import assignment_next
from annotation.services.crowd.credentials import credential_save
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker
from tests.factories.core import vehicle_study
from tests.factories.crowd_platforms import PlatformServer

pytestmark = pytest.mark.django_db

TOKEN = "prolific-token-costs-7Yq2"


@pytest.fixture
def platform(settings):
    with PlatformServer() as server:
        server.state.prolific_token = TOKEN
        settings.CAPEVAL_PROLIFIC_API_URL = server.url
        settings.CAPEVAL_CROWD_TIMEOUT = 1
        yield server


def completed(study, pid, source=Participant.Source.PROLIFIC):
    meta = (
        {"PROLIFIC_PID": pid, "STUDY_ID": "PS1", "SESSION_ID": f"sub-{pid}"}
        if source == Participant.Source.PROLIFIC
        else {"workerId": pid, "assignmentId": f"as-{pid}", "hitId": "H1"}
    )
    person, _ = participant_for_crowd_worker(study=study, source=source, external_id=pid, meta=meta)
    lease = assignment_next(participant=person)
    judgment_submit(participant=person, token=lease.token, data={"rating": 3})
    return person


def preview(client, study, **data):
    data = {"filter": "all", "step": "preview", "scope": "shown", **data}
    return client.post(reverse("study_crowd_review", args=[study.pk]), data=data)


def text_of(page: str) -> str:
    """The page's words, tags dropped and spaces collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_a_missing_prolific_token_is_said_at_review_with_a_link_to_the_credentials(
    client, researcher, platform
):
    study = vehicle_study(researcher, captions=2, target=1)
    completed(study, "pidA")
    client.force_login(researcher)
    page = preview(client, study, action="approve").content.decode()
    words = text_of(page)
    assert "Confirm: approve 1 worker" in words  # the confirmation itself is shown
    assert "No Prolific API token is stored" in words, words[-3000:]
    confirm = page[page.index('id="review-confirm"') :]
    assert f'href="{reverse("account_crowd")}"' in confirm
    # Nothing can be sent without it: the confirmation offers no send button.
    assert "Confirm and send" not in confirm
    assert platform.state.requests == [] and not CrowdLedgerEntry.objects.exists()


def test_with_the_token_stored_the_confirmation_has_no_warning(client, researcher, platform):
    credential_save(user=researcher, values={"prolific_token": TOKEN}, mturk_sandbox=True)
    study = vehicle_study(researcher, captions=2, target=1)
    completed(study, "pidA")
    client.force_login(researcher)
    words = text_of(preview(client, study, action="approve").content.decode())
    assert "No Prolific API token is stored" not in words
    assert "Confirm and send" in words


def test_a_bonus_total_states_the_currency_and_prolifics_fee(
    client, researcher, platform, settings
):
    settings.CAPEVAL_CURRENCY = "GBP"
    settings.CAPEVAL_PROLIFIC_FEE_PERCENT = 40.0  # a round rate: 40% of 5.50 is 2.20
    credential_save(user=researcher, values={"prolific_token": TOKEN}, mturk_sandbox=True)
    study = vehicle_study(researcher, captions=2, target=1)
    completed(study, "pidA")
    completed(study, "pidB")
    client.force_login(researcher)
    words = text_of(preview(client, study, action="bonus", amount="2.75").content.decode())
    assert "total 5.50 GBP" in words, words[-3000:]
    assert "Prolific's service fee (40%): 2.20 GBP" in words
    assert "charged 7.70 GBP" in words
    assert "Confirm and send 5.50 GBP" in words


def test_the_default_fee_is_prolifics_published_rate(client, researcher, platform, settings):
    # Prolific's help centre: "a ~33.33% service charge on each bonus payment" (+ VAT).
    assert settings.CAPEVAL_PROLIFIC_FEE_PERCENT == 33.33
    settings.CAPEVAL_CURRENCY = "USD"
    credential_save(user=researcher, values={"prolific_token": TOKEN}, mturk_sandbox=True)
    study = vehicle_study(researcher, captions=2, target=1)
    completed(study, "pidA")
    completed(study, "pidB")
    client.force_login(researcher)
    words = text_of(preview(client, study, action="bonus", amount="2.75").content.decode())
    # 5.50 x 33.33% = 1.83315, rounded to the cent.
    assert "Prolific's service fee (33.33%): 1.83 USD" in words, words[-3000:]
    assert "charged 7.33 USD" in words


def test_the_ledger_shows_the_currency(client, researcher, platform, settings):
    settings.CAPEVAL_CURRENCY = "GBP"
    credential_save(user=researcher, values={"prolific_token": TOKEN}, mturk_sandbox=True)
    study = vehicle_study(researcher, captions=2, target=1)
    person = completed(study, "pidA")
    client.force_login(researcher)
    data = {"action": "bonus", "amount": "1.50", "reason": "quality"}
    preview(client, study, **data, step="confirm", confirmed=[person.pk])
    assert CrowdLedgerEntry.objects.get().status == "done"
    ledger = text_of(client.get(reverse("study_crowd_review", args=[study.pk])).content.decode())
    assert "1.50 GBP" in ledger and "150 cents" not in ledger


def test_the_api_dry_run_gives_the_currency_the_fee_and_missing_credentials(
    client, researcher, platform, settings
):
    settings.CAPEVAL_CURRENCY = "GBP"
    settings.CAPEVAL_PROLIFIC_FEE_PERCENT = 40.0
    study = vehicle_study(researcher, captions=2, target=1)
    completed(study, "pidA")
    client.force_login(researcher)
    url = f"/api/studies/{study.pk}/crowd/review/"
    body = {"action": "bonus", "filter": "all", "amount_cents": 250, "dry_run": True}
    dry = client.post(url, body, content_type="application/json")
    assert dry.status_code == 200, dry.content
    answer = dry.json()
    assert answer["total_cents"] == 250
    assert answer["costs"] == [
        {
            "platform": "prolific",
            "currency": "GBP",
            "paid_cents": 250,
            "fee_percent": 40.0,
            "fee_cents": 100,
            "charged_cents": 350,
        }
    ]
    assert answer["missing_credentials"] == ["Prolific API token"]
