"""The feedback page of issue 42 in a real browser: a page of its own, reached by GET.

A stored answer goes on by a redirect to ``/s/<study>/feedback/<token>/`` (POST, redirect,
GET), so the browser's reload shows the feedback again and never posts the answer twice:
checked without JavaScript (the plain form) and, for VICR's and HUMANr's feedback pages as a
worker sees them, with axe and at 390 and 1280 px. The answers the pages show feedback on are
stored through the service, so these tests do not depend on the page scripts.
"""

from __future__ import annotations

import base64
import re
from datetime import timedelta

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from django.urls import reverse

from annotation.models import Assignment, Judgment, Participant
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width
from tests.factories.humanr import do_group, humanr_study
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
FEEDBACK = re.compile(r"/s/[0-9a-f-]+/feedback/[^/]+/$")


def enter(page, study, worker) -> Participant:
    """Arrive through the crowd link and start: the first item is served to this browser."""
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}")
    page.get_by_role("link", name="I agree, start").click()
    return Participant.objects.get(study=study, external_id=worker)


def open_lease(participant) -> Assignment:
    return Assignment.objects.get(participant=participant, status=Assignment.Status.OPEN)


def test_without_javascript_a_rating_redirects_to_its_feedback_and_a_reload_posts_nothing(
    browser, live_server, researcher
):
    study = vicr_study(researcher, game=2, primes=(4, 4), tutorial_pairs=1, tutorial_pass=0)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        worker = enter(page, study, "NOJS")
        lease = open_lease(worker)
        # The minimum time has passed, as the server counts it.
        Assignment.objects.filter(pk=lease.pk).update(
            served_at=lease.served_at - timedelta(seconds=30)
        )
        page.reload()
        page.locator("label[for=rating-3]").click()
        with page.expect_navigation():
            page.locator("#vicr-submit").click()

        assert FEEDBACK.search(page.url), page.url
        expect(page.locator("#vicr-next")).to_be_visible()
        assert Judgment.objects.filter(participant=worker).count() == 1
        for _ in range(2):
            page.reload()
            expect(page.locator("#vicr-next")).to_be_visible()
        assert Judgment.objects.filter(participant=worker).count() == 1, "a reload posted again"
        # On from the feedback: the next pair, not the same one again.
        page.locator("#vicr-next").click()
        expect(page.locator("form.vicr-form")).to_be_visible()
        assert open_lease(worker).pk != lease.pk
    finally:
        context.close()


def test_the_vicr_feedback_page_by_get_is_accessible_at_every_width(page, researcher):
    study = vicr_study(researcher, game=2, primes=(4, 4), tutorial_pairs=1, tutorial_pass=0)
    worker = enter(page, study, "FB-VICR")
    lease = open_lease(worker)
    stored = judgment_submit(
        participant=worker,
        token=lease.token,
        data={"rating": "3"},
        now=lease.served_at + timedelta(seconds=10),
    )

    page.goto(reverse("participate_feedback", args=[study.public_id, lease.token]))

    expect(page.locator("#vicr-next")).to_be_visible()
    page.reload()
    expect(page.locator("#vicr-next")).to_be_visible()
    assert list(Judgment.objects.values_list("pk", flat=True)) == [stored.judgment.pk]
    assert_no_serious_a11y_violations(page, context="VICR feedback by GET")
    assert_fits_every_width(page, "VICR feedback by GET", shot="issue42-feedback-vicr")


def test_the_humanr_group_feedback_page_by_get_is_accessible_at_every_width(page, researcher):
    study = humanr_study(researcher)
    worker = enter(page, study, "FB-HR")
    lease = do_group(worker)  # the lease the page was served, all its trials answered

    page.goto(reverse("participate_feedback", args=[study.public_id, lease.token]))

    expect(page.get_by_role("heading", name="Group complete")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Group complete")).to_be_visible()
    assert Judgment.objects.filter(assignment=lease).count() == len(lease.item.spec["trials"])
    assert_no_serious_a11y_violations(page, context="HUMANr group feedback by GET")
    assert_fits_every_width(page, "HUMANr group feedback by GET", shot="issue42-feedback-humanr")
