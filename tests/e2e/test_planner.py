"""The planner page in Chromium: from the study page's link, the default plan, a refused
value with its message, a smaller plan; axe on each state, no horizontal scroll at 390 and
1280 px, the curve's figure loads (no request leaves the server: the page fixture fails
on any)."""

import pytest
from playwright.sync_api import expect

from annotation.services.studies import study_create
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = pytest.mark.e2e

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def fits(page, context: str) -> None:
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{context}: horizontal scroll at {width} px"


def figure_loaded(page) -> None:
    """The figure is drawn by its own request (the plan again, as SVG): wait until it shows
    (and so until the server has answered, before the test's database goes away)."""
    page.wait_for_function(
        "() => { const img = document.querySelector('.plan-figure img');"
        " return img.complete && img.naturalWidth > 0; }",
        timeout=15_000,
    )


def test_researcher_plans_a_study(page, login, researcher):
    study = study_create(owner=researcher, name="Planned study", mode="humanr", settings={})
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Plan the study's size").click()
    expect(page.get_by_role("heading", name="Plan: Planned study", level=1)).to_be_visible()
    expect(page.get_by_role("heading", name="Predicted HUMANr per system")).to_be_visible()
    table = page.get_by_role("region", name="Planner curve")
    expect(table.get_by_role("rowheader", name="200")).to_be_visible()
    figure = page.get_by_role("img", name="Predicted half-width", exact=False)
    expect(figure).to_be_visible()
    figure_loaded(page)
    assert_no_serious_a11y_violations(page, context="planner, default plan")
    fits(page, "planner, default plan")

    sizes = page.get_by_label("Numbers of images")
    sizes.fill("20, x")
    page.get_by_role("button", name="Plan").click()
    expect(page.get_by_text("'x' is not a whole number from 2 to 5000.")).to_be_visible()
    expect(sizes).to_have_attribute("aria-invalid", "true")
    assert page.locator(".plan-figure img").count() == 0  # no plan, so no figure request
    assert_no_serious_a11y_violations(page, context="planner, refused value")
    fits(page, "planner, refused value")

    page.get_by_label("Numbers of images").fill("30, 90")
    page.get_by_label("Simulations per size").fill("5")
    page.get_by_label("Price per judgment").fill("0.2")
    page.get_by_role("button", name="Plan").click()
    expect(table.get_by_role("rowheader", name="90")).to_be_visible()
    expect(page.locator("#plan-recommended")).to_be_visible()
    figure_loaded(page)
    fits(page, "planner, small plan")
