"""Crowd integrity in a real browser: a worker id reused from another browser gets a clear
refusal page; the researcher sees the open leases on the study page and releases one.

Each page is checked with axe-core and at 390 px and 1280 px for sideways scrolling.
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, CrowdRefusal, Participant
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.core import vehicle_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"


def test_a_worker_id_reused_in_another_browser_gets_a_clear_refusal(
    browser, live_server, researcher
):
    study = vehicle_study(researcher, captions=2, target=1)
    link = f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=VICTIM&STUDY_ID=S&SESSION_ID=X"
    first = browser.new_context(base_url=live_server.url)
    second = browser.new_context(base_url=live_server.url)
    try:
        victim = first.new_page()
        victim.goto(link)
        expect(victim.get_by_role("link", name="I agree, start")).to_be_visible()

        attacker = second.new_page()
        response = attacker.goto(link)

        assert response.status == 403
        expect(
            attacker.get_by_role("heading", name="You cannot join this study now")
        ).to_be_visible()
        expect(
            attacker.get_by_text("already started this study in another browser")
        ).to_be_visible()
        assert_no_serious_a11y_violations(attacker, context="crowd refusal page")
        assert_fits_every_width(attacker, "the refusal page")
    finally:
        first.close()
        second.close()
    victim_row = Participant.objects.get(study=study, external_id="VICTIM")
    assert [flag["kind"] for flag in victim_row.flags] == ["foreign_browser"]
    assert CrowdRefusal.objects.filter(participant=victim_row).count() == 1


def test_the_researcher_releases_an_open_lease_from_the_study_page(page, researcher, login):
    study = vehicle_study(researcher, captions=2, target=1)
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=AWAY&STUDY_ID=S&SESSION_ID=X")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.get_by_role("heading", name="Rate a caption")).to_be_visible()
    lease = Assignment.objects.get(participant__external_id="AWAY")
    page.context.clear_cookies()

    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    pseudonym = lease.participant.pseudonym
    expect(page.get_by_role("heading", name="Open leases")).to_be_visible()
    expect(page.get_by_role("cell", name=pseudonym, exact=True)).to_be_visible()
    assert_no_serious_a11y_violations(page, context="study page with open leases")
    assert_fits_every_width(page, "the study page")

    with page.expect_navigation():
        page.get_by_role("button", name=f"Release the lease of {pseudonym}").click()

    expect(page.get_by_text("Lease released; its item is served again.")).to_be_visible()
    expect(page.get_by_text("No item is held by anyone now.")).to_be_visible()
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.RELEASED
