"""The test-only mode's own script and stylesheet in Chromium (tests/ratingmode/, issue 44):
served by its app's static folder under the strict policy, they run and apply, and the page
passes axe and fits a phone's and a laptop's width."""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Judgment
from annotation.registry import MODES
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.core import caption_study
from tests.ratingmode import NAME

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    # CAPEVAL_TESTS_WITHOUT_RATINGMODE=1 leaves the mode out (tests/ratingmode/test_removal.py).
    pytest.mark.skipif(NAME not in MODES, reason="the test-only mode is not installed"),
]


def test_a_key_chooses_the_rating_and_the_page_says_it(page, live_server, researcher):
    study = caption_study(researcher, NAME, captions=1, target=1)
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=w1&STUDY_ID=S&SESSION_ID=X")
    with page.expect_navigation():
        page.get_by_role("link", name="I agree, start").click()
    expect(page.get_by_role("heading", name="Rate a caption")).to_be_visible()

    # rating.css applies: the caption is set apart by a solid rule.
    style = page.locator(".rating-caption").evaluate(
        "element => getComputedStyle(element).borderInlineStartStyle"
    )
    assert style == "solid"
    # rating.js runs: a digit outside the field chooses the rating and says it.
    page.locator("h1").click()
    page.keyboard.press("4")
    expect(page.locator("#rating")).to_have_value("4")
    expect(page.locator("#rating-said")).to_have_text("Your rating: 4 of 5 (very good).")
    assert_no_serious_a11y_violations(page, context="test-rating item page")
    assert_fits_every_width(page, "test-rating item page", shot="test-rating-item")

    with page.expect_navigation():
        page.get_by_role("button", name="Submit").click()
    assert [j.payload for j in Judgment.objects.filter(study=study)] == [{"rating": 4}]
