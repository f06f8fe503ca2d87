"""Issue 26, row 12: the metrics page draws the robustness curves as figures (not text like
"1.00 · 0.82 · 0.75") and its system-level table fits at 390 and 1280 px (it was cut at
1280 px with a dozen metrics, and unreadable at 390 px). Axe on the page; the figures load
from the server (the page fixture fails on any off-server request)."""

import pytest
from playwright.sync_api import expect

from annotation.services.studies import study_create
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.metrics import finished_metrics_job

pytestmark = pytest.mark.e2e

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
# The system table's own box: nothing inside it hidden behind a horizontal scroll.
TABLE_FITS = (
    "() => { const box = document.querySelector('[aria-label=\"System-level table\"]');"
    " return box.scrollWidth <= box.clientWidth; }"
)
FIGURES_LOADED = (
    "() => { const imgs = [...document.querySelectorAll('.robustness-figures img')];"
    " return imgs.length === 3 && imgs.every(i => i.complete && i.naturalWidth > 0); }"
)


def test_robustness_figures_and_a_system_table_that_fits(page, login, researcher):
    study = study_create(owner=researcher, name="Twelve metrics", mode="thumb", settings={})
    result = finished_metrics_job(study, researcher).result
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/metrics/")
    expect(page.get_by_role("heading", name="Robustness (Cui et al.)")).to_be_visible()
    page.wait_for_function(FIGURES_LOADED, timeout=15_000)
    for kind in ("T_RC", "T_WP", "T_RW"):
        figure = page.get_by_role("img", name=f"{kind}: each metric's normalised score")
        expect(figure).to_be_visible()
    # The old page printed each curve as one text cell: no such text any more.
    expect(page.get_by_text("1.00 · ")).to_have_count(0)
    # The numbers stay available as a table behind a disclosure.
    page.get_by_text("The curves' points as a table").click()
    curves = page.get_by_role("region", name="Robustness curves")
    expect(curves.get_by_role("columnheader", name="T_WP γ=0.5")).to_be_visible()
    table = page.get_by_role("region", name="System-level table")
    for system in result["systems"]:
        expect(table.get_by_text(system["system"], exact=False).first).to_be_visible()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"horizontal scroll at {width} px"
        assert page.evaluate(TABLE_FITS), f"system table cut at {width} px"
        assert_no_serious_a11y_violations(page, context=f"metrics figures at {width} px")
    # At 390 px each metric's row stacks, its values labelled with their system.
    cell = table.locator("td[data-label='GoodBot']").first
    expect(cell).to_be_visible()
    assert "GoodBot" in cell.evaluate("td => getComputedStyle(td, '::before').content")
