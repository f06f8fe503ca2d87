"""The report pages of the newer modes in a browser (arena: issue 23; spans: issue 24).

Each study is the mode's finished demo study (answered by the simulated crowd through the
services, closed, its report computed, as ``load_demo`` makes it). The owner logs in through
the form and reads the report: the mode's own sections are on the page (arena: both
leaderboards and position bias; error spans: the counts, agreement and the adjudication
view with every annotator's highlighted spans), axe finds no serious or critical
violation, and the page fits 390 and 1280 px without horizontal scroll. The ``page``
fixture fails the test on any request outside the server, console error or JavaScript
error.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.management.commands.load_demo import DEMO_FINISHED, Command
from annotation.models import Job, Study
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
PENDING = (Job.Status.QUEUED, Job.Status.RUNNING)


@dataclass(frozen=True)
class Report:
    """What a mode's report must show: headings by id, the systems it names, and rows of
    its main table (a leaderboard row per system; highlighted spans in the adjudication
    view, which the demo's crowd gives)."""

    mode: str
    sections: tuple[str, ...]
    systems: tuple[str, ...]
    rows: str
    at_least: int


REPORTS = [
    Report(
        "arena",
        ("#leaderboard-heading", "#length-heading", "#position-heading"),
        ("Human", "GoodBot", "MidBot", "BadBot"),
        "#leaderboard-heading ~ * tbody tr",
        4,
    ),
    Report(
        "spans",
        ("#systems-heading", "#counts-heading", "#agreement-heading", "#adjudication-heading"),
        ("GoodBot", "BadBot"),
        "#adjudication-heading ~ * mark.spans-major, #adjudication-heading ~ * mark.spans-minor",
        3,
    ),
]


def reads_at_both_widths(page, what: str) -> None:
    """No sideways scroll and no serious axe violation at 1280 and 390 px."""
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        where = f"{what} at {width} px"
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{where} scrolls sideways"
        assert_no_serious_a11y_violations(page, context=where)


def finished_demo(mode: str, owner) -> Study:
    row = next(row for row in DEMO_FINISHED if row[0] == mode)
    _, name, workers, settings = row
    Command(stdout=io.StringIO())._finished(mode, name, owner, workers, settings)
    return Study.objects.get(name=name)


@pytest.mark.parametrize("report", REPORTS, ids=lambda report: report.mode)
def test_the_report_reads_at_both_widths_with_no_serious_violation(page, login, researcher, report):
    study = finished_demo(report.mode, researcher)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    # With a real task queue (CI's second pass) the demo's report job runs in the worker;
    # the page polls it and reloads itself when it ends (a reload here could race with that).
    expect(page.locator(report.sections[0])).to_be_visible(timeout=60_000)
    for heading in report.sections:
        expect(page.locator(heading)).to_be_visible()
    main = page.locator("#main")
    for system in report.systems:
        expect(main).to_contain_text(system)
    assert page.locator(report.rows).count() >= report.at_least, report.rows
    reads_at_both_widths(page, f"{report.mode} report")


def test_two_spans_studies_compared_read_at_both_widths(page, login, researcher):
    """Two finished spans demos of the same captions, one's report compared with the other
    (``compare_study``): the agreement table is on the page, readable at both widths."""
    from annotation.services.reports import report_request
    from annotation.services.runner import job_run
    from annotation.services.studies import study_update_settings

    row = next(row for row in DEMO_FINISHED if row[0] == "spans")
    _, name, workers, settings = row
    Command(stdout=io.StringIO())._finished(
        "spans", f"{name} (again)", researcher, workers, settings
    )
    other = Study.objects.get(name=f"{name} (again)")
    study = finished_demo("spans", researcher)
    study_update_settings(
        study=study, settings={**study.settings, "compare_study": other.pk}, changed_by=researcher
    )
    # With a real task queue the demos' own report jobs run in the worker; the page would
    # reload itself when one ends, so wait for them first (bounded: a hang guard).
    for _ in range(600):
        if not Job.objects.filter(study__in=[study, other], status__in=PENDING).exists():
            break
        time.sleep(0.1)
    job = report_request(study=study, user=researcher)
    job_run(job=job)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    expect(page.locator("#compare-table")).to_be_visible(timeout=60_000)
    expect(page.locator("#compare-heading")).to_contain_text(f"Agreement with study {other.pk}")
    assert page.locator("#compare-table tbody tr").count() == 2
    reads_at_both_widths(page, "compared spans report")


def test_an_adaptive_arena_report_with_both_fits_reads_at_both_widths(page, login, researcher):
    """An adaptive study's leaderboard is the plain fit, the weighted fit in a table beside
    it (issue 47)."""
    from tests.annotation.test_arena_goals import adaptive_study

    study, report = adaptive_study(researcher, phases=2)
    assert report["weighted_leaderboard"]
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    expect(page.locator("#weighted-heading")).to_be_visible(timeout=60_000)
    rows = page.locator("table[aria-labelledby='weighted-heading'] tbody tr")
    assert rows.count() == len(report["weighted_leaderboard"])
    reads_at_both_widths(page, "adaptive arena report")
