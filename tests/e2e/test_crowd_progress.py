"""Crowd workers always know where they stand (issue 26, rows 7, 9, 19 and 20; issue 28's
screen-outs), in Chromium.

Each page is checked with axe-core and at 390 px and 1280 px for sideways scrolling; the
``page`` fixture fails a test on any request outside the live server. Answers that only set
the stage (a tutorial, the first images) go through the services, as a worker would through
the pages; what the worker then sees is read in the browser.
"""

from __future__ import annotations

import base64
import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.management.commands.load_demo import DESCRIPTION
from annotation.models import CrowdRefusal, Item, Participant
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.humanr import humanr_study
from tests.factories.machine import load_factor
from tests.factories.thumb import all_scores, judge, thumb_study
from tests.factories.vicr import exact, play, play_block, vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIZES = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)


def check_page(page, context: str) -> None:
    """No sideways scrolling and no serious axe finding, at both sizes; ends at 1280 px."""
    for size in reversed(SIZES):
        page.set_viewport_size(size)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {size['width']} px"
        assert_no_serious_a11y_violations(page, context=f"{context} at {size['width']} px")
    page.set_viewport_size(SIZES[0])


def assert_on_first_screen(page, selector: str, context: str) -> None:
    """``selector`` is within the first screen at both widths, without scrolling."""
    for size in SIZES:
        page.set_viewport_size(size)
        page.evaluate("window.scrollTo(0, 0)")
        box = page.locator(selector).bounding_box()
        assert box is not None, f"{context}: {selector} is not shown"
        bottom = box["y"] + box["height"]
        assert bottom <= size["height"], (
            f"{context}: {selector} ends {bottom:.0f} px down at {size['width']} px, below "
            f"the first screen ({size['height']} px)"
        )
    page.set_viewport_size(SIZES[0])


def enter(page, study, worker: str) -> Participant:
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}&STUDY_ID=S&SESSION_ID=X")
    return Participant.objects.get(study=study, external_id=worker)


def above(page, first: str, second: str) -> bool:
    return page.locator(first).bounding_box()["y"] < page.locator(second).bounding_box()["y"]


# ------------------------------------------------------------------- row 7: THumB


def test_thumb_shows_progress_and_then_the_code_at_the_top(page, make_study):
    study = thumb_study(make_study, settings={"completion_images": 2}, extra_images=3)
    worker = enter(page, study, "E2E-THUMB")
    page.get_by_role("link", name="I agree, start").click()

    progress = page.locator("#crowd-progress-text")
    expect(progress).to_have_text("Toward the completion code: 0 of 2 images.")
    bar = page.locator("#crowd-progress progress")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("0", "2")
    assert_on_first_screen(page, "#crowd-progress", "THumB's first item")
    check_page(page, "THumB item with progress")

    judge(worker, all_scores)  # the lease this page shows, answered
    page.reload()
    expect(progress).to_have_text("Toward the completion code: 1 of 2 images.")
    assert page.locator("#crowd-progress progress").get_attribute("value") == "1"

    judge(worker, all_scores)
    page.reload()
    code = page.locator("#completion-code")
    expect(code).to_have_text(study.completion_code)
    expect(page.locator("#crowd-progress")).to_have_count(0)
    assert above(page, "#completion", "h1"), "the code comes before the item"
    assert_on_first_screen(page, "#completion-code", "THumB's page after the code")
    check_page(page, "THumB item after the code")


# ------------------------------------------------------------------- row 7: VICR


def test_vicr_shows_the_code_above_the_feedback_and_leaderboard(page, researcher):
    study = vicr_study(
        researcher, game=4, primes=(4, 4), seconds_before_submit=1, completion_game_ratings=2
    )
    worker = enter(page, study, "E2E-VICR")
    play_block(worker, 10, exact)  # the tutorial, passed
    play(worker, 4)  # one game rating of the two

    page.goto(f"/s/{study.public_id}/next/")
    expect(page.locator("#crowd-progress-text")).to_have_text(
        "Toward the completion code: 1 of 2 game ratings."
    )
    check_page(page, "VICR game pair with progress")
    page.keyboard.press("4")
    expect(page.locator("#vicr-submit")).to_be_enabled(timeout=6000 * load_factor())
    with page.expect_navigation():
        page.keyboard.press("Enter")

    expect(page.locator("#completion-code")).to_have_text(study.completion_code)
    expect(page.get_by_role("heading", name="Leaderboard")).to_be_visible()
    assert above(page, "#completion", ".vicr-leaderboard"), "code above the leaderboard"
    assert above(page, "#completion", "h1")
    assert_on_first_screen(page, "#completion-code", "VICR feedback with the code")
    check_page(page, "VICR feedback with the code")


