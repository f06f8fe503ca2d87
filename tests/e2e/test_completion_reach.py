"""Issue 46, rows 2 and 3 in a real browser: the researcher opening a study whose code no
worker can reach reads the numbers (the message and the dashboard's box); a worker who was
paid and comes back in another browser sees the code again. Axe and both widths on each
page. Images are answered by a route (the files are not on disk in tests)."""

from __future__ import annotations

import base64

import pytest
from django.test import Client

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Image
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.arena import MODE, arena_study
from tests.factories.arena_crowd import RETURN, play, prolific

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
CODE = "ARENA-PAID-46"


def test_opening_a_study_whose_code_no_worker_can_reach_says_so(page, login, researcher):
    study = arena_study(researcher, live=False, completion_code=CODE)
    needed = MODE.settings(study).completion_battles
    images = Image.objects.filter(study=study).count()
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")

    page.get_by_role("button", name="Open the study").click()

    expect(page.get_by_role("status").filter(has_text="completion code")).to_contain_text(
        f"{needed} battles"
    )
    box = page.locator("#completion-reach")
    expect(box).to_contain_text(f"{images} images")
    expect(box).to_contain_text(f"at most {images}")
    assert_no_serious_a11y_violations(page, context="study page with the reach warning")
    assert_fits_every_width(page, "study page", shot="issue46-row2-completion-reach")


def test_a_paid_worker_back_in_another_browser_sees_the_code(page, researcher):
    study = arena_study(
        researcher,
        systems=("alpha", "beta", "gamma", "delta"),
        images=36,
        completion_code=CODE,
        prolific_study_id="S46",
    )
    needed = MODE.settings(study).completion_battles
    # The first browser (a test client) does the work and is paid.
    answered, first = play(study, Client(REMOTE_ADDR="10.46.3.1"), prolific("X46"), limit=needed)
    assert CODE in first and answered == needed
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )

    # Another browser, the same Prolific link.
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=X46&STUDY_ID=S46&SESSION_ID=SESSION-1")

    expect(page.locator("#completion-code")).to_have_text(CODE)
    expect(page.locator("#completion-prolific")).to_be_visible()
    assert RETURN not in page.content()
    assert_no_serious_a11y_violations(page, context="the code shown again")
    assert_fits_every_width(page, "the code shown again", shot="issue46-row3-reentry")
