"""The error-span page as issue 46 found it (rows 8, 9 and 13): an overlapping mark is
refused when it is added, quoting the words; on a phone the mark panel opens beside the
selection (not below a long caption), the image is a small band that can be enlarged, an
empty "Your marks" says so; and the progress line gives the total.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Caption, Judgment
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_open
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.devices import PHONE, device_page
from tests.e2e.layout import assert_fits_every_width
from tests.factories.images import real_files
from tests.factories.spans import TEXTS, spans_study


def screen(page, name):
    """What the phone's screen shows now (a full-page screenshot would not show the sticky
    parts where they are), saved when ``CAPEVAL_SCREENSHOTS`` names a folder."""
    folder = os.environ.get("CAPEVAL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name))


pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
#: A detailed caption of about 1,700 characters, its last words easy to find.
LONG = (
    " ".join(
        f"In part {n} of the scene a wooden bench stands beside a narrow path lined with"
        f" tall grass and small white flowers."
        for n in range(1, 15)
    )
    + " Far away on the cliff stands a striped lighthouse at dusk."
)


def start(page, study, pid, *, tiny_image=True):
    if tiny_image:
        page.route(
            "**/media/**",
            lambda route: route.fulfill(status=200, body=PNG, content_type="image/png"),
        )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={pid}")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.spans-form")).to_be_visible()
    page.wait_for_load_state("load")
    expect(page.locator("#spans-keys")).to_be_visible()


def word(page, text):
    return page.locator("#spans-caption .w", has_text=re.compile(f"^{re.escape(text)}$")).first


def select_words(page, first, last):
    word(page, first).click()
    word(page, last).click()


def test_an_overlapping_mark_is_refused_when_added_quoting_the_words(page, researcher):
    study = spans_study(researcher, systems=("alpha",), images=1, min_seconds=0)
    page.set_viewport_size({"width": 1280, "height": 900})
    start(page, study, "E2E-OVERLAP")
    # "A brown dog 🐕 sits on a red sofa next to two cats."
    select_words(page, "brown", "dog")
    page.get_by_role("button", name="Add mark").click()
    expect(page.locator("#spans-list li")).to_have_count(1)

    select_words(page, "dog", "sits")
    page.get_by_role("button", name="Add mark").click()
    expect(page.locator("#spans-refused")).to_contain_text(
        "overlaps your mark on \u201cbrown dog\u201d"
    )
    expect(page.locator("#spans-list li")).to_have_count(1)
    # The selection stays, so the annotator can shorten it and add it again.
    expect(page.locator("#spans-panel")).to_be_visible()
    select_words(page, "sits", "sofa")
    page.get_by_role("button", name="Add mark").click()
    expect(page.locator("#spans-list li")).to_have_count(2)

    # Editing a mark onto its neighbour is refused the same way.
    page.get_by_role("button", name=re.compile("^Edit mark 2")).click()
    select_words(page, "dog", "sofa")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#spans-refused")).to_contain_text(
        "overlaps your mark on \u201cbrown dog\u201d"
    )
    expect(page.locator("#spans-list li").nth(1)).to_contain_text("\u201csits on a red sofa\u201d")
    assert_no_serious_a11y_violations(page, context="spans page after a refused overlap")
    assert_fits_every_width(page, "spans page after a refused overlap", shot="issue46-row8-overlap")

    page.locator("#score").fill("40")
    with page.expect_navigation():
        page.get_by_role("button", name="Submit").click()
    judgment = Judgment.objects.get(participant__external_id="E2E-OVERLAP")
    text = TEXTS["alpha"]
    assert [m["text"] for m in judgment.payload["spans"]] == ["brown dog", "sits on a red sofa"]
    for mark in judgment.payload["spans"]:
        assert text[mark["start"] : mark["end"]] == mark["text"]


def long_caption_study(researcher):
    study = spans_study(researcher, systems=("alpha",), images=2, live=False, min_seconds=0)
    Caption.objects.filter(study=study).update(text=LONG, raw_text=LONG)
    # Real files (1600 x 1200, shown at 1024 x 768): the band's height is the image's own.
    real_files(study)
    study_open(study=study)
    study.refresh_from_db()
    return study


def test_on_a_phone_the_panel_opens_in_view_beside_a_long_caption(browser, live_server, researcher):
    study = long_caption_study(researcher)
    height = PHONE["viewport"]["height"]
    with device_page(browser, live_server, **PHONE) as page:
        start(page, study, "E2E-SPANS-PHONE", tiny_image=False)
        # An empty list says so, not a bare heading.
        expect(page.locator("#spans-marks-section").get_by_text("none yet")).to_be_visible()
        # The image is a small band: at most a fifth of the screen.
        image = page.locator(".spans-image").bounding_box()
        assert image["height"] <= 0.2 * height, image
        # A word near the end of the long caption, tapped: the panel is on the screen.
        target = word(page, "lighthouse")
        target.scroll_into_view_if_needed()
        box = target.bounding_box()
        page.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(page.locator("#spans-selected")).to_have_text("\u201clighthouse\u201d")
        panel = page.locator("#spans-panel").bounding_box()
        assert panel["y"] >= 0 and panel["y"] + panel["height"] <= height, panel
        # ... and the word stays visible above it, not under it.
        box = target.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= panel["y"], (box, panel)
        image = page.locator(".spans-image").bounding_box()
        assert image["height"] <= 0.2 * height, image
        assert_no_serious_a11y_violations(page, context="spans phone, panel open")
        screen(page, "issue46-row9-spans-phone-panel-390.png")
        page.locator("#spans-add").tap()
        expect(page.locator("#spans-list li")).to_contain_text("\u201clighthouse\u201d")
        expect(page.get_by_text("none yet")).to_be_hidden()
        expect(page.locator("#spans-panel")).to_be_hidden()
        assert_fits_every_width(page, "spans phone with a long caption", shot="issue46-row9-spans")
        assert_no_serious_a11y_violations(page, context="spans long caption, 1280 px")


def test_one_progress_line_with_its_total(page, login, researcher, make_user):
    study = spans_study(researcher, systems=("alpha", "beta"), images=2, min_seconds=0)
    lines = page.get_by_text(re.compile(r"judged|Toward the completion"))
    # A crowd worker: the line toward the completion code, and no second count.
    start(page, study, "E2E-SPANS-TOTAL")
    expect(lines).to_have_count(1)
    expect(lines).to_contain_text(re.compile(r"\b0 of \d+ captions"))
    page.locator("#score").fill("90")
    with page.expect_navigation():
        page.get_by_role("button", name="Submit").click()
    expect(lines).to_have_count(1)
    expect(lines).to_contain_text(re.compile(r"\b1 of \d+ captions"))
    assert_no_serious_a11y_violations(page, context="spans progress, crowd")
    assert_fits_every_width(page, "spans progress, crowd", shot="issue46-row13-spans-crowd")

    # A registered annotator: captions judged of the study's captions.
    page.context.clear_cookies()
    total = Caption.objects.filter(study=study).count()
    user = make_user("marker")
    study.annotators.add(user)
    login(page, user)
    page.goto(f"/s/{study.public_id}/next/")
    expect(lines).to_have_count(1)
    expect(lines).to_have_text(f"Captions judged: 0 of {total}")
    assert_no_serious_a11y_violations(page, context="spans progress, annotator")
    assert_fits_every_width(page, "spans progress, annotator", shot="issue46-row13-spans")