# ------------------------------------------------------------------- row 9: VICR intro


def test_vicr_intro_states_the_first_game_check_and_its_failure(page, researcher):
    study = vicr_study(
        researcher,
        first_game_ratings=7,
        first_game_pass=9,
        max_probation_attempts=2,
        completion_game_ratings=12,
    )
    enter(page, study, "E2E-INTRO")

    section = page.locator("#vicr-first-game-check")
    expect(section.get_by_role("heading", name="The first-game check")).to_be_visible()
    expect(section).to_contain_text("Your first 7 game ratings must score at least 9 points")
    expect(section).to_contain_text("you go back to probation")
    expect(section).to_contain_text("you do not receive the completion code")
    # Every mode's intro says what earns the code in one line (issue 46, row 20).
    expect(page.locator("#completion-rule")).to_contain_text("code after 12 game ratings")
    expect(page.get_by_text("You have 2 attempts")).to_be_visible()
    check_page(page, "VICR intro")

    # A study that pays screen-outs says so instead.
    study.settings = {**study.settings, "screen_out_code": "SCRN"}
    study.save(update_fields=["settings"])
    page.reload()
    expect(section).to_contain_text("you receive this study's screen-out code")


# ------------------------------------------------------------------- row 19: words


def test_annotators_and_researchers_see_plain_words(page, make_study, researcher, login):
    study = thumb_study(make_study, extra_images=1)
    study.description = DESCRIPTION
    study.save(update_fields=["description"])
    enter(page, study, "E2E-WORDS")
    intro = page.locator("main").inner_text()
    assert "annotation/demo" not in intro and "LICENCES.md" not in intro
    check_page(page, "THumB intro with the demo's description")

    page.get_by_role("link", name="I agree, start").click()
    line = page.locator("#thumb-progress").inner_text()
    assert not re.search(r"\b(stage \d|fluency|check): \d", line), line
    assert re.search(r"still needs \d+ answers? from all annotators", line), line

    CrowdRefusal.objects.create(study=study, source="prolific", reason="address_rate")
    page.context.clear_cookies()
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    text = page.locator("main").inner_text()
    assert "address_rate" not in text
    assert "1 for too many new workers from one network within an hour" in text
    check_page(page, "study page with a refused arrival")


# ------------------------------------------------------------------- row 20: HUMANr


def test_humanr_intro_states_the_real_group_sizes(page, researcher):
    study = humanr_study(researcher, images=8, humans=3, systems=("GIT",))
    specs = Item.objects.filter(study=study).values_list("spec", flat=True)
    sizes = sorted({len(spec["trials"]) for spec in specs}, reverse=True)
    expected = " or ".join(str(size) for size in sizes)  # two sizes at most here
    assert sizes != [10], "the study must have short groups for this test to mean anything"

    enter(page, study, "E2E-HR")

    expect(page.locator("#hr-group-size")).to_contain_text(f"groups of {expected} trials")
    assert "groups of 10" not in page.locator("main").inner_text()
    check_page(page, "HUMANr intro")


# ------------------------------------------------------------------- screen-outs


def test_a_screened_out_worker_sees_the_screen_out_code_first(page, researcher):
    url = "https://app.prolific.com/submissions/complete?cc=SCRN42"
    study = humanr_study(researcher, prolific_screen_out_url=url, completion_code="FULL77")
    enter(page, study, "E2E-SCREEN")
    page.get_by_role("link", name="I agree, start").click()
    # The click returns once the trial page is committed, before its deferred humanr.js
    # has run; a key pressed then is lost (CI under load). Wait for the page's load.
    page.wait_for_load_state("load")
    expect(page.locator("#crowd-progress-text")).to_have_text(
        "Toward the completion code: 0 of 1 groups."
    )

    while page.locator("#hr-submit").count():
        page.keyboard.press("5")  # "both equally": fails the attention check
        expect(page.locator("#raw-5")).to_be_checked()
        with page.expect_navigation():
            page.keyboard.press("Enter")

    expect(page.locator("#completion-code")).to_have_text("SCRN42")
    expect(page.locator("#completion-prolific")).to_have_attribute("href", url)
    expect(page.locator("#screen-out-message")).to_contain_text("did not pass")
    assert "FULL77" not in page.content()
    assert above(page, "#completion", "h1")
    assert_on_first_screen(page, "#completion-prolific", "the screen-out page")
    check_page(page, "HUMANr page after a screen-out")
