"""The crowd review flow in Chromium: from the dashboard, filter to the workers who
completed with no flag, approve them all, pay them a bonus (the confirmation shows the
total), and see the ledger; the local stand-in of Prolific counts what reached it. The
review page and the credentials page pass axe and fit 390 px and 1280 px."""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from django.utils import timezone

from annotation.models import CrowdLedgerEntry, Participant
from annotation.services.assignments import assignment_next
from annotation.services.crowd.credentials import credential_save
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.core import rating_study
from tests.factories.crowd_platforms import PlatformServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TOKEN = "prolific-token-e2e-9f8e7d"
WIDTHS = (390, 1280)


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"


def worker(study, pid, *, complete: bool, flagged: bool = False):
    person, _ = participant_for_crowd_worker(
        study=study,
        source=Participant.Source.PROLIFIC,
        external_id=pid,
        meta={"PROLIFIC_PID": pid, "STUDY_ID": "PS1", "SESSION_ID": f"sub-{pid}"},
    )
    lease = assignment_next(participant=person)
    judgment_submit(participant=person, token=lease.token, data={"rating": 4})
    changes = {}
    if complete:
        changes["completed_at"] = timezone.now()
    if flagged:
        changes["flags"] = [{"kind": "shared_browser", "at": "2026-01-01T00:00:00", "detail": ""}]
    Participant.objects.filter(pk=person.pk).update(**changes)
    return person


@pytest.fixture
def platform(settings):
    with PlatformServer() as server:
        server.state.prolific_token = TOKEN
        settings.CAPEVAL_PROLIFIC_API_URL = server.url
        yield server


def test_filter_approve_all_pay_a_bonus_and_see_the_ledger(page, login, researcher, platform):
    credential_save(user=researcher, values={"prolific_token": TOKEN}, mturk_sandbox=True)
    study = rating_study(researcher, captions=4, target=1, prolific_study_id="PS1")
    clean = [worker(study, "P1", complete=True), worker(study, "P2", complete=True)]
    flagged = worker(study, "P3", complete=True, flagged=True)
    worker(study, "P4", complete=False)

    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Approve, reject or pay crowd workers").click()
    page.get_by_label("Workers to show").select_option("completed_clean")
    page.get_by_role("button", name="Show", exact=True).click()
    table = page.locator("table.workers")
    for person in clean:
        expect(table.get_by_role("rowheader", name=person.pseudonym)).to_be_visible()
    expect(table.get_by_role("rowheader", name=flagged.pseudonym)).to_have_count(0)
    assert_no_serious_a11y_violations(page, "crowd review page")
    assert_fits_every_width(page, "crowd review page")

    # Approve every worker shown, by keyboard: the confirmation comes first.
    page.get_by_label("Every worker shown (2)").check()
    page.get_by_role("radio", name="Approve").check()
    page.get_by_role("button", name="Review before sending").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Confirm: approve 2 workers")).to_be_visible()
    assert platform.state.requests == []
    page.get_by_role("button", name="Confirm and send").click()
    expect(page.locator("#review-done")).to_contain_text("Approve: 2 workers")

    # A bonus of 1.50 each: the confirmation shows the total before anything is paid.
    page.get_by_label("Every worker shown (2)").check()
    page.get_by_role("radio", name="Pay a bonus").check()
    page.get_by_label("Bonus per worker (e.g. 1.50)").fill("1.50")
    page.get_by_role("button", name="Review before sending").click()
    expect(page.get_by_role("heading", name="Confirm: bonus 2 workers, total 3.00")).to_be_visible()
    assert platform.state.calls("bonus_pay") == []
    page.get_by_role("button", name="Confirm and send 3.00").click()
    expect(page.locator("#review-done")).to_contain_text("Bonus: 2 workers, 3.00 in all")

    ledger = page.locator("#ledger")
    for person in clean:
        expect(ledger.get_by_role("rowheader", name=person.pseudonym)).to_have_count(2)
    expect(ledger.get_by_text("150 cents")).to_have_count(2)
    assert_no_serious_a11y_violations(page, "crowd review page with the ledger")
    assert_fits_every_width(page, "crowd review page with the ledger")

    approved = sorted(call[2] for call in platform.state.calls("transition:APPROVE"))
    assert approved == ["/api/v1/submissions/sub-P1/transition/",
                        "/api/v1/submissions/sub-P2/transition/"]  # fmt: skip
    assert sorted(platform.state.pays.values()) == [1, 1]
    assert CrowdLedgerEntry.objects.filter(status="done").count() == 4


def test_the_credentials_page_never_shows_a_token_back(page, login, researcher):
    login(page, researcher)
    page.goto("/account/crowd/")
    page.get_by_label("Prolific API token").fill(TOKEN)
    page.get_by_role("radio", name="Live").check()
    page.get_by_role("button", name="Save credentials").click()
    expect(page.get_by_text("Crowd credentials saved")).to_be_visible()
    expect(page.locator("#state_prolific_token")).to_have_text("Stored (not shown).")
    assert TOKEN not in page.content()
    assert page.locator("#id_prolific_token").input_value() == ""
    assert_no_serious_a11y_violations(page, "crowd credentials page")
    assert_fits_every_width(page, "crowd credentials page")
