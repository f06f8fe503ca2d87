"""The arena's battle page as issue 46 found it at 390 px (rows 10 and 13): the image must
stay in view while caption B is read, the keyboard hints are for keyboards only, and the
worker's progress is one line with its total.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.devices import DESKTOP, PHONE, device_page
from tests.e2e.layout import assert_fits_every_width
from tests.factories.arena import arena_study
from tests.factories.images import real_files


def screen(page, name):
    """What the phone's screen shows now (a full-page screenshot would not show the sticky
    parts where they are), saved when ``CAPEVAL_SCREENSHOTS`` names a folder."""
    folder = os.environ.get("CAPEVAL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name))


pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: What the keyboard hints say; a phone has no keys 1-4.
HINTS = ("#arena-keys", ".arena-choice kbd >> nth=0")


def start(page, study, pid):
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={pid}")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.arena-form")).to_be_visible()
    page.wait_for_load_state("load")


def long_study(researcher):
    # 300-word captions: on a phone caption B starts several screens down.
    study = arena_study(
        researcher, images=4, words=lambda system, index: 300, catch_rate=0, min_seconds=0
    )
    # Real files (1600 x 1200, shown at 1024 x 768): the band's height is the image's own.
    real_files(study)
    return study


def test_on_a_phone_the_image_stays_in_view_and_no_keyboard_hints(browser, live_server, researcher):
    study = long_study(researcher)
    height = PHONE["viewport"]["height"]
    with device_page(browser, live_server, **PHONE) as page:
        start(page, study, "E2E-ARENA-PHONE")
        # Caption B read: the image is still on the screen, and small.
        page.locator("#caption-b-title").scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, 400)")
        image = page.locator(".arena-image img").bounding_box()
        assert image["y"] >= -1 and image["y"] + image["height"] <= height, image
        assert image["height"] <= 0.2 * height, image
        screen(page, "issue46-row10-arena-phone-caption-b-390.png")
        for hint in HINTS:
            expect(page.locator(hint)).to_be_hidden()
        # It can be enlarged with a tap.
        expect(page.get_by_role("button", name=re.compile("^Enlarge"))).to_be_visible()
        assert_no_serious_a11y_violations(page, context="battle on a phone")
        assert_fits_every_width(page, "battle on a phone", shot="issue46-row10-arena-phone")


def test_with_a_keyboard_the_hints_are_shown(browser, live_server, researcher):
    study = long_study(researcher)
    with device_page(browser, live_server, **DESKTOP) as page:
        start(page, study, "E2E-ARENA-DESK")
        for hint in HINTS:
            expect(page.locator(hint)).to_be_visible()
        assert_no_serious_a11y_violations(page, context="battle on a desktop")
        assert_fits_every_width(page, "battle on a desktop", shot="issue46-row10-arena-desktop")


def test_one_progress_line_with_the_total(page, login, researcher, make_user):
    images = 4
    study = arena_study(researcher, images=images, catch_rate=0, min_seconds=0)
    real_files(study)
    lines = page.get_by_text(re.compile(r"judged|completion code after|Toward the completion"))
    # A crowd worker: the line toward the completion code, and no second count.
    start(page, study, "E2E-ARENA-PROGRESS")
    expect(lines).to_have_count(1)
    expect(lines).to_contain_text(re.compile(r"\b0 of \d+ battles"))
    page.get_by_label(re.compile("A is better")).check()
    with page.expect_navigation():
        page.get_by_role("button", name="Submit verdict").click()
    expect(lines).to_have_count(1)
    expect(lines).to_contain_text(re.compile(r"\b1 of \d+ battles"))
    assert_no_serious_a11y_violations(page, context="battle progress, crowd")
    assert_fits_every_width(page, "battle progress, crowd", shot="issue46-row13-arena-crowd")

    # A registered annotator: battles judged of the most they can be served (an image once).
    page.context.clear_cookies()
    user = make_user("judge")
    study.annotators.add(user)
    login(page, user)
    page.goto(f"/s/{study.public_id}/next/")
    expect(lines).to_have_count(1)
    expect(lines).to_have_text(f"Battles judged: 0 of at most {images} (one per image)")
    assert_no_serious_a11y_violations(page, context="battle progress, annotator")
    assert_fits_every_width(page, "battle progress, annotator", shot="issue46-row13-arena")
