"""Issue 26, rows 14, 15 and 16 in Chromium: the new-study form, THumB at 390 px and the
study page, rebuilt for people.

Each page passes axe, fits 390 px and 1280 px without sideways scrolling, and requests
nothing outside the live server (the ``page`` fixture fails on that). The layout checks
measure the page as a person sees it (bounding boxes), not the markup.
"""

from __future__ import annotations

import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Caption, Image, Study
from annotation.services.studies import study_create, study_open
from rubrics.thumb import normalise
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.test_researcher_rows import WIDTHS, assert_fits_every_width
from tests.e2e.test_thumb import write_display_image
from tests.factories.core import vehicle_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: WCAG 2.5.8 (target size, minimum): 24 by 24 CSS pixels.
MIN_TARGET_PX = 24


def boxes(page, selector: str) -> list[dict]:
    """The bounding boxes of every element matching ``selector``, in page order."""
    return page.eval_on_selector_all(
        selector,
        """els => els.map(e => { const r = e.getBoundingClientRect();
             return {x: r.x, y: r.y, width: r.width, height: r.height, bottom: r.bottom}; })""",
    )


# Row 14 --------------------------------------------------------------------------------


def test_row14_the_new_study_form_speaks_plainly_in_groups_two_columns_wide(
    page, login, researcher
):
    login(page, researcher)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/studies/new/")
    page.get_by_label("Mode").select_option("thumb")
    settings = page.locator("#mode-settings")
    expect(settings.locator("legend").first).to_contain_text("THumB")

    # Plain words in the labels; the code names only as the keys in the help.
    labels = [text.strip() for text in settings.locator("label").all_inner_texts()]
    for code_like in ("Stage2", "N images", "Catch min seen", "stage2", "n_images"):
        assert code_like not in labels, f"a label reads like code: {code_like}"
    expect(page.get_by_label("Images to judge")).to_be_visible()
    expect(page.get_by_label("A second annotator reviews every image")).to_be_checked()
    expect(settings).to_contain_text("Key: n_images")

    # Grouped, the protocol's own settings first; the catch trials are not the first field.
    legends = settings.locator("fieldset.settings-group > legend").all_inner_texts()
    assert legends == [
        "What is judged",
        "Who judges and checks",
        "The report",
        "Crowd workers (Prolific, MTurk)",
        "People and a judge together",
    ]
    first = settings.locator("[data-setting]").first.get_attribute("data-setting")
    assert first == "n_images"
    checks = settings.locator('fieldset[data-group="Who judges and checks"] [data-setting]')
    order = [checks.nth(i).get_attribute("data-setting") for i in range(checks.count())]
    assert order.index("stage2") < order.index("catch_rate"), order

    # Two columns at 1280 px: the group boxes stand side by side; one column at 390 px.
    at_1280 = boxes(page, "#mode-settings fieldset.settings-group")
    assert len({round(box["x"]) for box in at_1280}) == 2, at_1280
    assert at_1280[0]["y"] == pytest.approx(at_1280[1]["y"], abs=1)
    assert_no_serious_a11y_violations(page, context="new-study form at 1280 px")
    page.set_viewport_size({"width": 390, "height": 844})
    at_390 = boxes(page, "#mode-settings fieldset.settings-group")
    assert len({round(box["x"]) for box in at_390}) == 1, at_390
    assert_no_serious_a11y_violations(page, context="new-study form at 390 px")
    assert_fits_every_width(page, "the new-study form")

    # Switching the mode swaps in that mode's groups and labels (htmx).
    page.get_by_label("Mode").select_option("vicr")
    expect(page.get_by_label("Fewest ratings per caption")).to_be_visible()
    expect(page.get_by_label("Share of catch trials", exact=True)).to_be_visible()
    first = settings.locator("[data-setting]").first.get_attribute("data-setting")
    assert first == "min_ratings"

    # The labelled fields are the settings the study gets.
    page.get_by_label("Name", exact=True).fill("Plain words")
    page.get_by_label("Most ratings per caption").fill("6")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    study = Study.objects.get(name="Plain words")
    assert (study.mode, study.settings["max_ratings"], study.settings["min_ratings"]) == (
        "vicr",
        6,
        3,
    )


# Row 15 --------------------------------------------------------------------------------

CAPTIONS = [
    ("Human", "A woman selling doughnuts behind a counter in a small shop."),
    ("Up-Down", "A man standing in front of a display of donuts."),
    ("Unified-VLP", "A display case filled with lots of donuts."),
    ("VinVL-base", "A woman standing behind a counter at a donut shop."),
    ("VinVL-large", "A woman standing in front of a display of doughnuts."),
]


@pytest.fixture
def thumb_live(researcher):
    study = study_create(owner=researcher, name="Phone study", mode="thumb")
    image = Image.objects.create(
        study=study,
        name="shop",
        sha256="e" * 64,
        file="",
        display=write_display_image("phone-shop"),
        width=320,
        height=240,
        format="JPEG",
        alt_text="A woman behind a doughnut counter.",
    )
    for system, text in CAPTIONS:
        Caption.objects.create(
            study=study, image=image, system=system, raw_text=text, text=normalise(text)
        )
    study_open(study=study)
    return study


