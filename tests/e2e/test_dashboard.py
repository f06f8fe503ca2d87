"""The live study dashboard and the crowd setup panel in Chromium.

The dashboard must change by itself (htmx polling, no reload) while answers arrive through
the services; the copy button must copy the crowd link and say so; the study page passes axe
and fits 390 px and 1280 px without sideways scrolling (tables scroll inside their box).
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.views import dashboard as dashboard_views
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.core import crowd_participant, vehicle_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"


def answer(participant, rating=4):
    lease = assignment_next(participant=participant)
    judgment_submit(participant=participant, token=lease.token, data={"rating": rating})


def test_the_dashboard_updates_by_itself_as_answers_arrive(
    page, login, researcher, monkeypatch, live_server_lock
):
    monkeypatch.setattr(dashboard_views, "POLL_SECONDS", 1)
    study = vehicle_study(researcher, captions=2, target=2)  # 4 answers needed
    early = crowd_participant(study, "early")
    answer(early)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    overall = page.locator("#progress-overall")
    expect(page.get_by_text("Overall: 1 of 4 answers needed (25%)")).to_be_visible()
    expect(overall).to_have_attribute("value", "1")
    # A mark in this document: if the page reloaded, it would be gone.
    page.evaluate("window.notReloaded = true")

    with live_server_lock:  # the page polls meanwhile (tests/e2e/conftest.py)
        late = crowd_participant(study, "late")
        answer(late)
        answer(early)

    expect(page.get_by_text("Overall: 3 of 4 answers needed (75%)")).to_be_visible()
    expect(overall).to_have_attribute("value", "3")
    workers = page.locator("table.workers")
    expect(workers.get_by_role("rowheader", name=late.pseudonym)).to_be_visible()
    assert page.evaluate("window.notReloaded === true"), "updated by htmx, not a reload"
    assert_no_serious_a11y_violations(page, context="study page with a live dashboard")
    assert_fits_every_width(page, "the study page with the dashboard")


def test_sorting_swaps_the_table_in_place_and_polling_keeps_the_order(
    page, login, researcher, monkeypatch, live_server_lock
):
    monkeypatch.setattr(dashboard_views, "POLL_SECONDS", 1)
    study = vehicle_study(researcher, captions=3, target=3)
    many, few = crowd_participant(study, "many"), crowd_participant(study, "few")
    for _ in range(3):
        answer(many)
    answer(few)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.evaluate("window.notReloaded = true")
    rows = page.locator("table.workers tbody th[scope=row]")
    expect(rows).to_have_text([few.pseudonym, many.pseudonym])  # newest first

    page.get_by_role("link", name="Judgments").click()  # most judgments first

    expect(rows).to_have_text([many.pseudonym, few.pseudonym])
    expect(page.locator("th[aria-sort=descending]")).to_contain_text("Judgments")
    with live_server_lock:
        answer(few)  # the next poll redraws the table, in the order chosen (not newest first)
    few_judgments = page.locator("table.workers tbody tr").nth(1).locator("td").nth(2)
    expect(few_judgments).to_have_text("2")
    expect(rows).to_have_text([many.pseudonym, few.pseudonym])
    assert page.evaluate("window.notReloaded === true")


def test_the_copy_button_copies_the_crowd_link_and_says_so(page, login, researcher):
    study = vehicle_study(researcher)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    link = page.get_by_label("Crowd link").input_value()
    assert f"/p/{study.public_id}:" in link

    page.get_by_role("button", name="Copy the link").click()

    expect(page.get_by_role("status").filter(has_text="Copied")).to_have_text("Copied: the link.")
    assert page.evaluate("navigator.clipboard.readText()") == link
    page.reload()
    assert page.get_by_label("Crowd link").input_value() == link, "the link is stable"
    assert_no_serious_a11y_violations(page, context="study page with the crowd panel")
    assert_fits_every_width(page, "the study page with the crowd panel")


def test_without_javascript_the_link_is_still_there_to_select(browser, live_server, researcher):
    study = vehicle_study(researcher)
    answer(crowd_participant(study, "someone"))
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(researcher.username)
        page.get_by_label("Password").fill(f"pw-{researcher.username}")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        page.goto(f"/studies/{study.pk}/")

        field = page.get_by_label("Crowd link")
        expect(field).to_be_visible()
        assert "/p/" in field.input_value()
        expect(page.get_by_role("button", name="Copy the link")).to_be_hidden()
        page.get_by_role("link", name="Participant").click()  # sorting: a plain link
        assert "sort=pseudonym" in page.url
    finally:
        context.close()
