"""The report's annotator-reliability section in Chromium: the researcher opens a HUMANr
report whose comparisons three workers share; the section lists the workers, flags the
planted spammer, fits 390 px and 1280 px without sideways scrolling and passes axe-core."""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Job
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.humanr import crowd, do_group, humanr_study

pytestmark = pytest.mark.e2e

WIDTHS = (390, 1280)


def careful(trial, on_left):
    """The correct caption in a check, no difference between two human captions, GIT
    better on even images and worse on odd ones."""
    if trial["kind"] == "attention_check":
        oriented = 2
    elif trial["system"] == "Human":
        oriented = 5
    else:
        oriented = 8 if trial["image_id"] % 2 == 0 else 2
    return oriented if on_left else 10 - oriented


def equal_everywhere(trial, on_left):
    return 5


def test_the_report_shows_each_worker_and_flags_the_spammer(page, login, researcher):
    study = humanr_study(researcher, images=18, systems=("GIT",), workers_per_comparison=3)
    workers = [crowd(study, f"E2E-{n}") for n in range(12)]
    spammer = workers[5]
    for worker in workers:
        do_group(worker, equal_everywhere if worker == spammer else careful)

    # The job runs here, eagerly (the compute button and its progress are other tests'
    # subject): the page under test is the stored report.
    job = enqueue(report_request(study=study, user=researcher))
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error

    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")

    section = page.locator("#reliability")
    expect(section.get_by_role("heading", name="Annotator reliability")).to_be_visible()
    table = section.get_by_role("table", name="Workers, flagged first, then by competence")
    expect(table.locator("tbody tr")).to_have_count(12)
    first = table.locator("tbody tr").first
    expect(first).to_have_attribute("data-participant", spammer.pseudonym)
    expect(first.get_by_role("cell").last).to_have_text("flagged")
    expect(table.locator("tbody tr", has_text="flagged")).to_have_count(1)
    reasons = section.get_by_role("list", name="Why each flagged worker is flagged")
    expect(reasons.get_by_role("listitem")).to_have_count(1)
    expect(reasons).to_contain_text(f"{spammer.pseudonym}: gives the same answer (equally good)")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        # The section itself never widens the page: the table scrolls inside its box.
        right = section.evaluate("e => e.getBoundingClientRect().right")
        assert right <= width, f"the section ends at {right} px on a {width} px screen"
        wide = section.evaluate(
            "e => Array.from(e.querySelectorAll('*')).filter(c => !c.closest('.table-scroll'))"
            ".filter(c => c.getBoundingClientRect().right > window.innerWidth).length"
        )
        assert wide == 0, f"{wide} elements of the section stick out at {width} px"
        section.scroll_into_view_if_needed()
        assert_no_serious_a11y_violations(page, context=f"reliability section at {width} px")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the report scrolls sideways by {overflow} px at 1280 px"