def test_row15_thumb_at_390_px_keeps_the_image_in_view_with_24_px_choices(
    page, login, thumb_live, make_user
):
    annotator = make_user("phoebe", native_english=True)
    thumb_live.annotators.add(annotator)
    login(page, annotator)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/s/{thumb_live.public_id}/next/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 1")
    image = page.locator("figure.stimulus img")
    expect(image).to_be_visible()

    # Every score and penalty choice is at least 24 x 24 px (WCAG 2.5.8).
    radios = boxes(page, ".cap input[type=radio]")
    assert len(radios) >= 5 * 4
    small = [box for box in radios if min(box["width"], box["height"]) < MIN_TARGET_PX - 0.5]
    assert not small, f"{len(small)} radio buttons under 24 px, e.g. {small[0]}"

    # Scored down to the last caption, the image is still on screen, at the top, and the
    # focused field is below it, not under it.
    viewport = page.viewport_size["height"]
    last = page.locator("section[data-group]").last
    last_radio = last.locator("input[type=radio]").first
    last_radio.focus()
    page.keyboard.press("ArrowRight")  # scores it, as a person would from the keyboard
    assert page.evaluate("window.scrollY") > 600, "the page did not scroll to the last caption"
    shown = image.bounding_box()
    assert shown["y"] >= -1, f"the image scrolled away (top at {shown['y']} px)"
    assert shown["y"] + shown["height"] <= viewport * 0.35, "the pinned image is too tall"
    focused = page.evaluate(
        "() => { const r = document.activeElement.getBoundingClientRect(); return r.y; }"
    )
    assert focused >= shown["y"] + shown["height"], "the focused choice is under the image"
    # Going back up with Shift+Tab, each field comes into view below the image, not under it.
    page.get_by_role("button", name="Save and continue").focus()
    for _ in range(40):
        page.keyboard.press("Shift+Tab")
        if not page.evaluate("() => !!document.activeElement.closest('#thumb-form')"):
            break  # above the form the image is in the page's flow, below what is focused
        top = page.evaluate("() => document.activeElement.getBoundingClientRect().top")
        name = page.evaluate("() => document.activeElement.outerHTML.slice(0, 100)")
        pinned = image.bounding_box()
        assert top >= pinned["y"] + pinned["height"] - 1, f"{name} is under the pinned image"
    assert_no_serious_a11y_violations(page, context="THumB item at 390 px, scrolled")

    # Wide: the image beside the captions, still in view at the bottom of the form.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("button", name="Save and continue").scroll_into_view_if_needed()
    shown = image.bounding_box()
    assert shown["y"] >= -1 and shown["y"] < 900
    radios = boxes(page, ".cap input[type=radio]")
    assert min(min(box["width"], box["height"]) for box in radios) >= MIN_TARGET_PX - 0.5
    assert_no_serious_a11y_violations(page, context="THumB item at 1280 px")
    assert_fits_every_width(page, "the THumB item page")


# Row 16 --------------------------------------------------------------------------------

SECTIONS = ["Overview", "Data", "Crowd", "Progress", "People", "Jobs"]


@pytest.mark.parametrize("live", [False, True], ids=["draft", "live"])
def test_row16_the_study_page_has_an_action_bar_and_a_table_of_contents(
    page, login, researcher, live
):
    study = vehicle_study(researcher, captions=3, live=live)
    login(page, researcher)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/studies/{study.pk}/")

    # The actions in one bar: at 1280 px most share the first line (the old page gave each
    # its own line), and the bar is at most two lines of buttons tall.
    actions = boxes(page, ".actions > li")
    assert len(actions) >= 5
    tops = [round(box["y"]) for box in actions]
    assert tops.count(tops[0]) >= 4 and len(set(tops)) <= 2, actions
    bar = page.locator("ul.actions").bounding_box()
    assert bar["height"] < 100, f"the action bar is {bar['height']} px tall"
    # It wraps at 390 px, into a few lines, never one per action nor off the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    actions = boxes(page, ".actions > li")
    lines = len({round(box["y"]) for box in actions})
    assert lines < len(actions), "one action per line at 390 px"
    assert all(box["x"] + box["width"] <= 390 for box in actions)
    page.set_viewport_size({"width": 1280, "height": 900})

    # The table of contents names every section, and each link reaches its heading.
    toc = page.get_by_role("navigation", name="On this page")
    expect(toc.get_by_role("link")).to_have_text(SECTIONS)
    for name in SECTIONS:
        link = toc.get_by_role("link", name=name, exact=True)
        target = link.get_attribute("href")
        heading = page.locator(target)
        expect(heading).to_have_text({"Crowd": "Crowd workers (Prolific, MTurk)"}.get(name, name))
        assert heading.evaluate("h => h.tagName") == "H2"
    toc.get_by_role("link", name="Jobs", exact=True).click()
    expect(page).to_have_url(re.compile(r"#jobs-heading$"))
    jobs = page.locator("#jobs-heading").bounding_box()
    assert 0 <= jobs["y"] < 900, "the Jobs link did not bring its heading into view"

    # The headings a researcher scans, in the page's order.
    headings = page.locator("main h2:not(.visually-hidden)").all_inner_texts()
    expected = ["Overview", "Data", "Crowd workers (Prolific, MTurk)", "Progress", "People"]
    assert headings[: len(expected)] == expected
    assert headings[-1] == "Jobs"
    # The export still starts a job from the Jobs section.
    expect(page.get_by_label("Export format")).to_be_visible()

    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        assert_no_serious_a11y_violations(page, context=f"study page at {width} px")
    assert_fits_every_width(page, "the study page")
