"""The MTurk preview in a real browser (issue 46, row 14): a worker browsing the HIT reads
the intro for workers, opens one example task, answers it and is told nothing was
recorded; both pages fit 390 and 1280 px and pass axe. Images are answered by a route
(the files are not on disk in tests)."""

from __future__ import annotations

import base64

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, Judgment, Participant
from annotation.services.participants import MTURK_PREVIEW, crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.arena import arena_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)


def test_a_worker_previewing_the_hit_reads_the_intro_and_tries_an_example(page, researcher):
    # Detailed captions (300 words), the study the platform is for; no minimum time, so
    # the example's buttons answer at once.
    study = arena_study(researcher, images=3, words=lambda system, index: 300, min_seconds=0)
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(
        f"/p/{crowd_link_token(study)}/?assignmentId={MTURK_PREVIEW}&hitId=HIT-E2E"
        "&turkSubmitTo=https://workersandbox.mturk.com"
    )

    expect(page.get_by_role("heading", name=study.name, level=1)).to_be_visible()
    expect(page.locator("#worker-preview")).to_contain_text("accept it to begin")
    expect(page.locator("#preview-banner")).to_have_count(0)
    expect(page.get_by_role("link", name="I agree, start")).to_have_count(0)
    assert_no_serious_a11y_violations(page, context="MTurk preview intro")
    assert_fits_every_width(page, "MTurk preview intro", shot="issue46-row14-mturk-preview")

    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("link", name="See an example task").click()
    expect(page.locator("form.arena-form")).to_be_visible()
    expect(page.locator("#worker-preview")).to_contain_text("Nothing you do here is recorded")
    assert_no_serious_a11y_violations(page, context="MTurk preview example task")
    assert_fits_every_width(
        page, "MTurk preview example task", shot="issue46-row14-mturk-preview-example"
    )

    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_load_state("load")
    page.get_by_role("radio", name="A is better").check()
    page.locator("#arena-submit").click()
    expect(page.locator("#worker-preview")).to_contain_text("Not recorded")
    assert_no_serious_a11y_violations(page, context="MTurk preview example answered")
    page.get_by_role("link", name="Back to the instructions").click()
    expect(page.get_by_role("link", name="See an example task")).to_be_visible()

    assert Participant.objects.filter(study=study).count() == 0
    assert Assignment.objects.filter(item__study=study).count() == 0
    assert Judgment.objects.filter(item__study=study).count() == 0
