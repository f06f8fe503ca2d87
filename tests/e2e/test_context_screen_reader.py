"""A whole context study by the accessibility tree and the keyboard alone (issue 43).

A blind crowd worker arrives by the study's crowd link from Prolific (``PROLIFIC_PID``,
``STUDY_ID``, ``SESSION_ID`` and ``group=blv``), reads the entry page, answers the vision
question (blind, a screen reader, consent), rates every item it is served and reaches the
completion code. Everything is found as a screen reader finds it: Playwright's role, label
and text locators and the page's aria snapshot (landmarks, the heading outline, regions,
radio groups); no CSS selector, coordinate or screenshot. Every step is a key (Tab,
Shift+Tab, the arrows inside a radio group, a digit, Space, Enter), at 390 and 1280 px.
No image, and no request for one, ever reaches this worker. A sighted worker's item then
shows the image in its second part, with the after-image questions, by keyboard too.

On every page of the mode (entry, vision question, each part, a refused answer, the
completion page and the researcher's report) axe's WCAG 2.2 AA rules find nothing of any
impact, and no page scrolls sideways at either width. No request leaves the live server.
No wall-clock sleep: each item's minimum reading time is a few seconds, and the test waits
for the page's own announcement that the ratings can be sent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.templatetags.static import static

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Judgment, Participant
from annotation.modes.context.questions import MISSING_QUESTION, QUESTIONS
from annotation.services.participants import crowd_link_token
from tests.e2e.conftest import DEFAULT_TIMEOUT_MS, EXPECT_TIMEOUT_MS
from tests.e2e.layout import HEIGHT, WIDTHS
from tests.e2e.screen_reader import (
    check,
    focused,
    heard,
    landmarks,
    listen,
    outline,
    press_and_wait,
    snapshot,
    tab_to,
)
from tests.factories.context import context_study, rate, rater
from tests.factories.machine import load_factor

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: Words a minute the study counts: its items' 22 to 40 words take four to six seconds,
#: long enough to hear the wait announced on a slow server, short enough to wait for.
READING_RATE = 400
#: Chromium's console lines for answers the server refuses on purpose: a rating missing
#: (400) and an answer sent before the minimum time (429, sent again by the page).
REFUSED = re.compile(r"the server responded with a status of (400|429)\b")


@dataclass
class Browser:
    """A page, the images it asked the server for and what went wrong."""

    page: object
    images: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@pytest.fixture
def tab(browser, live_server):
    """A page in a fresh context that fails the test on a JavaScript error, a console
    error (but ``REFUSED``) or a request outside the live server, and keeps the path of
    every image it requests (the site's icon aside)."""
    context = browser.new_context(base_url=live_server.url)
    factor = load_factor()
    context.set_default_timeout(DEFAULT_TIMEOUT_MS * factor)
    expect.set_options(timeout=EXPECT_TIMEOUT_MS * factor)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    host = urlsplit(live_server.url).netloc
    icons = {static("capeval/favicon.svg"), "/favicon.ico"}
    session = Browser(page=context.new_page())

    def on_request(request):
        parts = urlsplit(request.url)
        if parts.scheme in ("data", "blob", "about"):
            return
        if parts.netloc != host:
            session.problems.append(f"request outside the live server: {request.url}")
        elif parts.path not in icons and (
            request.resource_type == "image"
            or parts.path.startswith(settings.MEDIA_URL)
            or "/image/" in parts.path
        ):
            session.images.append(parts.path)

    def on_console(message):
        on_purpose = REFUSED.search(message.text) and "/submit/" in message.location.get("url", "")
        if message.type == "error" and not on_purpose:
            session.problems.append(f"console error: {message.text} ({message.location})")

    page = session.page
    page.on("pageerror", lambda error: session.problems.append(f"JavaScript error: {error}"))
    page.on("console", on_console)
    page.on("request", on_request)
    yield session
    context.close()
    assert session.problems == []


def new_study(researcher, **settings):
    """A live context study of one image: two descriptions, each in two contexts, one
    rating of each by each group, read at ``READING_RATE``."""
    return context_study(
        researcher,
        images=1,
        reading_rate=READING_RATE,
        blv_ratings=1,
        sighted_ratings=1,
        **settings,
    )


# ------------------------------------------------------------------- before the items


def no_image(page, tree: str, what: str) -> None:
    assert not re.search(r"^\s*- img\b", tree, re.M), f"{what} has an image:\n{tree}"
    expect(page.get_by_role("img")).to_have_count(0)


def enter(page, study, worker: str, group: str) -> None:
    """The crowd link as Prolific opens it, for the link of ``group``."""
    page.goto(
        f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}&STUDY_ID=S43"
        f"&SESSION_ID=X-{worker}&group={group}"
    )


