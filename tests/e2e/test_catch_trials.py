"""Catch trials in a real browser: they render like a normal VICR pair or THumB set (issue 13).

The player arrives through the signed crowd link and is put in the game (the tutorial is
tested in test_vicr.py). With ``catch_rate`` 0.5 a catch trial follows every game rating,
so the second pair is a catch trial. Both pages are compared element by element (tag, id,
class, role, ARIA label): only the caption's text and the image may differ.
"""

from __future__ import annotations

import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, Participant
from annotation.modes import catch
from annotation.modes.thumb.catch import new_catch_item as new_thumb_catch_item
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.test_vicr import PNG
from tests.factories.thumb import member, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: The page's elements as (tag, id, class, role, aria-label, name, type), in document order.
SHAPE = """() => Array.from(document.querySelectorAll('body *')).map(e => [
  e.tagName, e.id, e.className, e.getAttribute('role') || '', e.getAttribute('aria-label') || '',
  e.getAttribute('name') || '', e.getAttribute('type') || ''].join('|'))"""
NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def shape_at_widths(page, context):
    """The page's shape at 1280 px, after checking both widths for scrolling and axe."""
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{context} scrolls sideways at {width} px"
        assert_no_serious_a11y_violations(page, context=f"{context} at {width} px")
    return shape(page)


def shape(page):
    """SHAPE with numbers blanked: counts in labels ("3 of 20 done") differ by position."""
    return [re.sub(r"\d+", "N", element) for element in page.evaluate(SHAPE)]


def open_item(participant):
    return Assignment.objects.get(participant=participant, status=Assignment.Status.OPEN).item


def right_label(item) -> str:
    """The answer a careful player gives: an altered caption is wrong; a game pair and a
    control (an untouched human caption, issue 29) are mostly complete."""
    made = item.spec.get("catch")
    return "Wrong" if made and made["kind"] != "control" else "Mostly complete"


def test_a_catch_trial_renders_like_a_normal_game_pair(page, researcher):
    study = vicr_study(researcher, game=6, seconds_before_submit=0, catch_rate=0.5)
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=E2E-CATCH")
    participant = Participant.objects.get(study=study, external_id="E2E-CATCH")
    Participant.objects.filter(pk=participant.pk).update(
        status="game",
        state={"player": {"probation_attempts": 0, "score": 0, "game_ratings": 0}, "block": []},
    )
    page.get_by_role("link", name="I agree, start").click()
    # A game pair and its catch trial first, so that the pages compared below differ in
    # nothing that comes from being the first (e.g. "0 ratings" against "1 rating").
    # Game pairs are rated 4, their consensus (primes 3 and 4), catch trials 1 ("Wrong"): the
    # score stays positive, since a negative one is shown with extra markup for screen readers.
    for kind in ("game", "catch"):
        expect(page.locator("form.vicr-form")).to_be_visible()
        item = open_item(participant)
        assert item.kind == kind
        page.get_by_label(re.compile(right_label(item))).check()
        page.locator("#vicr-submit").click()
        page.get_by_role("link", name="Next pair").click()
    expect(page.locator("form.vicr-form")).to_be_visible()
    assert open_item(participant).kind == "game"
    normal = shape_at_widths(page, "game pair")
    page.get_by_label(re.compile("Mostly complete")).check()
    page.locator("#vicr-submit").click()
    expect(page.locator("#vicr-score")).to_be_visible()
    normal_feedback = shape(page)

    page.get_by_role("link", name="Next pair").click()
    expect(page.locator("form.vicr-form")).to_be_visible()
    item = open_item(participant)
    assert item.kind == "catch"
    expect(page.locator(".vicr-caption")).to_contain_text(item.spec["catch"]["text"])
    assert shape_at_widths(page, "catch trial") == normal
    content = page.content()
    for tell in ("catch", "control", "T_RC", "T_WP", "T_RW"):
        # A whole word: the guidelines button's aria-controls attribute is on every page.
        assert not re.search(rf"\b{tell}\b", content), tell
    page.get_by_label(re.compile(right_label(item))).check()
    page.locator("#vicr-submit").click()
    # The starting ratings: 1, 1 for an altered caption; 4, 4 for a control (issue 29).
    control = item.spec["catch"]["kind"] == "control"
    expect(page.locator("#vicr-consensus")).to_have_text("4" if control else "1")
    assert shape(page) == normal_feedback


def test_a_thumb_catch_trial_renders_like_a_stage1_caption_set(page, login, make_user, make_study):
    """Two annotators, one browser after the other: the first is served an ordinary
    stage-1 set, the second a catch trial reserved for them (made by the service rule at
    rate 0.5, p = 1); both pages have the same elements."""
    study = thumb_study(
        make_study,
        captions={},
        extra_images=6,
        settings={"stage2": False, "require_native_fluency": False, "catch_rate": 0.5},
    )
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    shapes = []
    for name in ("plain", "caught"):
        user = make_user(name)
        participant = member(study, user)
        participant.study = study
        if name == "caught":
            made = new_thumb_catch_item(participant, rate=0.5, gammas=(1.0,), draw=0)
            made.save()
        login(page, user)
        page.goto(f"/s/{study.public_id}/next/")
        expect(page.locator("#thumb-form")).to_be_visible()
        item = open_item(participant)
        assert item.kind == ("catch" if name == "caught" else "stage1")
        if name == "caught":
            expect(page.locator("#thumb-form")).to_contain_text(item.spec["catch"]["text"])
            for tell in ("catch", "T_RC", "T_WP", "T_RW"):
                assert tell not in page.content()
        shapes.append(shape_at_widths(page, f"THumB {item.kind} page"))
        page.context.clear_cookies()
    assert shapes[0] == shapes[1]


def test_a_flagged_annotator_is_told_why_there_is_no_more_work(page, login, make_user, make_study):
    """The catch rule flagged them (issue 26, row 21): the page says why, offers no "look
    for more work" link, and fits both widths with no serious axe violation."""
    study = thumb_study(
        make_study,
        captions={},
        extra_images=6,
        settings={"stage2": False, "require_native_fluency": False, "catch_rate": 0.5},
    )
    user = make_user("flagged")
    participant = member(study, user)
    # What catch.rule_outcome's flag leaves on the row (the service path is in
    # tests/annotation/test_catch_trials.py); work remains for anyone else.
    participant.flags = [{"kind": catch.FLAG_KIND, "detail": "missed 3 of 4", "at": "x"}]
    participant.save(update_fields=["flags"])
    login(page, user)
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.locator("#catch-failed")).to_contain_text("did not pass this study's attention")
    expect(page.locator("#thumb-form")).to_have_count(0)
    expect(page.locator("#finished-more")).to_have_count(0)
    shape_at_widths(page, "finished page of a flagged annotator")
    assert not Assignment.objects.filter(participant=participant).exists()
