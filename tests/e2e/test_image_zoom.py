"""Every item page lets the annotator enlarge the image to its original resolution
(issue 46, row 11): with the keyboard (the button, z, + and -, Escape) and by touch (a tap
opens it and zooms in). The dialog loads a rendition as wide as the original (pixels only,
never the original file with its EXIF), passes axe, and gives the focus back when closed.
"""

from __future__ import annotations

import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.devices import PHONE, device_page
from tests.e2e.layout import assert_fits_every_width
from tests.factories.arena import arena_study
from tests.factories.humanr import humanr_study
from tests.factories.images import real_files
from tests.factories.spans import spans_study
from tests.factories.thumb import member, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 1600, 1200
#: What each mode's item page shows once it is there.
READY = {
    "arena": "form.arena-form",
    "spans": "form.spans-form",
    "thumb": "#thumb-form",
    "vicr": "form.vicr-form",
    "humanr": "form.hr-form",
}


def build(mode, researcher, make_study):
    if mode == "arena":
        return arena_study(researcher, images=4, catch_rate=0)
    if mode == "spans":
        return spans_study(researcher, systems=("alpha",), images=1)
    if mode == "thumb":
        return thumb_study(make_study)
    if mode == "vicr":
        return vicr_study(
            researcher,
            game=2,
            tutorial=[5, 2],
            probation=[3, 4],
            tutorial_pairs=2,
            tutorial_pass=2,
            probation_pairs=1,
            probation_pass=-2,
        )
    return humanr_study(researcher, images=18, systems=("GIT",))


def open_item(page, mode, study, login, make_user):
    if mode == "thumb":
        user = make_user("zoomer")
        member(study, user)
        login(page, user)
        page.goto(f"/s/{study.public_id}/next/")
    else:
        page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=ZOOM-{mode}&STUDY_ID=S&SESSION_ID=X")
        page.locator("main a.button.primary").first.click()
    expect(page.locator(READY[mode])).to_be_visible()
    page.wait_for_load_state("load")


@pytest.mark.parametrize("mode", sorted(READY))
def test_the_image_opens_at_its_original_resolution_with_the_keyboard(
    page, login, researcher, make_study, make_user, mode
):
    study = build(mode, researcher, make_study)
    real_files(study, width=WIDTH, height=HEIGHT)
    page.set_viewport_size({"width": 1280, "height": 844})
    open_item(page, mode, study, login, make_user)
    assert_fits_every_width(page, f"{mode} item page", shot=f"issue46-row11-{mode}")
    page.set_viewport_size({"width": 1280, "height": 844})

    checked = page.locator("input:checked").count()
    opener = page.get_by_role("button", name=re.compile("^Enlarge image"))
    opener.focus()
    # The rendition without metadata, never the original (images/...) with its EXIF.
    with page.expect_response(re.compile(r"/media/display/.+-full\.webp$")) as shown:
        page.keyboard.press("Enter")
    assert shown.value.status == 200
    dialog = page.get_by_role("dialog", name=re.compile("The image"))
    expect(dialog).to_be_visible()
    full = dialog.locator("img")
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=full.element_handle()
    )
    assert full.evaluate("(img) => img.naturalWidth") == WIDTH
    assert full.evaluate("(img) => img.naturalHeight") == HEIGHT
    # Fitted first; + zooms in until the box scrolls, and 1 shows every pixel.
    view = dialog.locator(".zoom-view")
    expect(view).to_be_focused()
    page.keyboard.press("+")
    page.keyboard.press("1")
    expect(dialog.locator("output")).to_have_text("100%")
    assert full.evaluate("(img) => img.getBoundingClientRect().width") == WIDTH
    assert view.evaluate("(box) => box.scrollWidth > box.clientWidth")
    # A digit inside the dialog does not answer the item behind it.
    assert page.locator("input:checked").count() == checked
    assert_no_serious_a11y_violations(page, context=f"{mode} zoom dialog")
    assert_fits_every_width(page, f"{mode} zoom dialog", shot=f"issue46-row11-{mode}-zoom")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()
    # z opens it again from the page.
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("z")
    expect(dialog).to_be_visible()
    page.get_by_role("button", name=re.compile("^Close")).click()
    expect(dialog).to_be_hidden()


def test_a_tap_opens_the_image_and_zooms_in_on_a_phone(browser, live_server, researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    real_files(study, width=WIDTH, height=HEIGHT)
    with device_page(browser, live_server, **PHONE) as page:
        page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=ZOOM-TOUCH")
        page.get_by_role("link", name="I agree, start").click()
        page.wait_for_load_state("load")
        page.locator(".zoom-thumb").tap()
        dialog = page.get_by_role("dialog", name=re.compile("The image"))
        expect(dialog).to_be_visible()
        view = dialog.locator(".zoom-view")
        assert not view.evaluate("(box) => box.scrollWidth > box.clientWidth")
        full = dialog.locator("img")
        page.wait_for_function("(img) => img.naturalWidth > 0", arg=full.element_handle())
        full.tap()
        assert view.evaluate("(box) => box.scrollWidth > box.clientWidth")
        assert_no_serious_a11y_violations(page, context="zoom on a phone")
        dialog.get_by_role("button", name=re.compile("^Close")).tap()
        expect(dialog).to_be_hidden()