def entry_page(page, study, width: int) -> None:
    """The entry page: landmarks, the study's h1, how it works; Enter on "I agree"."""
    expect(page.get_by_role("heading", level=1)).to_have_text(study.name)
    tree = snapshot(page)
    assert landmarks(tree) == ["banner", "main"], tree
    assert outline(tree)[:2] == [(1, study.name), (2, "How this study works")], tree
    expect(page.get_by_text("never shown an image or asked to look at one")).to_be_visible()
    no_image(page, tree, "the entry page")
    check(page, "the crowd entry page", width)
    tab_to(page, page.get_by_role("link", name="I agree, start"))
    press_and_wait(page)


def vision_page(page, width: int, vision: str, reader: str) -> None:
    """The vision question, once, before any item: ``vision`` and ``reader`` are the
    names of the radios to choose, by Tab, Space and the arrows; Enter saves."""
    expect(page.get_by_role("heading", level=1)).to_have_text("About your vision")
    tree = snapshot(page)
    assert outline(tree)[0] == (1, "About your vision"), tree
    assert 'group "Which of these describes you best?"' in tree, tree
    assert 'group "Do you use a screen reader?"' in tree, tree
    no_image(page, tree, "the vision question")
    check(page, "the vision question", width)
    for question, name in (("Which of these", vision), ("Do you use a screen reader?", reader)):
        group = page.get_by_role("group", name=question)
        tab_to(page, group.get_by_role("radio").first)
        page.keyboard.press("Space")  # then the arrows move the choice down to ``name``
        choice = group.get_by_role("radio", name=name)
        for _ in range(3):
            if not focused(choice):
                page.keyboard.press("ArrowDown")
        expect(choice).to_be_checked()
    page.keyboard.press("Tab")
    consent = page.get_by_role("checkbox", name="I agree that my answers")
    expect(consent).to_be_focused()
    page.keyboard.press("Space")
    expect(consent).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Save and continue")).to_be_focused()
    press_and_wait(page)


# ------------------------------------------------------------------- an item page


@dataclass(frozen=True)
class Shown:
    """An item page's text, each part read from its region: the page's title, the
    passage around the image and the description."""

    title: str
    passage: str
    description: str

    def words(self) -> int:
        return sum(len(text.split()) for text in (self.title, self.passage, self.description))


def read_item(page) -> Shown:
    where = page.get_by_role("region", name="Where the image appears")
    described = page.get_by_role("region", name="The description")
    return Shown(
        title=where.get_by_role("definition").first.inner_text().strip(),
        passage=where.get_by_role("blockquote").inner_text().strip(),
        description=described.get_by_role("blockquote").inner_text().strip(),
    )


def announced_wait(page, seconds: int) -> None:
    """The status region announces the wait when the page is ready (checked first thing,
    while it lasts): what is left of ``seconds`` when the server made the page, so at most
    that on a slow server."""
    status = page.get_by_role("status").filter(has_text="You can send your ratings")
    expect(status).to_have_text(
        re.compile(r"^You can send your ratings in (1 second|\d+ seconds)\.$")
    )
    left = int(re.search(r"\d+", status.inner_text()).group())
    assert 1 <= left <= seconds, status.inner_text()


def wait_until_sendable(page, seconds: int) -> None:
    """The announced state after the wait: no sleep, the page's own words."""
    status = page.get_by_role("status").filter(has_text="You can send your ratings")
    expect(status).to_have_text(
        "You can send your ratings now.", timeout=(seconds + 10) * 1000 * load_factor()
    )


def stated_wait(page, shown: Shown, seconds: int) -> None:
    """The page states the minimum time in its text, from the words it shows."""
    unit = "second" if seconds == 1 else "seconds"
    expect(page.get_by_text(f"You can send your ratings after {seconds} {unit}")).to_contain_text(
        f"the {shown.words()} words above at {READING_RATE} words a minute"
    )


