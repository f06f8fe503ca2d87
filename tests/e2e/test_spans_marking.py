"""The error-span page as issue 46 found it (row 8): an overlapping mark is refused when it
is added, quoting the words.
"""

from __future__ import annotations

import base64
import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Judgment
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.spans import TEXTS, spans_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
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
