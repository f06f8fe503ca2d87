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
from dataclasses import dataclass

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.management.commands.load_demo import DEMO_FINISHED, Command
from annotation.models import Study
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


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
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        where = f"{report.mode} report at {width} px"
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{where} scrolls sideways"
        assert_no_serious_a11y_violations(page, context=where)