def questions_of(page, part: int) -> list:
    """The page's radio groups, each found by its question, in the protocol's order."""
    return [page.get_by_role("group", name=question.text) for question in QUESTIONS[part].values()]


def radio_groups(page, part: int, what: str) -> None:
    """Each question a group of five radios named by number and word, in the order asked,
    and nothing else a group in the form."""
    tree = snapshot(page)
    asked = [question.text for question in QUESTIONS[part].values()]
    in_tree = re.findall(r'- \'?group "([^"]*)"', tree)  # quoted whole if the name has ":"
    assert in_tree == asked, f"{what}: the radio groups are {in_tree}, not {asked}"
    for group, question in zip(questions_of(page, part), QUESTIONS[part].values(), strict=True):
        radios = group.get_by_role("radio")
        expect(radios).to_have_count(5)
        for number, word in enumerate(question.scale, start=1):
            expect(radios.nth(number - 1)).to_have_accessible_name(f"{number} - {word}")


def answer(page, group, value: int, *, by_digit: bool = False) -> None:
    """One Tab onto the group (its first radio: the focus order is the reading order),
    then Space and the right arrow, or the digit the page's script takes."""
    radios = group.get_by_role("radio")
    page.keyboard.press("Tab")
    expect(radios.first).to_be_focused()
    if by_digit:
        page.keyboard.press(str(value))
    else:
        page.keyboard.press("Space")
        for _ in range(value - 1):
            page.keyboard.press("ArrowRight")
    expect(radios.nth(value - 1)).to_be_checked()
    expect(radios.nth(value - 1)).to_be_focused()


def send_and_hear_saved(page) -> None:
    """Enter on the focused send button: the status region announces "Saved." (the page
    then goes on to the next one at once)."""
    listen(page)
    press_and_wait(page)
    assert "Saved." in heard(page), heard(page)


BEFORE_OUTLINE = [
    (1, "Rate a description in its context"),
    (2, "Where the image appears"),
    (2, "The description"),
    (2, "Your ratings"),
]
AFTER_OUTLINE = [
    (1, "Rate the description with the image"),
    (2, "Where the image appears"),
    (2, "The image"),
    (2, "The description"),
    (2, "Your ratings with the image"),
]


def before_image_page(page, width: int, what: str) -> Shown:
    """Part 0 as a screen reader meets it; returns what it shows."""
    shown = read_item(page)
    seconds = math.ceil(shown.words() * 60 / READING_RATE)
    announced_wait(page, seconds)
    stated_wait(page, shown, seconds)
    tree = snapshot(page)
    assert landmarks(tree) == ["banner", "main"], tree
    assert outline(tree) == BEFORE_OUTLINE, f"{what}: heading outline\n{tree}"
    for region in ("Where the image appears", "The description"):
        assert f'region "{region}":' in tree, f"{what}: no region {region}\n{tree}"
    assert 'form "Your ratings":' in tree, tree
    no_image(page, tree, what)
    radio_groups(page, 0, what)
    check(page, what, width)
    return shown


# ------------------------------------------------------------------- the blind worker


