"""The Metrics page in Chromium: start computing, see the tables replace the form's answer;
choose whose labels Pascal-50S pairs are scored against; axe on each state, and no
horizontal scroll at 390 and 1280 px."""

import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.services.imports.metric_scores import metric_scores_import
from annotation.services.imports.releases import release_import
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.metrics import write_pascal_with_fleur, write_references_csv, write_release

pytestmark = pytest.mark.e2e

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
JAVA_FREE = ("BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)")


def fits(page, context: str) -> None:
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{context}: horizontal scroll at {width} px"


def test_researcher_computes_metrics_and_reads_the_tables(page, login, researcher, tmp_path):
    study = release_import(
        fmt="thumb-1.0",
        owner=researcher,
        path=write_release(tmp_path / "release.jsonl"),
        name="Lab study",
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Metrics", exact=True).click()
    expect(page.get_by_role("heading", name="Metrics: Lab study", level=1)).to_be_visible()
    expect(page.get_by_text("No metrics have been computed yet.")).to_be_visible()
    # CIDEr's convention is a visible choice with its default marked; CLIP-S without
    # encoders is offered disabled, with the reason beside it.
    cider = page.get_by_role("group", name="CIDEr's document frequencies")
    expect(cider.get_by_role("radio")).to_have_count(2)
    expect(
        cider.get_by_role("radio", name=re.compile(r"reference set.*\(default\)"))
    ).to_be_checked()
    expect(page.get_by_role("checkbox", name="CLIP-S (ONNX)", exact=True)).to_be_disabled()
    expect(page.locator("#clip-help")).to_contain_text("CAPEVAL_CLIP_DIR")
    assert_no_serious_a11y_violations(page, context="metrics page, nothing computed")
    fits(page, "metrics page, nothing computed")

    # Only the Java-free metrics, to keep the browser test short.
    for box in page.get_by_role("checkbox").all():
        label = box.evaluate("el => el.value")
        if (label in JAVA_FREE) != box.is_checked():
            box.click()
    page.get_by_role("button", name="Compute the metrics").click()
    # The job is done (eagerly here; the embedded demo's polling is
    # tests/e2e/test_jobs_embedded_browser.py) and the page reloads itself with the tables:
    # no "Show the new tables" button beside "No metrics have been computed yet" (issue 46).
    expect(page.get_by_role("heading", name="System level")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("No metrics have been computed yet.")).to_have_count(0)
    expect(page.get_by_role("link", name="Show the new tables")).to_have_count(0)
    table = page.get_by_role("region", name="System-level table")
    # A row per metric, a column per system (issue 26, row 12).
    expect(table.get_by_role("columnheader", name=re.compile(r"^Human \("))).to_be_visible()
    expect(table.get_by_role("rowheader", name="ROUGE-L (rouge-score) ×100")).to_be_visible()
    expect(page.get_by_role("heading", name="Total")).to_be_visible()
    expect(page.get_by_role("heading", name="Robustness (Cui et al.)")).to_be_visible()
    assert_no_serious_a11y_violations(page, context="metrics page with tables")
    assert_fits_every_width(page, "metrics page with tables", shot="issue46-16-metrics-done")


def test_researcher_chooses_whose_labels_the_pairs_are_scored_against(
    page, login, researcher, tmp_path
):
    """Pascal-50S pairs with FLEUR's file beside them (issue 47): the form offers the two
    label sources, pascal_50s.json's checked; with FLEUR's files chosen, the pairwise
    tables say whose labels they used."""
    pascal, fleur = write_pascal_with_fleur(tmp_path)
    study = release_import(fmt="pascal-50s", owner=researcher, path=pascal, name="Pairs").study
    metric_scores_import(study=study, paths=[fleur], name="FLEUR", fmt="fleur")
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/metrics/")
    labels = page.get_by_role("group", name="Human labels of the pairs")
    expect(labels.get_by_role("radio")).to_have_count(2)
    own = labels.get_by_role("radio", name="pascal_50s.json (Vedantam et al.) (default)")
    expect(own).to_be_checked()
    assert_no_serious_a11y_violations(page, context="metrics page, a choice of labels")
    fits(page, "metrics page, a choice of labels")

    for box in page.get_by_role("checkbox").all():  # report the imported column only
        if box.is_checked():
            box.click()
    labels.get_by_role("radio", name="FLEUR's files").check()
    page.get_by_role("button", name="Compute the metrics").click()
    expect(page.get_by_role("heading", name="Pairwise accuracy")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Imported pairs' human labels: FLEUR's files.")).to_be_visible()
    assert_no_serious_a11y_violations(page, context="metrics page, pairs scored")
    fits(page, "metrics page, pairs scored")
