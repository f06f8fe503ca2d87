"""Issue 26, row 13: the planner in Chromium speaks of the study itself: its own mode's
fields only, filled with their defaults; its own systems instead of "A" and "B"; money in a
named currency; THumB's 2 judgments per caption. Axe, 390 and 1280 px, the figure loads
(the page fixture fails on any request leaving the server)."""

import pytest
from playwright.sync_api import expect

from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.test_planner import figure_loaded, fits
from tests.factories.humanr import answer_every_group, humanr_study
from tests.factories.thumb import add_image

pytestmark = pytest.mark.e2e


def test_planner_of_a_thumb_study_with_its_own_systems(page, login, researcher, make_study):
    study = make_study("thumb", name="Bots")
    for n in range(3):
        add_image(study, f"im{n}", [("Human", "a cat"), ("GoodBot", "cat"), ("BadBot", "dog")])
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/plan/?simulations=5&sizes=20,40")
    expect(page.get_by_role("heading", name="Plan: Bots", level=1)).to_be_visible()
    # THumB's own assumptions, filled; no HUMANr or VICR field.
    expect(page.get_by_label("Mean score (Total, 1 to 5) of the better system")).to_have_value(
        "4.0"
    )
    expect(page.get_by_label("Smallest difference between two systems")).to_have_value("0.3")
    expect(page.get_by_label("Judgments per item")).to_have_value("2")
    expect(page.get_by_label("Price per judgment (GBP)")).to_have_value("0.1")
    for name in ("spread", "exact", "adjacent"):
        expect(page.locator(f"#id_{name}")).to_have_count(0)
    table = page.get_by_role("region", name="Planner curve")
    for system in ("Human", "GoodBot", "BadBot"):
        expect(table.get_by_role("columnheader", name=f"± {system}")).to_be_visible()
    expect(table.get_by_role("columnheader", name="± A", exact=True)).to_have_count(0)
    expect(table.get_by_role("columnheader", name="Money (GBP)")).to_be_visible()
    # 20 images x 3 systems x 2 judgments = 120 judgments, 12.00 GBP at 0.10.
    row = table.get_by_role("row", name="20", exact=False).first
    expect(row).to_contain_text("120")
    expect(row).to_contain_text("12.00")
    figure_loaded(page)
    assert_no_serious_a11y_violations(page, context="planner about the study")
    fits(page, "planner about the study")


def test_planner_of_an_answered_humanr_study_uses_it_as_the_pilot(page, login, researcher):
    study = humanr_study(researcher, images=20, systems=("GIT", "ClipCap"))
    answer_every_group(study, {"Human": 0.0, "GIT": -0.3, "ClipCap": -0.6}, seed=3)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/plan/?simulations=5&sizes=20,40")
    expect(
        page.get_by_text("Pilot: this study's own kept comparisons, resampled by image")
    ).to_be_visible()
    table = page.get_by_role("region", name="Planner curve")
    for system in ("Human", "GIT", "ClipCap"):
        expect(table.get_by_role("columnheader", name=f"± {system}")).to_be_visible()
    figure_loaded(page)
    assert_no_serious_a11y_violations(page, context="planner with the study as its pilot")
    fits(page, "planner with the study as its pilot")