@pytest.mark.parametrize("width", WIDTHS)
def test_a_blind_worker_completes_a_context_study_by_the_accessibility_tree(tab, researcher, width):
    study = new_study(researcher, completion_after=2)
    page = tab.page
    page.set_viewport_size({"width": width, "height": HEIGHT})
    worker = f"BLV-{width}"
    enter(page, study, worker, "blv")
    entry_page(page, study, width)
    vision_page(page, width, "Blind", "Yes, I use a screen reader")
    participant = Participant.objects.get(study=study, external_id=worker)
    declared = (participant.vision, participant.screen_reader, participant.link_group)
    assert declared == ("blind", True, "blv")

    rated: list[Shown] = []
    keyed: list[dict[str, int]] = []  # what the keys chose, item by item
    while page.get_by_role("heading", level=1).inner_text() == BEFORE_OUTLINE[0][1]:
        assert len(rated) < 2, "served more descriptions than the code asks"
        shown = before_image_page(page, width, what := f"item {len(rated) + 1}")
        expect(page.get_by_text("Read where the image appears and its description")).to_be_visible()
        groups = questions_of(page, 0)
        # The first item is first sent without its third rating.
        left_out = 2 if not rated else None
        tab_to(page, page.get_by_role("link", name="Skip to content"))
        # From the top, the first control after the header is the first question's radio.
        tab_to(page, groups[0].get_by_role("radio").first)
        page.keyboard.press("Shift+Tab")
        chosen = {}
        for index, (group, name) in enumerate(zip(groups, QUESTIONS[0], strict=True)):
            if index == left_out:
                page.keyboard.press("Tab")  # onto it and on, unanswered
                continue
            chosen[name] = 5 - index
            answer(page, group, chosen[name], by_digit=index == 3)
        send = page.get_by_role("button", name="Send ratings")
        page.keyboard.press("Tab")
        expect(send).to_be_focused()
        wait_until_sendable(page, math.ceil(shown.words() * 60 / READING_RATE))
        if left_out is not None:
            chosen[list(QUESTIONS[0])[left_out]] = 2
            refused(page, participant, groups, left_out, width, what)
        send_and_hear_saved(page)
        rated.append(shown)
        keyed.append(chosen)

    # The code: the page's h1, then the code's region, its words in a status region.
    expect(page.get_by_role("heading", level=1)).to_have_text("Thank you")
    tree = snapshot(page)
    assert outline(tree)[:2] == [(1, "Thank you"), (2, "Your completion code")], tree
    region = page.get_by_role("region", name="Your completion code")
    expect(region.get_by_role("status")).to_contain_text(study.completion_code)
    announced = region.aria_snapshot()
    assert "- status:" in announced and study.completion_code in announced, announced
    no_image(page, tree, "the completion page")
    check(page, "the completion page", width)

    # Two descriptions, each once and in one context, before the image only; no image ever.
    assert len({shown.description for shown in rated}) == len(rated) == 2
    judgments = Judgment.objects.filter(participant=participant).select_related("item")
    assert sorted((j.item.kind, j.part) for j in judgments) == [("blv", 0), ("blv", 0)]
    assert [j.payload for j in judgments.order_by("pk")] == keyed
    assert tab.images == []


def refused(page, participant, groups, left_out: int, width: int, what: str) -> None:
    """Sent with a rating missing: nothing saved, the error announced in an alert that has
    the focus and names the question, the question's group named with its error; the
    answers kept. Shift+Tab from the send button back to the question, then answered."""
    question = list(QUESTIONS[0].values())[left_out]
    press_and_wait(page)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Nothing was saved")
    expect(alert).to_contain_text(question.short)
    expect(alert).to_be_focused()
    groups = questions_of(page, 0)
    wrong = page.get_by_role("group", name=re.compile("Error:"))
    expect(wrong).to_have_count(1)
    expect(wrong).to_have_accessible_name(re.compile(re.escape(question.text) + " Error: "))
    tree = snapshot(page)
    assert re.search(r"^\s*- alert:", tree, re.M), tree
    assert outline(tree) == BEFORE_OUTLINE, f"{what} refused: heading outline\n{tree}"
    assert Judgment.objects.filter(participant=participant).count() == 0
    no_image(page, tree, f"{what} refused")
    check(page, f"{what} refused", width)
    for index, group in enumerate(groups):
        if index != left_out:
            expect(group.get_by_role("radio").nth(4 - index)).to_be_checked()
    send = page.get_by_role("button", name="Send ratings")
    tab_to(page, send)
    group = page.get_by_role("group", name=re.compile(re.escape(question.text)))
    # Back into a group with no answer, Chromium's focus lands on its first radio.
    tab_to(page, group.get_by_role("radio").first, back=True)
    page.keyboard.press("Space")
    page.keyboard.press("ArrowRight")
    expect(group.get_by_role("radio").nth(1)).to_be_checked()
    tab_to(page, send)
    # No keyboard trap: Tab leaves the send button, Shift+Tab comes back to it.
    page.keyboard.press("Tab")
    assert not focused(send)
    page.keyboard.press("Shift+Tab")
    expect(send).to_be_focused()


# ------------------------------------------------------------------- the sighted worker


