"""Issue 26, row 4 in a real browser: a researcher exports the captions with their metric
scores from the study page and gets a column per metric, with the stored values."""

from __future__ import annotations

import csv
import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from django.core.management import call_command

from annotation.models import Caption
from annotation.services.imports.releases import release_import
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.metrics import write_references_csv, write_release

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BLEU = "BLEU-4 (sacrebleu)"
NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def test_the_study_page_exports_each_metric_as_a_column(page, researcher, login, tmp_path):
    study = release_import(
        fmt="thumb-1.0",
        owner=researcher,
        path=write_release(tmp_path / "release.jsonl"),
        name="Lab",
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    # The job runs when the command's transaction commits (eager Celery in the tests).
    call_command("compute_metrics", study.pk, "--metrics", BLEU, "--resamples", "20", "--no-wait")
    scores = {c.pk: c.metrics[BLEU] for c in Caption.objects.filter(study=study)}
    assert len(scores) == 12

    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"the study page scrolls sideways at {width}"
    assert_no_serious_a11y_violations(page, context="study page with the metric table offered")
    page.get_by_label("Export format").select_option("csv")
    page.get_by_label("Table", exact=True).select_option("caption_metrics")
    page.get_by_role("button", name="Export judgments").click()
    link = page.locator("#jobs .job").get_by_role("link", name=re.compile("^Download"))
    expect(link).to_be_visible(timeout=60_000)
    with page.expect_download() as download_info:
        link.click()
    with open(download_info.value.path(), newline="", encoding="utf-8") as exported:
        rows = list(csv.DictReader(exported))
    assert len(rows) == 12
    assert {int(row["caption_id"]): float(row["metric_bleu_4_sacrebleu"]) for row in rows} == (
        pytest.approx(scores)
    )
