"""The arena battle page in a real browser: two detailed captions side by side at 1280 px and
stacked at 390 px, the image in view while the captions are read, keyboard only, axe.

The worker arrives through the signed crowd link, as a Prolific worker does. Images are
answered by a route that returns a small PNG (the files are not on disk in tests); the
page fixture fails on any request that leaves the live server.
"""

from __future__ import annotations

import base64

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Judgment, Participant
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.arena import arena_study
from tests.factories.machine import load_factor

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def box(page, selector):
    return page.locator(selector).bounding_box()


def test_a_battle_is_read_and_judged_with_the_keyboard_at_both_widths(page, researcher):
    # 300-word captions: the longest kind the mode is for.
    study = arena_study(
        researcher, images=4, words=lambda system, index: 300, catch_rate=0, min_seconds=1
    )
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=E2E-ARENA")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.arena-form")).to_be_visible()
    # The key handler is a deferred script: wait for it before any key is pressed.
    page.wait_for_load_state("load")

    # 1280 px: captions side by side, no horizontal scroll.
    a, b = box(page, ".arena-caption >> nth=0"), box(page, ".arena-caption >> nth=1")
    assert abs(a["y"] - b["y"]) < 2 and b["x"] > a["x"] + a["width"] - 1
    assert page.evaluate(NO_HORIZONTAL_SCROLL)
    expect(page.locator("#arena-keys")).to_contain_text("1")
    assert_no_serious_a11y_violations(page, context="battle at 1280 px")

    # The image stays in view when the reader scrolls to the end of the captions.
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    image = box(page, ".arena-image")
    assert image["y"] < 900 and image["y"] + image["height"] > 0

    # 390 px: stacked, still no horizontal scroll, the image still in view at the bottom.
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("window.scrollTo(0, 0)")
    a, b = box(page, ".arena-caption >> nth=0"), box(page, ".arena-caption >> nth=1")
    assert b["y"] >= a["y"] + a["height"] - 1
    assert page.evaluate(NO_HORIZONTAL_SCROLL)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    image = box(page, ".arena-image")
    assert image["y"] >= -1 and image["y"] < 844
    assert_no_serious_a11y_violations(page, context="battle at 390 px")

    # Keyboard only: 2 chooses "B is better", Enter submits once the minimum time is over.
    expect(page.locator("#arena-submit")).to_be_enabled(timeout=6000 * load_factor())
    page.keyboard.press("2")
    expect(page.locator("#outcome-b")).to_be_checked()
    expect(page.locator("#outcome-b")).to_be_focused()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("form.arena-form")).to_be_visible()
    # A crowd worker's count is the one progress line above the page (issue 46, row 13).
    expect(page.locator("#crowd-progress-text")).to_contain_text("1 of")

    worker = Participant.objects.get(study=study, external_id="E2E-ARENA")
    judgment = Judgment.objects.get(participant=worker)
    assert judgment.payload["outcome"] == "b"
    assert judgment.dwell_ms >= 1000
