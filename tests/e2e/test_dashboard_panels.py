"""A mode's own panel on the live dashboard, in Chromium (issue 44).

The shared dashboard renders whatever panel the mode gives (``mode.dashboard``): VICR's
adaptive stopping says what it saved, HUMANr's adaptive allocation what is settled, the
arena's adaptive pairing which report its design reads and when the next one comes. Each
study page with its panel passes axe and fits a phone and a laptop; with
``CAPEVAL_SCREENSHOTS`` set, its screenshots are taken (``tests/e2e/layout.py``).
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.reports import reports_refresh
from annotation.services.runner import job_run
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.arena import answer_battles, bradley_terry_study
from tests.factories.humanr import humanr_study
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_vicrs_panel_says_what_adaptive_stopping_saved(page, login, researcher):
    # Two ratings of 5 settle the pair at risk 0.2 (tests/annotation/test_adaptive_wiring.py
    # works the number by hand), so it stops one rating short of max_ratings.
    study = vicr_study(
        researcher, game=1, min_ratings=2, max_ratings=3, adaptive_stopping=True, adaptive_risk=0.2
    )
    for _ in range(2):
        play(in_game(study), 5)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")

    heading = page.get_by_role("heading", name="What adaptive stopping saved")
    expect(heading).to_be_visible()
    expect(page.locator("#adaptive-saving")).to_have_text(
        "1 pair stopped early as settled: 1 of the 3 ratings a fixed design collects"
        " will not be collected."
    )
    # VICR checks players and serves catch trials: both columns, with the mode's words.
    workers = page.locator("table.workers")
    expect(workers.get_by_role("columnheader", name="Check failures")).to_be_visible()
    expect(workers.get_by_role("columnheader", name="Catch-trial failures")).to_be_visible()
    assert_no_serious_a11y_violations(page, context="a VICR study page with its panel")
    assert_fits_every_width(page, "a VICR study page with its panel", shot="dashboard-vicr")


def test_humanrs_panel_says_what_allocation_settled(page, login, researcher):
    study = humanr_study(researcher, images=30, systems=("GIT",), adaptive_target_half_width=0.2)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")

    expect(page.get_by_role("heading", name="Adaptive allocation")).to_be_visible()
    expect(page.locator("#allocation-status")).to_contain_text(
        "No system is settled yet: every group is served."
    )
    assert_no_serious_a11y_violations(page, context="a HUMANr study page with its panel")
    assert_fits_every_width(page, "a HUMANr study page with its panel", shot="dashboard-humanr")


def test_the_arenas_panel_says_which_report_the_design_reads(page, login, researcher):
    study = bradley_terry_study(researcher, adaptive=True, adaptive_refresh=40)
    answer_battles(study, 40, "e2e-panel")
    for job in reports_refresh():
        job_run(job=job)
    answer_battles(study, 3, "e2e-panel-after")
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")

    expect(page.get_by_role("heading", name="Adaptive pairing")).to_be_visible()
    expect(page.locator("#design-report")).to_contain_text(
        "The design reads the report of 40 battles"
    )
    expect(page.locator("#design-report")).to_contain_text(
        "The next report is made automatically after 37 more battles (every 40)."
    )
    expect(page.locator("#design-pairs")).to_contain_text("Served most now:")
    assert_no_serious_a11y_violations(page, context="an adaptive arena study page")
    assert_fits_every_width(page, "an adaptive arena study page", shot="dashboard-arena")
