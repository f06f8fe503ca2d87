"""The error-span page in a real browser: keyboard-only marking at 1280 and 390 px, touch
selection at 390 px (Playwright's touch emulation), axe, and no request leaving the server.

The caption holds an emoji (two UTF-16 units, one code point), and the span marked by
keyboard starts at it: the stored offsets must be code points.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Judgment, Participant
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.machine import load_factor
from tests.factories.spans import TEXTS, spans_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def start(page, study, pid):
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={pid}")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.spans-form")).to_be_visible()
    # The marking is a deferred script: wait for it before any key is pressed.
    page.wait_for_load_state("load")
    expect(page.locator("#spans-keys")).to_be_visible()


def test_a_span_is_marked_and_scored_with_the_keyboard_only(page, researcher):
    study = spans_study(researcher, systems=("alpha",), images=1, min_seconds=1)
    page.set_viewport_size({"width": 1280, "height": 900})
    start(page, study, "E2E-SPANS-KEYS")
    assert page.evaluate(NO_HORIZONTAL_SCROLL)
    assert_no_serious_a11y_violations(page, context="spans page at 1280 px")

    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(NO_HORIZONTAL_SCROLL)
    assert_no_serious_a11y_violations(page, context="spans page at 390 px")

    # Tab to the caption, move to the emoji (4th word), extend over "sits", confirm.
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "spans-caption":
            break
    expect(page.locator("#spans-caption")).to_be_focused()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Enter")
    expect(page.locator("#spans-selected")).to_have_text("\u201c🐕 sits\u201d")
    # Severity: from Minor to Major with the arrow key, then Tab to Add mark.
    expect(page.locator('input[name="mark-severity"][value="minor"]')).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(page.locator('input[name="mark-severity"][value="major"]')).to_be_checked()
    while page.evaluate("document.activeElement.id") != "spans-add":
        page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#spans-list li")).to_have_count(1)
    expect(page.locator("#spans-list li")).to_contain_text("\u201c🐕 sits\u201d: major, object")
    assert_no_serious_a11y_violations(page, context="spans page with a mark")

    # The score after the spans: the number box, then Enter submits.
    while page.evaluate("document.activeElement.id") != "score":
        page.keyboard.press("Tab")
    page.keyboard.type("35")
    expect(page.locator("#spans-submit")).to_be_enabled(timeout=6000 * load_factor())
    with page.expect_navigation():
        page.keyboard.press("Enter")

    worker = Participant.objects.get(study=study, external_id="E2E-SPANS-KEYS")
    judgment = Judgment.objects.get(participant=worker)
    text = TEXTS["alpha"]
    (mark,) = judgment.payload["spans"]
    assert (mark["start"], mark["end"]) == (text.index("🐕"), text.index("sits") + 4)
    assert text[mark["start"] : mark["end"]] == "🐕 sits" == mark["text"]
    assert mark["severity"] == "major" and judgment.payload["score"] == 35


def test_a_span_is_selected_by_touch_on_a_phone(browser, live_server, researcher):
    study = spans_study(researcher, systems=("alpha",), images=1, min_seconds=0)
    context = browser.new_context(
        base_url=live_server.url, has_touch=True, viewport={"width": 390, "height": 844}
    )
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    outside: list[str] = []
    host = urlsplit(live_server.url).netloc
    page = context.new_page()
    page.on(
        "request",
        lambda r: (
            urlsplit(r.url).netloc != host
            and urlsplit(r.url).scheme not in ("data", "blob", "about")
            and outside.append(r.url)
        ),
    )
    page.on("pageerror", lambda error: outside.append(f"JavaScript error: {error}"))
    try:
        start(page, study, "E2E-SPANS-TOUCH")
        for word in ("red", "sofa"):
            target = page.locator("#spans-caption .w", has_text=word).first
            target.scroll_into_view_if_needed()
            b = target.bounding_box()
            page.touchscreen.tap(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
        expect(page.locator("#spans-selected")).to_have_text("\u201cred sofa\u201d")
        page.locator("#mark-category").select_option("attribute")
        page.locator("#spans-add").tap()
        expect(page.locator("#spans-list li")).to_contain_text("\u201cred sofa\u201d: minor")
        page.locator("#score").fill("70")
        assert page.evaluate(NO_HORIZONTAL_SCROLL)
        assert_no_serious_a11y_violations(page, context="spans page, touch, 390 px")
        with page.expect_navigation():
            page.locator("#spans-submit").tap()
    finally:
        context.close()
    assert outside == []
    judgment = Judgment.objects.get(participant__external_id="E2E-SPANS-TOUCH")
    (mark,) = judgment.payload["spans"]
    assert mark["text"] == "red sofa" and mark["category"] == "attribute"
    assert judgment.payload["score"] == 70


def test_suggested_spans_are_accepted_and_rejected_with_the_keyboard(page, researcher, tmp_path):
    """ESA-AI: two suggestions, one accepted (Space) and one rejected (arrow key), by keyboard
    only; the page passes axe and fits at 390 and 1280 px with the suggestions shown."""
    import json

    from annotation.models import Caption
    from annotation.services.imports.item_files import item_file_import

    study = spans_study(researcher, systems=("alpha",), images=1, min_seconds=0, suggestions=True)
    caption = Caption.objects.get(study=study)
    text = caption.text
    spans = [
        {"start": text.index(w), "end": text.index(w) + len(w), "severity": s, "category": c}
        for w, s, c in (("red sofa", "minor", "attribute"), ("two cats", "major", "count"))
    ]
    path = tmp_path / "judge.jsonl"
    path.write_text(json.dumps({"caption_id": caption.pk, "spans": spans}) + "\n")
    item_file_import(study=study, path=path, name="span-suggestions", source="judge-e2e")

    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        if width == 1280:
            start(page, study, "E2E-SPANS-SUGGEST")
        expect(page.locator(".spans-suggestion")).to_have_count(2)
        assert page.evaluate(NO_HORIZONTAL_SCROLL), width
        assert_no_serious_a11y_violations(page, context=f"spans suggestions at {width} px")

    radios = 'input[name^="suggestion-"]'
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement.matches('{radios}')"):
            break
    page.keyboard.press("Space")  # the first group's Accept
    expect(page.locator(f"{radios}[value=accept]").first).to_be_checked()
    page.keyboard.press("Tab")  # the second group
    page.keyboard.press("ArrowRight")  # Accept -> Reject
    expect(page.locator(f"{radios}[value=reject]").nth(1)).to_be_checked()
    while page.evaluate("document.activeElement.id") != "score":
        page.keyboard.press("Tab")
    page.keyboard.type("50")
    with page.expect_navigation():
        page.keyboard.press("Enter")

    judgment = Judgment.objects.get(participant__external_id="E2E-SPANS-SUGGEST")
    assert [m["text"] for m in judgment.payload["spans"]] == ["red sofa"]
    decisions = {d["id"].rsplit(":", 1)[1]: d["decision"] for d in judgment.payload["suggestions"]}
    assert decisions == {"0": "accepted", "1": "rejected"}
