"""The study page's crowd panel in Chromium (issue 46, row 4): the codes the API gives
(completion, screen-out, failed attention check) and the Prolific study URL are on the page
too, the same values, and the panel passes axe and fits 390 px and 1280 px."""

import pytest
from playwright.sync_api import expect

from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.core import vehicle_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_crowd_panel_shows_what_the_api_gives(page, login, live_url, researcher):
    study = vehicle_study(
        researcher, captions=2, failed_check_code="FAILEDCHK", screen_out_code="SCREENOUT"
    )
    login(page, researcher)
    api = page.request.get(live_url(f"/api/studies/{study.pk}/crowd/"))
    assert api.status == 200
    panel = api.json()
    page.goto(f"/studies/{study.pk}/")
    section = page.locator("section.crowd-panel")
    expect(page.locator("#crowd-link")).to_have_value(panel["crowd_link"])
    expect(section).to_contain_text(panel["prolific_study_url"])
    expect(section).to_contain_text(panel["completion_code"])
    expect(section.get_by_text("SCREENOUT", exact=True)).to_be_visible()
    expect(section.get_by_text("FAILEDCHK", exact=True)).to_be_visible()
    section.scroll_into_view_if_needed()
    assert_no_serious_a11y_violations(page, context="study page, crowd panel")
    assert_fits_every_width(page, "study page, crowd panel", shot="issue46-row4-crowd-panel")