@pytest.mark.parametrize("width", WIDTHS)
def test_a_sighted_worker_rates_with_the_image_in_the_second_part_by_keyboard(
    tab, researcher, width
):
    study = new_study(researcher, completion_after=1, min_seconds_with_image=2)
    page = tab.page
    page.set_viewport_size({"width": width, "height": HEIGHT})
    worker = f"SIGHTED-{width}"
    enter(page, study, worker, "sighted")
    entry_page(page, study, width)
    vision_page(page, width, "Sighted", "No, I do not use a screen reader")
    participant = Participant.objects.get(study=study, external_id=worker)
    assert (participant.vision, participant.screen_reader) == ("sighted", False)

    # Part 1 of 2, before the image: as the blind worker's, and still no image.
    expect(page.get_by_role("heading", level=1)).to_have_text(BEFORE_OUTLINE[0][1])
    shown = before_image_page(page, width, "the sighted worker's first part")
    expect(page.get_by_text("Step 1 of 2")).to_contain_text("The image is not shown yet.")
    groups = questions_of(page, 0)
    tab_to(page, groups[0].get_by_role("radio").first)
    page.keyboard.press("Shift+Tab")
    before = {}
    for index, (group, name) in enumerate(zip(groups, QUESTIONS[0], strict=True)):
        before[name] = 4 - index
        answer(page, group, before[name], by_digit=index % 2 == 1)
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Send ratings and see the image")).to_be_focused()
    wait_until_sendable(page, math.ceil(shown.words() * 60 / READING_RATE))
    assert tab.images == [], "an image before the after-image part"
    send_and_hear_saved(page)

    # Part 2 of 2: the image, its own region between the context and the description.
    expect(page.get_by_role("heading", level=1)).to_have_text(AFTER_OUTLINE[0][1])
    tree = snapshot(page)
    assert outline(tree) == AFTER_OUTLINE, f"the after-image part: heading outline\n{tree}"
    assert landmarks(tree) == ["banner", "main"], tree
    image = page.get_by_role("region", name="The image").get_by_role("img")
    expect(image).to_have_count(1)
    expect(image).to_have_accessible_name(re.compile(r"\w"))
    expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth > 0"), "the image did not load"
    shown_image = image.evaluate("img => new URL(img.src).pathname")
    assert read_item(page) == shown, "the context or description changed with the image"
    expect(
        page.get_by_text("You can send your ratings after 2 seconds with the image")
    ).to_be_visible()
    radio_groups(page, 1, "the after-image part")
    missing = page.get_by_role("textbox", name=re.compile(re.escape(MISSING_QUESTION[:40])))
    expect(missing).to_have_count(1)
    check(page, "the after-image part", width)

    # Sent at once, the accuracy left out: if the two seconds are not over, the page says
    # so and sends it then; refused, the question named, the rest kept, the image still shown.
    groups = questions_of(page, 1)
    tab_to(page, groups[0].get_by_role("radio").first)
    page.keyboard.press("Shift+Tab")
    answer(page, groups[0], 2, by_digit=True)
    page.keyboard.press("Tab")  # onto the accuracy, and on
    page.keyboard.press("Tab")
    expect(missing).to_be_focused()
    page.keyboard.type("The umbrella's colour.")
    page.keyboard.press("Tab")
    send = page.get_by_role("button", name="Send ratings")
    expect(send).to_be_focused()
    listen(page)
    press_and_wait(page)
    waited = [said for said in heard(page) if said.startswith("Sending in ")]
    assert all(said.endswith("the minimum time for this item is not over yet.") for said in waited)
    accuracy = QUESTIONS[1]["accuracy"]
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(accuracy.short)
    expect(alert).to_be_focused()
    wrong = page.get_by_role("group", name=re.compile("Error:"))
    expect(wrong).to_have_accessible_name(re.compile(re.escape(accuracy.text) + " Error: "))
    expect(missing).to_have_value("The umbrella's colour.")
    expect(groups[0].get_by_role("radio").nth(1)).to_be_checked()
    expect(image).to_be_visible()
    check(page, "the after-image part refused", width)
    tab_to(page, send)
    tab_to(page, groups[1].get_by_role("radio").first, back=True)
    page.keyboard.press("4")
    expect(groups[1].get_by_role("radio").nth(3)).to_be_checked()
    tab_to(page, send)
    send_and_hear_saved(page)
    after = {"overall": 2, "accuracy": 4}

    # The code is earned (one description): it heads the next item, in its region and
    # announced there.
    region = page.get_by_role("region", name="Your completion code")
    expect(region.get_by_role("status")).to_contain_text(study.completion_code)
    expect(page.get_by_role("heading", level=1)).to_have_text(BEFORE_OUTLINE[0][1])
    tree = snapshot(page)
    assert outline(tree) == [
        *BEFORE_OUTLINE[:1],
        (2, "Your completion code"),
        *BEFORE_OUTLINE[1:],
    ], f"the next item with the code: heading outline\n{tree}"
    check(page, "the next item with the code", width)

    stored = {j.part: j.payload for j in Judgment.objects.filter(participant=participant)}
    assert stored == {0: before, 1: {**after, "missing": "The umbrella's colour."}}
    # The image came only with the after-image part: its display rendition, nothing else.
    assert set(tab.images) == {shown_image}


