"""A blind crowd worker's way in, by the accessibility tree alone (issue 43).

The worker arrives by the study's crowd link from Prolific with ``group=blv``, reads the
entry page, answers the vision question (first sending it empty, to hear the errors),
rates the one item and reaches the completion code. Everything is found as a screen reader
finds it: Playwright's role and label locators and the page's aria snapshot; no CSS
selector, coordinate or screenshot. Every step is a key (Tab, Space, Enter, a digit), at
390 and at 1280 px. On the entry, vision (with and without errors) and completion pages
axe's WCAG 2.2 AA rules find nothing, of any impact, and no page scrolls sideways at either
width. The page's requests never leave the live server.

The study is of the tests' vehicle mode, made to ask the vision question for the test
(``asks_vision``, monkeypatched on its class): the pages are the generic ones.
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Participant
from annotation.modes import get_mode
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import axe_wcag22_violations, describe
from tests.e2e.layout import WIDTHS, assert_fits_every_width
from tests.factories.core import vehicle_study
from tests.factories.vehicle import NAME as VEHICLE

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def reader_page(browser, live_server):
    """A page in a fresh context that fails the test on a JavaScript error, any console
    error but Chromium's "Failed to load resource" of a page answered 400 on purpose (the
    refused form), or a request outside the live server."""
    context = browser.new_context(base_url=live_server.url)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    problems: list[str] = []
    host = live_server.url.split("//", 1)[1]

    def on_request(request):
        if request.url.startswith(("data:", "blob:", "about:")):
            return
        if request.url.split("//", 1)[-1].split("/", 1)[0] != host:
            problems.append(f"request outside the live server: {request.url}")

    def on_console(message):
        if message.type == "error" and "Failed to load resource" not in message.text:
            problems.append(f"console error: {message.text}")

    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
    page.on("console", on_console)
    page.on("request", on_request)
    yield page
    context.close()
    assert problems == []


def tab_to(page, target, limit: int = 60) -> None:
    """Press Tab until ``target`` (a role or label locator) has the focus."""
    for _ in range(limit):
        if target.evaluate("element => element === document.activeElement"):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {target}")


def check(page, context: str, width: int) -> None:
    """No sideways scroll and no WCAG 2.2 AA finding at either width; back to ``width``."""
    for size in WIDTHS:
        page.set_viewport_size({"width": size, "height": 844})
        found = axe_wcag22_violations(page)
        assert found == [], f"{context} at {size} px:\n" + "\n".join(map(describe, found))
    assert_fits_every_width(page, context)
    page.set_viewport_size({"width": width, "height": 844})


def snapshot(page) -> str:
    return page.locator("body").aria_snapshot()


def press_enter_and_wait(page) -> None:
    with page.expect_navigation():
        page.keyboard.press("Enter")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_blind_worker_reaches_the_item_and_the_code_by_keyboard_alone(
    reader_page, researcher, monkeypatch, width
):
    monkeypatch.setattr(type(get_mode(VEHICLE)), "asks_vision", True)
    study = vehicle_study(researcher, captions=1, target=1, completion_after=1)
    page = reader_page
    page.set_viewport_size({"width": width, "height": 844})
    worker = f"BLV-{width}"

    # The entry: the crowd link lands on the study's introduction.
    page.goto(
        f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}&STUDY_ID=S&SESSION_ID=X&group=blv"
    )
    expect(page.get_by_role("heading", level=1)).to_have_text(study.name)
    tree = snapshot(page)
    assert "- banner:" in tree and "- main:" in tree
    assert tree.index(f'heading "{study.name}" [level=1]') < tree.index(
        'heading "How this study works" [level=2]'
    )
    check(page, "the crowd entry page", width)
    tab_to(page, page.get_by_role("link", name="I agree, start"))
    press_enter_and_wait(page)

    # The vision question, before any item.
    expect(page.get_by_role("heading", level=1)).to_have_text("About your vision")
    tree = snapshot(page)
    for line in (
        'heading "Why we ask" [level=2]',
        'group "Which of these describes you best?"',
        'radio "Blind"',
        'radio "Low vision: I see some, but not enough to rely on images"',
        'radio "Sighted: I can see images, with glasses if I wear them"',
        'group "Do you use a screen reader?"',
        'radio "Yes, I use a screen reader"',
        'checkbox "I agree that my answers to these two questions are stored for this study"',
        'button "Save and continue"',
    ):
        assert line in tree, line
    assert "never shown an image" in tree
    check(page, "the vision question", width)

    # Sent empty: every error in the alert, each field marked and described by its error.
    tab_to(page, page.get_by_role("button", name="Save and continue"))
    press_enter_and_wait(page)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Your answer was not saved")
    expect(alert.get_by_role("listitem")).to_have_count(3)
    blind = page.get_by_role("radio", name="Blind", exact=True)
    expect(blind).to_have_attribute("aria-invalid", "true")
    expect(
        page.get_by_role("group", name="Which of these describes you best?")
    ).to_have_accessible_description("Choose one. Error: Choose blind, low vision or sighted.")
    consent = page.get_by_role("checkbox", name="I agree that my answers")
    expect(consent).to_have_accessible_description(
        "Without your agreement this study cannot go on: please return it on the site you "
        "came from. Error: Tick the box to agree that your answer is stored; without it "
        "this study cannot go on."
    )
    check(page, "the vision question with errors", width)
    assert Participant.objects.get(external_id=worker).vision == ""

    # Answered with Tab and Space: blind, a screen reader, consent; Enter saves.
    tab_to(page, blind)
    page.keyboard.press("Space")
    expect(blind).to_be_checked()
    page.keyboard.press("Tab")
    reader = page.get_by_role("radio", name="Yes, I use a screen reader")
    expect(reader).to_be_focused()
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    expect(consent).to_be_focused()
    page.keyboard.press("Space")
    expect(consent).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Save and continue")).to_be_focused()
    press_enter_and_wait(page)

    # The item page, then the completion code in its own region with a heading.
    expect(page.get_by_role("heading", level=1)).to_have_text("Rate a caption")
    participant = Participant.objects.get(external_id=worker)
    assert (participant.vision, participant.screen_reader, participant.link_group) == (
        "blind",
        True,
        "blv",
    )
    rating = page.get_by_label("Rating (part 1 of 1)")
    tab_to(page, rating)
    page.keyboard.press("4")
    press_enter_and_wait(page)

    expect(page.get_by_role("heading", level=1)).to_have_text("Thank you")
    region = page.get_by_role("region", name="Your completion code")
    expect(region.get_by_role("status")).to_contain_text(study.completion_code)
    tree = snapshot(page)
    assert (
        tree.index('heading "Thank you" [level=1]')
        < tree.index('heading "Your completion code" [level=2]')
        < tree.index('heading "What next" [level=2]')
    )
    expect(
        page.get_by_role("link", name="Return to Prolific to record your completion")
    ).to_be_visible()
    check(page, "the completion page", width)
