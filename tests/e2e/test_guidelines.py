"""Task guidelines in a real browser (issue 46, row 5): on an arena battle page the
"Guidelines" dialog opens with one key and closes with Escape, at both widths, with axe;
the intros show them and what earns the code (row 20); the spans categories are defined
one click away; the researcher edits them and sees them as workers will.

The worker arrives through the signed crowd link, as a Prolific worker does; images are
answered by a route (the files are not on disk in tests).
"""

from __future__ import annotations

import base64

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.arena import arena_study
from tests.factories.spans import spans_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)


def _arrive(page, study, worker: str) -> None:
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}")


def test_the_guidelines_are_one_key_away_on_a_battle(page, researcher):
    study = arena_study(researcher, images=3, catch_rate=0)
    _arrive(page, study, "E2E-GUIDE")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.arena-form")).to_be_visible()
    page.wait_for_load_state("load")

    page.keyboard.press("g")
    dialog = page.get_by_role("dialog", name="Guidelines")
    expect(dialog).to_be_visible()
    # The arena's default says what "better" means (CapArena's and ImageInWords' criteria).
    expect(dialog).to_contain_text("hallucinat")
    assert_no_serious_a11y_violations(page, context="battle, guidelines open")
    assert_fits_every_width(page, "battle, guidelines open", shot="issue46-row5-arena-guidelines")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_the_intro_shows_the_guidelines_and_what_earns_the_code(page, researcher):
    study = arena_study(researcher, images=16, catch_rate=0, completion_battles=12)
    _arrive(page, study, "E2E-GUIDE-INTRO")
    expect(page.locator("#completion-rule")).to_contain_text("completion code after 12 battles")
    section = page.locator("#guidelines")
    expect(section.get_by_role("heading", name="Guidelines")).to_be_visible()
    expect(section).to_contain_text('What "better" means')
    assert_no_serious_a11y_violations(page, context="arena intro with guidelines")
    assert_fits_every_width(page, "arena intro", shot="issue46-row5-arena-intro")


def test_the_spans_categories_are_defined_one_key_away(page, researcher):
    # 10 captions: the default count for the code (completion_captions) is reachable as is.
    study = spans_study(researcher, images=5)
    _arrive(page, study, "E2E-GUIDE-SPANS")
    expect(page.locator("#completion-rule")).to_contain_text("completion code after 10 captions")
    assert_fits_every_width(page, "spans intro", shot="issue46-row20-spans-intro")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("link", name="I agree, start").click()
    page.wait_for_load_state("load")
    opener = page.get_by_role("button", name="Guidelines")
    expect(opener).to_be_visible()
    opener.click()
    dialog = page.get_by_role("dialog", name="Guidelines")
    expect(dialog).to_contain_text("hallucinated existence")
    expect(dialog).to_contain_text("Major")
    assert_no_serious_a11y_violations(page, context="spans item, guidelines open")
    assert_fits_every_width(page, "spans guidelines", shot="issue46-row5-spans-guidelines")
    page.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()


def test_the_researcher_edits_the_guidelines_and_sees_them_rendered(page, login, researcher):
    study = arena_study(researcher, images=2, live=False)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Guidelines").click()
    field = page.get_by_label("Guidelines (Markdown)")
    expect(field).to_contain_text("hallucinat")  # starts from the mode's default
    field.fill("## Ours\n\nPrefer **accurate** captions.\n\n<script>alert(1)</script>")
    page.get_by_role("button", name="Save the guidelines").click()
    preview = page.locator("#guidelines-preview")
    expect(preview.locator("strong")).to_have_text("accurate")
    expect(preview).to_contain_text("<script>alert(1)</script>")  # shown as text
    assert_no_serious_a11y_violations(page, context="guidelines editor")
    assert_fits_every_width(page, "guidelines editor", shot="issue46-row5-guidelines-editor")