# ------------------------------------------------------------------- the researcher


def log_in_by_keyboard(page, user, then: str) -> None:
    """Log in by the keyboard alone: the username field has the focus when the page opens.

    Chromium gives an ``autofocus`` field the focus at a rendering step after the page
    loads, so each key waits until its field is focused: typing at once lost the first
    letters of the username on a busy CI machine and the login failed.
    """
    page.goto(f"/accounts/login/?next={then}")
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.type(user.username)
    page.keyboard.press("Tab")
    expect(page.get_by_label("Password")).to_be_focused()
    page.keyboard.type(f"pw-{user.username}")
    press_and_wait(page)


def test_the_researchers_report_of_a_context_study_has_no_wcag_22_aa_violation(tab, researcher):
    study = context_study(researcher, images=1, blv_ratings=2, sighted_ratings=2)
    for vision in ("blind", "low_vision", "sighted", "sighted"):
        someone = rater(study, vision)
        while rate(someone) is not None:
            pass
    page = tab.page
    page.set_viewport_size({"width": 1280, "height": HEIGHT})

    log_in_by_keyboard(page, researcher, f"/studies/{study.pk}/report/")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Report: {study.name}")
    check(page, "the report page before the report", 1280)

    compute = page.get_by_role("button", name="Compute the report")
    tab_to(page, compute)
    press_and_wait(page)
    expect(page.get_by_role("heading", name="What is included")).to_be_visible()
    tree = snapshot(page)
    headings = outline(tree)
    assert headings[0] == (1, f"Report: {study.name}"), tree
    assert headings[1] == (2, "What is included"), tree
    assert (2, "Metrics and judges by group") in headings, tree
    for system in ("good-detail", "bad-short"):
        assert any(level == 2 and name.startswith(system) for level, name in headings), tree
    expect(page.get_by_role("table").first).to_be_visible()
    check(page, "the context report", 1280)


def test_the_context_studys_page_and_dashboard_have_no_wcag_22_aa_violation(tab, researcher):
    """The researcher's other page of the mode: the study page, with its crowd panel (a
    Prolific URL per rater group) and its live dashboard (the mode's panel)."""
    study = context_study(researcher, images=1, blv_ratings=1, sighted_ratings=1)
    rate(rater(study, "blind"))
    page = tab.page
    page.set_viewport_size({"width": 1280, "height": HEIGHT})
    log_in_by_keyboard(page, researcher, f"/studies/{study.pk}/")
    expect(page.get_by_text("Study URL for blind and low-vision raters only")).to_be_visible()
    # The live dashboard is a part of the study page, the mode's panel in it.
    expect(page.get_by_text("Progress by kind of site and rater group")).to_be_visible()
    check(page, "the context study's page", 1280)


# ------------------------------------------------------------------- single keys


def test_no_single_key_shortcut_acts_outside_its_own_control(tab, researcher):
    """WCAG 2.1.4 (A): a screen reader in focus mode on a radio group hands letters to the
    page, so the mode's item page turns the page-wide g (and z) shortcut off
    (``data-page-keys="off"``; guidelines.js, zoom.js); the Guidelines button still opens
    the dialog and no longer announces a key."""
    study = new_study(researcher)
    page = tab.page
    page.set_viewport_size({"width": 1280, "height": HEIGHT})
    enter(page, study, "KEYS", "blv")
    tab_to(page, page.get_by_role("link", name="I agree, start"))
    press_and_wait(page)
    vision_page(page, 1280, "Blind", "Yes, I use a screen reader")
    tab_to(page, questions_of(page, 0)[0].get_by_role("radio").first)
    page.keyboard.press("g")
    expect(page.get_by_role("dialog")).to_have_count(0)
    guidelines = page.get_by_role("button", name="Guidelines")
    assert guidelines.get_attribute("aria-keyshortcuts") is None
    tab_to(page, guidelines, back=True)
    page.keyboard.press("Enter")
    expect(page.get_by_role("dialog")).to_have_count(1)
