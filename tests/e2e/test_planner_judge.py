"""Issue 40: the planner's "with the judge" section in Chromium. A VICR study with a judge
on every caption and people on most: the table per system and pooled, the sentence of
what the judge saves with its bound; without a target the correlation only; a study with
no judge says why. Axe on each state, no horizontal scroll at 390 and 1280 px (the page
fixture fails on any request leaving the server)."""

import pytest
from playwright.sync_api import expect

from annotation.services.planning import study_judge_plan
from tests.annotation.test_planning_judge import judged_arena_study, judged_vicr_study
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.test_planner import figure_loaded, fits

pytestmark = pytest.mark.e2e


def test_the_planner_says_what_the_judge_saves(page, login, researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path)
    expected = study_judge_plan(study, target_half_width=0.25)["pooled"]
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/plan/?simulations=5&sizes=20,40&target_half_width=0.25")
    section = page.get_by_role("region", name="Human units needed per system")
    expect(page.get_by_role("heading", name="Human judgments with the judge")).to_be_visible()
    for system in ("alpha", "beta", "All systems"):
        expect(section.get_by_role("rowheader", name=system, exact=True)).to_be_visible()
    summary = page.locator("#plan-judge-summary")
    expect(summary).to_contain_text(f"people alone need {expected['people_only']['units']} units")
    expect(summary).to_contain_text(f"{expected['with_judge']['units']}")
    expect(summary).to_contain_text("1 − ρ²")
    figure_loaded(page)
    assert_no_serious_a11y_violations(page, context="planner with the judge")
    fits(page, "planner with the judge")

    page.get_by_label("Target half-width").fill("")
    page.get_by_role("button", name="Plan").click()
    expect(page.locator("#plan-judge-no-target")).to_be_visible()
    expect(section.get_by_role("rowheader", name="alpha", exact=True)).to_be_visible()
    figure_loaded(page)
    assert_no_serious_a11y_violations(page, context="planner with the judge, no target")
    fits(page, "planner with the judge, no target")


def test_the_planner_says_why_without_a_judge(page, login, researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path, judge=False)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/plan/?simulations=5&sizes=20&target_half_width=0.25")
    expect(page.locator("#plan-judge-error")).to_contain_text("No plan with the judge")
    figure_loaded(page)
    assert_no_serious_a11y_violations(page, context="planner, no judge")
    fits(page, "planner, no judge")


def test_an_arena_study_plans_its_battles_with_the_judge(page, login, researcher, tmp_path):
    """The arena has no model for the curve (refused, as before): the section stands alone."""
    study, _ = judged_arena_study(researcher, tmp_path)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/plan/?simulations=5&sizes=20&target_half_width=0.12")
    expect(page.get_by_text("has no model of the", exact=False)).to_be_visible()
    expect(page.locator("#plan-judge-note")).to_contain_text("share of the battles")
    table = page.get_by_role("region", name="Human units needed per system")
    for system in ("alpha", "beta", "gamma"):
        expect(table.get_by_role("rowheader", name=system, exact=True)).to_be_visible()
    assert_no_serious_a11y_violations(page, context="planner of an arena study, judge")
    fits(page, "planner of an arena study, judge")
