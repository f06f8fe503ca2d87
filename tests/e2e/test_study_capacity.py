"""Studies that can finish (issue 26, row 6) in Chromium: the study page warns when the
remaining HUMANr groups need more distinct workers than the study has, says how many and
how to fix it, shows no estimated end, and so does the planner. axe finds nothing serious,
both pages fit 390 px and 1280 px without sideways scrolling, and no request leaves the
server (the ``page`` fixture fails the test on one).
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.assignments import assignment_next
from annotation.services.participants import participant_for_user
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.humanr import do_group, humanr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


def check_page(page, context: str) -> None:
    """No sideways scrolling and no serious axe finding, at both widths."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"
        assert_no_serious_a11y_violations(page, context=f"{context} at {width} px")


def test_row_6_the_study_page_says_the_study_cannot_finish(page, login, researcher, make_user):
    # Row 6: HUMANr with 2 registered annotators and 6 groups (18 images, a Human-vs-Human
    # and two model comparisons each); each annotator gets one group, then nothing.
    study = humanr_study(researcher, images=18, systems=("GIT", "ClipCap"))
    lab = [make_user("lab1"), make_user("lab2")]
    study.annotators.add(*lab)
    for user in lab:
        participant = participant_for_user(study=study, user=user)
        do_group(participant)
        assert assignment_next(participant=participant) is None, "row 6: one group each"

    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")

    box = page.locator("#workers-needed")
    expect(box.get_by_role("heading")).to_have_text(
        "This study cannot finish with the workers it has"
    )
    expect(page.locator("#workers-needed-count")).to_contain_text(
        "more distinct workers are needed."
    )
    expect(page.locator("#workers-needed-count")).to_contain_text("Nobody meets an image twice")
    fix = page.locator("#workers-needed-fix")
    expect(fix).to_contain_text("add at least")
    expect(fix).to_contain_text("share the crowd link")
    expect(fix.get_by_role("link", name="People page")).to_have_attribute(
        "href", f"/studies/{study.pk}/people/"
    )
    # Two groups were finished this hour: the old page showed an estimated end here.
    expect(page.locator("dd.eta")).to_have_text("none: cannot finish")
    expect(page.get_by_text("At the last hour's pace")).to_have_count(0)
    check_page(page, "study page of a study that cannot finish")

    # The smallest plan the form takes: the simulation is not what this test is about, and
    # the default one takes seconds on a loaded machine.
    page.goto(f"/studies/{study.pk}/plan/?sizes=20&simulations=5")
    expect(page.locator("#workers-needed-heading")).to_have_text(
        "This study cannot finish with the workers it has"
    )
    check_page(page, "planner of a study that cannot finish")

    # Two more annotators are enough for the bound: the warning gives way to the count.
    study.annotators.add(make_user("lab3"), make_user("lab4"))
    page.goto(f"/studies/{study.pk}/")
    expect(page.locator("#workers-needed-heading")).to_have_text("Workers the remaining items need")
    expect(page.locator("#workers-needed")).to_contain_text(
        "2 registered annotators have not started yet"
    )
    check_page(page, "study page of a study with enough annotators")
