"""Issue 45, row 6 in Chromium: the review page's held codes, decided with one click, and
the held worker's page. Both pass axe and fit 390 px and 1280 px."""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from django.urls import reverse

from annotation.models import Participant
from annotation.modes.base import HOLD_FLAG
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token, participant_for_crowd_worker
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.core import vehicle_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"


def held_worker(study, pid: str) -> Participant:
    person, _ = participant_for_crowd_worker(
        study=study,
        source=Participant.Source.PROLIFIC,
        external_id=pid,
        meta={"PROLIFIC_PID": pid, "STUDY_ID": "PS1", "SESSION_ID": f"sub-{pid}"},
    )
    lease = assignment_next(participant=person)
    judgment_submit(participant=person, token=lease.token, data={"rating": 4})
    # As the submission service leaves a worker a mode held (VICR's replayed gate).
    Participant.objects.filter(pk=person.pk).update(
        flags=[
            {"kind": "gate_replay", "detail": "practice 4 of 4, game 0 of 10", "at": "now"},
            {"kind": HOLD_FLAG, "detail": "Your work waits for the review.", "at": "now"},
        ]
    )
    return person


def test_release_a_held_code_with_one_click(page, login, researcher):
    study = vehicle_study(researcher)
    person = held_worker(study, "HELD1")
    login(page, researcher)

    page.goto(f"/studies/{study.pk}/crowd/")
    holds = page.locator("#crowd-holds")
    expect(holds).to_contain_text(person.pseudonym)
    expect(holds).to_contain_text("gate_replay: practice 4 of 4, game 0 of 10")
    assert_no_serious_a11y_violations(page, context="review page with a held code")
    assert_fits_every_width(page, "review page with a held code")

    page.get_by_role("button", name=f"Release {person.pseudonym}'s completion code").click()

    expect(page.locator("#holds-none")).to_be_visible()
    expect(page.get_by_text(f"Released: {person.pseudonym}")).to_be_visible()
    person.refresh_from_db()
    assert person.flags[-1]["kind"] == "hold_released"


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        (
            [{"kind": HOLD_FLAG, "detail": "Your work waits for the review.", "at": "now"}],
            "#held-for-review",
        ),
        ([{"kind": "catch_failed", "detail": "missed 3 of 3", "at": "now"}], "#checks-failed"),
    ],
)
def test_the_worker_page_says_why_there_is_no_code(page, researcher, live_url, flags, shown):
    study = vehicle_study(researcher, failed_check_code="FAILCHK9")
    link = reverse("crowd_entry", args=[crowd_link_token(study)])
    page.goto(f"{link}?PROLIFIC_PID=W1&STUDY_ID=PS1&SESSION_ID=S1")
    Participant.objects.filter(study=study, external_id="W1").update(flags=flags)

    page.goto(reverse("participate_next", args=[study.public_id]))

    expect(page.locator(shown)).to_be_visible()
    assert study.completion_code not in page.content()
    if shown == "#checks-failed":
        expect(page.locator("#failed-check-code")).to_have_text("FAILCHK9")
    assert_no_serious_a11y_violations(page, context=f"worker page with {shown}")
    assert_fits_every_width(page, f"worker page with {shown}")
