"""The VICR game in a real browser: tutorial, game, the 3-second wait, first-rating rule.

Players arrive through the signed crowd link, as Prolific workers do. Images are answered by
a route that returns a small PNG (the files are not on disk in tests).
"""

from __future__ import annotations

import base64
import re
import time

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, Caption, Participant, Study
from annotation.services.participants import crowd_link_token
from tests.annotation.test_vicr_systems import systems_study
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.machine import load_factor
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)


def enter(page, study, worker):
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}")
    page.get_by_role("link", name="I agree, start").click()
    return Participant.objects.get(study=study, external_id=worker)


def open_truth(participant) -> int:
    lease = Assignment.objects.get(participant=participant, status=Assignment.Status.OPEN)
    return Caption.objects.get(pk=lease.item.spec["caption_id"]).spec["truth"]


def rate_with_keys(page, rating):
    """Choose with the digit key, wait for the countdown, submit with Enter."""
    # The feedback page shows the same progress text as the next pair: wait for the pair's
    # form and for its deferred script, or the key press may reach the page being left.
    expect(page.locator("form.vicr-form")).to_be_visible()
    page.wait_for_load_state("domcontentloaded")
    page.keyboard.press(str(rating))
    expect(page.locator(f"#rating-{rating}")).to_be_checked()
    expect(page.locator("#vicr-submit")).to_be_enabled(timeout=6000 * load_factor())
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("#vicr-next")).to_be_focused()


def set_settings(study, **changes):
    study.refresh_from_db()
    Study.objects.filter(pk=study.pk).update(settings={**study.settings, **changes})


def test_a_new_player_passes_the_tutorial_and_plays_the_game(page, researcher):
    study = vicr_study(researcher, game=4, primes=(4, 4), seconds_before_submit=1)
    participant = enter(page, study, "E2E-PASS")

    expect(page.locator("#vicr-progress")).to_contain_text("Tutorial pair 1 of 10")
    expect(page.locator("#vicr-submit")).to_be_disabled()
    assert_no_serious_a11y_violations(page, context="tutorial pair")
    # the rating guide: a modal dialog that Escape closes, focus back on its button
    page.get_by_role("button", name="Rating guide").click()
    guide = page.get_by_role("dialog", name="Rating guide")
    expect(guide).to_be_visible()
    expect(guide).to_contain_text("Interpretation of overall setting")
    page.keyboard.press("Escape")
    expect(guide).to_be_hidden()
    expect(page.get_by_role("button", name="Rating guide")).to_be_focused()

    for number in range(1, 11):
        expect(page.locator("#vicr-progress")).to_contain_text(f"Tutorial pair {number} of 10")
        truth = open_truth(participant)
        rate_with_keys(page, truth)
        expect(page.locator("#vicr-truth")).to_have_text(str(truth))
        if number == 1:
            expect(page.locator(".vicr-feedback")).to_contain_text("Why:")
            assert_no_serious_a11y_violations(page, context="tutorial feedback")
        if number < 10:
            with page.expect_navigation():
                page.keyboard.press("Enter")  # the Next link has the focus
    expect(page.locator("#vicr-transition")).to_contain_text(
        "You passed the tutorial with 20 of 20 points"
    )

    set_settings(study, seconds_before_submit=3)
    page.get_by_role("link", name="Next pair").click()
    shown = time.monotonic()
    expect(page.locator("#vicr-progress")).to_contain_text("Game: 0 ratings, score 0")
    submit = page.locator("#vicr-submit")
    expect(submit).to_be_disabled()
    page.get_by_label(re.compile("Mostly complete")).check()
    expect(submit).to_be_disabled()
    expect(page.locator("#vicr-countdown")).to_contain_text("you can submit in")
    # The lower bound is the rule (never before the countdown); the upper one is wall-clock
    # in a browser, so it is scaled by the machine's load (issue 46).
    expect(submit).to_be_enabled(timeout=6000 * load_factor())
    waited = time.monotonic() - shown
    assert 2.0 < waited < 4.5 * load_factor(), f"the button was enabled after {waited:.1f} s"
    assert_no_serious_a11y_violations(page, context="game pair")
    submit.click()
    expect(page.locator("#vicr-consensus")).to_have_text("4")
    expect(page.locator("#vicr-score")).to_have_text("2")
    expect(page.get_by_role("heading", name="Leaderboard")).to_be_visible()
    assert_no_serious_a11y_violations(page, context="game feedback")

    page.get_by_role("link", name="Next pair").click()
    expect(page.locator("#vicr-progress")).to_contain_text("Game: 1 rating, score 2")
    participant.refresh_from_db()
    assert participant.status == "game"


def test_failing_the_first_game_ratings_sends_the_player_to_probation(page, researcher):
    study = vicr_study(
        researcher,
        game=4,
        primes=(5, 5),
        seconds_before_submit=1,
        first_game_ratings=2,
        first_game_pass=4,
    )
    participant = enter(page, study, "E2E-FAIL")
    participant.state = {"tutorial_score": 12}
    participant.status = "game"
    participant.save()
    Assignment.objects.filter(participant=participant).delete()  # the tutorial lease
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)

    page.goto(f"/s/{study.public_id}/next/")
    for number in range(2):
        expect(page.locator("#vicr-progress")).to_contain_text(f"Game: {number} rating")
        rate_with_keys(page, 1)
        if number == 0:
            expect(page.locator("#vicr-consensus")).to_have_text("5")
            page.get_by_role("link", name="Next pair").click()
    expect(page.locator("#vicr-transition")).to_contain_text(
        "Your first 2 game ratings scored -4 of the 4 needed: your score is reset and you go "
        "back to probation."
    )
    page.get_by_role("link", name="Next pair").click()
    expect(page.locator("#vicr-progress")).to_contain_text("Probation pair 1 of 20, attempt 1")
    participant.refresh_from_db()
    assert participant.status == "probation" and participant.state["player"]["score"] == 0


NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def test_the_report_names_each_system_with_its_rating(page, researcher, login):
    """Issue 26, row 2: the report had no per-system result, only agreement and players."""
    study = systems_study(researcher)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    page.get_by_role("button", name="Compute the report").click()
    # The page reloads itself when the job ends (reloading here too could race with it).
    expect(page.locator("#vicr-systems")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("heading", name="Rating by system")).to_be_visible()
    table = page.locator("#vicr-systems")
    for system in ("GoodBot", "MidBot", "BadBot"):
        expect(table.get_by_role("rowheader", name=system)).to_be_visible()
    expect(table.locator("tbody tr").first).to_contain_text("GoodBot")
    expect(page.locator("#vicr-system-differences")).to_contain_text("GoodBot − BadBot")
    expect(page.locator('img[src*="/figures/systems."]')).to_have_count(1)
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"the report scrolls sideways at {width} px"
        assert_no_serious_a11y_violations(page, context=f"VICR report at {width} px")
