"""Issue 26, rows 11, 16 and 21 (parts), in Chromium.

Each page a researcher meets here passes axe, fits 390 px and 1280 px without sideways
scrolling, and requests nothing outside the live server (the ``page`` fixture fails on that).
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_close
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.core import crowd_participant, rating_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"


def answer(participant, rating=4):
    lease = assignment_next(participant=participant)
    judgment_submit(participant=participant, token=lease.token, data={"rating": rating})


def test_row11_a_closed_study_says_so_and_gives_no_estimate(page, login, researcher):
    study = rating_study(researcher, captions=4, target=2)
    answer(crowd_participant(study, "w1"))
    answer(crowd_participant(study, "w2"))
    study_close(study=study)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    expect(page.locator("#dashboard .eta")).to_have_text("closed")
    expect(page.locator("#dashboard")).to_contain_text("The study is closed, so it has no")
    expect(page.locator("#dashboard")).not_to_contain_text("remaining 6 answers take")
    assert_no_serious_a11y_violations(page, context="a closed study's page")
    assert_fits_every_width(page, "a closed study's page")
