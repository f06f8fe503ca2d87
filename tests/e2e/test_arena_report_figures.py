"""The arena report in a browser (issue 46, rows 6 and 7): the gold-battle section in the
arena's own words, the leaderboard plot beside the matrices, and the settings form's
gold-battle fields, at 390 and 1280 px with no serious axe violation.

The study is the arena's finished demo (served by the simulated crowd, gold battles on by
default, report computed), as ``load_demo`` makes it.
"""

from __future__ import annotations

import io

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.management.commands.load_demo import DEMO_FINISHED, Command
from annotation.models import Study
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def finished_arena(owner) -> Study:
    row = next(row for row in DEMO_FINISHED if row[0] == "arena")
    _, name, workers, settings = row
    Command(stdout=io.StringIO())._finished("arena", name, owner, workers, settings)
    return Study.objects.get(name=name)


def test_the_arena_report_shows_gold_battles_and_the_leaderboard_plot(page, login, researcher):
    study = finished_arena(researcher)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    expect(page.locator("#leaderboard-heading")).to_be_visible(timeout=60_000)

    gold = page.locator("section[aria-labelledby=gold-heading]")
    expect(gold).to_contain_text("A gold battle is caught when the real caption won")
    expect(page.locator("#main")).not_to_contain_text("catch trial")
    plot = page.locator("img[src$='/figures/leaderboard.svg']")
    expect(plot).to_be_visible()
    # Loaded, not a broken image.
    assert page.evaluate("(img) => img.naturalWidth > 0", plot.element_handle())
    assert_no_serious_a11y_violations(page, context="arena report")
    assert_fits_every_width(page, "arena report", shot="issue46-6-7-arena-report")


def test_the_arena_settings_say_gold_battles(page, login, researcher):
    study = finished_arena(researcher)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/settings/")
    expect(page.get_by_label("How much a gold battle alters its caption")).to_be_visible()
    expect(page.locator("#main")).not_to_contain_text("catch trial")
    assert_no_serious_a11y_violations(page, context="arena settings")
    assert_fits_every_width(page, "arena settings", shot="issue46-6-arena-settings")
