"""HUMANr in a real browser: a Prolific worker does a group with the keyboard only, gets the
completion code; a second worker fails the attention check (no code, and told why); the
researcher's report leaves that group out of HUMANr while the export keeps it, flagged.

Images are answered by a route that returns a small PNG (the files are not on disk in tests).
"""

from __future__ import annotations

import base64
import csv
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, Judgment, Participant
from annotation.modes.humanr.protocol import reference_on_left
from annotation.services.exports import export_request
from annotation.services.participants import crowd_link_token
from annotation.tasks import enqueue
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.humanr import humanr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc=E2EC0DE"


def enter_with_keyboard(page, study, worker):
    """Arrive through the Prolific link and start with Tab and Enter only."""
    page.route(
        "**/media/**",
        lambda route: route.fulfill(status=200, body=PNG, content_type="image/png"),
    )
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}&STUDY_ID=ST&SESSION_ID=SE")
    start = page.get_by_role("link", name="I agree, start")
    for _ in range(6):
        page.keyboard.press("Tab")
        if start.evaluate("element => element === document.activeElement"):
            break
    expect(start).to_be_focused()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    return Participant.objects.get(study=study, external_id=worker)


def current_trial(participant, part):
    lease = Assignment.objects.get(participant=participant, status=Assignment.Status.OPEN)
    spec = lease.item.spec
    return spec["trials"][part], reference_on_left(spec["seed"], lease.pk, part)


def answer_with_keys(page, part, value, *, arrows: bool):
    """Choose ``value`` with a digit key, or with arrow keys from the middle; then Enter."""
    if arrows:
        page.keyboard.press("ArrowRight")  # the first arrow press lands on 5
        expect(page.locator("#raw-5")).to_be_checked()
        key = "ArrowRight" if value > 5 else "ArrowLeft"
        for _ in range(abs(value - 5)):
            page.keyboard.press(key)
    else:
        page.keyboard.press(str(value))
    expect(page.locator(f"#raw-{value}")).to_be_checked()
    expect(page.locator(f"#raw-{value}")).to_be_focused()
    expect(page.locator("#hr-choice-value")).to_have_text(re.compile(rf"^{value}: "))
    with page.expect_navigation():
        page.keyboard.press("Enter")


def do_group_with_keyboard(page, participant, *, fail_check=False):
    for part in range(10):
        expect(page.locator("#hr-progress")).to_have_text(f"Trial {part + 1} of 10")
        trial, on_left = current_trial(participant, part)
        prefers_reference = not (fail_check and trial["kind"] == "attention_check")
        value = 2 if on_left == prefers_reference else 8
        answer_with_keys(page, part, value, arrows=part % 3 == 1)


def show_report_when_ready(page, seconds=30):
    """The report job runs after the click; the page reloads itself when the job ends."""
    expect(page.locator("#hr-checks")).to_be_visible(timeout=seconds * 1000)


def test_a_prolific_worker_completes_a_group_by_keyboard_and_gets_the_code(page, researcher):
    study = humanr_study(
        researcher,
        images=18,
        systems=("GIT",),
        min_seconds_per_trial=0.5,
        prolific_completion_url=COMPLETION_URL,
    )
    worker = enter_with_keyboard(page, study, "E2E-KEYS")

    expect(
        page.get_by_role("group", name="Which caption goes best with the image?")
    ).to_be_visible()
    for value in range(1, 10):
        expect(page.get_by_role("radio", name=f"{value}: ")).not_to_be_checked()
    assert_no_serious_a11y_violations(page, context="HUMANr trial page")
    do_group_with_keyboard(page, worker)

    expect(page.get_by_role("heading", name="Group complete")).to_be_visible()
    expect(page.locator("#completion-code")).to_have_text("E2EC0DE")
    expect(page.locator("#completion-prolific")).to_have_attribute("href", COMPLETION_URL)
    # 18 images: every other group shares an image with this one, and a worker never meets
    # an image twice, so the page offers no "Do another group" that would lead nowhere.
    expect(page.locator("#hr-no-more")).to_be_visible()
    expect(page.locator("#hr-another")).to_have_count(0)
    assert_no_serious_a11y_violations(page, context="HUMANr end of group")
    stored = Judgment.objects.filter(participant=worker)
    assert stored.count() == 10 and not stored.filter(excluded=True).exists()
    for judgment in stored:
        expected = 2 if judgment.result["reference_on_left"] else 8
        assert judgment.payload["raw"] == expected, "the answer chosen by key is what was saved"
        assert judgment.result["oriented"] == 2
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    expect(page.locator("#completion-prolific")).to_have_attribute("href", COMPLETION_URL)


def test_a_failed_check_drops_the_group_from_the_report_but_not_the_export(page, researcher, login):
    study = humanr_study(
        researcher,
        images=18,
        systems=("GIT",),
        min_seconds_per_trial=0,
        workers_per_comparison=2,
    )
    honest = enter_with_keyboard(page, study, "E2E-HONEST")
    do_group_with_keyboard(page, honest)
    page.context.clear_cookies()
    careless = enter_with_keyboard(page, study, "E2E-CARELESS")
    do_group_with_keyboard(page, careless, fail_check=True)
    # No code for excluded work (issue 45, row 5): the page says why instead.
    expect(page.locator("#checks-failed")).to_contain_text("attention check failed in 1")
    expect(page.locator("#completion-code")).to_have_count(0)

    flagged = Judgment.objects.filter(participant=careless)
    assert flagged.count() == 10 and flagged.filter(excluded=True).count() == 10

    page.context.clear_cookies()
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    page.get_by_role("button", name="Compute the report").click()
    show_report_when_ready(page)
    expect(page.locator("#hr-checks")).to_contain_text("failed: 1")
    expect(page.locator("#hr-checks")).to_contain_text("dropped groups: 1 (10 responses)")
    expect(page.locator("#main")).to_contain_text("9 of 18 comparisons kept")
    assert_no_serious_a11y_violations(page, context="HUMANr report")

    job = enqueue(export_request(study=study, user=researcher, export_format="csv"))
    job.refresh_from_db()
    path = Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file
    with path.open(encoding="utf-8", newline="") as data:
        rows = list(csv.DictReader(data))
    assert len(rows) == 20
    dropped = [row for row in rows if row["excluded"] == "true"]
    assert len(dropped) == 10
    assert {row["participant"] for row in dropped} == {careless.pseudonym}
    assert all(row["exclusion_reason"].startswith("attention check failed") for row in dropped)
