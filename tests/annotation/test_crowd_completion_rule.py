"""Issue 45, row 5: the completion code follows one rule in every mode.

Work that the study's own checks exclude does not earn the code, and the worker is told why,
with Prolific's "failed attention check" code when the study sets one (``failed_check_code``).

The attack (HUMANr): a worker answers 5 ("both match equally") to every trial of every
group. Every attention check fails, so every comparison is excluded; before the fix the
worker still earned the completion code after the first group, with no flag. THumB (catch
trials) and VICR (the gates) are played the same way and must hold the same rule.

Each worker is a Django test client of its own (one browser, one client address) arriving
through the study's signed Prolific link and answering through the real pages.
"""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Caption, Judgment, Participant
from annotation.modes.humanr.protocol import reference_on_left
from annotation.services.participants import crowd_link_token
from tests.factories.humanr import humanr_study
from tests.factories.thumb import form_for, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

FULL_URL = "https://app.prolific.com/submissions/complete?cc=FULL77"
FAILED_CODE = "FAILCHK9"
FAILED_URL = "https://app.prolific.com/submissions/complete?cc=" + FAILED_CODE
OPEN_DOORS = {"crowd_arrivals_per_address_per_hour": 1000, "crowd_open_leases_per_address": 1000}


def arrive(study, pid: str, address: str) -> Client:
    client = Client(REMOTE_ADDR=address)
    response = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": f"se-{pid}"},
    )
    assert response.status_code == 302, response.content.decode()[:300]
    return client


def next_page(client, study):
    return client.get(reverse("participate_next", args=[study.public_id]))


def participant_of(study, pid: str) -> Participant:
    return Participant.objects.get(study=study, external_id=pid)


def assert_told_why_without_the_code(pages: list[str], study, *, failed_code: bool) -> None:
    """No page carries the completion code; the last says why and how to leave."""
    for page in pages:
        assert "FULL77" not in page and study.completion_code not in page
    last = pages[-1]
    assert 'id="checks-failed"' in last or 'id="screen-out-message"' in last, last[:2000]
    assert "attention check" in last or "entry check" in last
    if failed_code:
        assert FAILED_CODE in last and f'href="{FAILED_URL}"' in last
    else:
        assert FAILED_CODE not in last
        assert "return your submission" in last


# ------------------------------------------------------------------------------ HUMANr


def play_humanr(client, study, answer, *, groups: int | None = None) -> list[str]:
    """Answer every group served, trial by trial, through the pages; every page's HTML.

    ``answer(on_left)`` picks each answer, or ``answer(on_left, group)`` with the group's
    number among this worker's groups when it takes two arguments. ``groups``: stop after
    that many groups (default: play until nothing is served)."""
    pages = []
    for group in range(groups or 50):
        page = next_page(client, study)
        pages.append(page.content.decode())
        lease = page.context.get("assignment")
        if lease is None:
            return pages
        for part in range(len(lease.item.spec["trials"])):
            if part:
                page = next_page(client, study)
                pages.append(page.content.decode())
            on_left = reference_on_left(lease.item.spec["seed"], lease.pk, part)
            raw = answer(on_left, group) if answer.__code__.co_argcount == 2 else answer(on_left)
            response = client.post(
                reverse("participate_submit", args=[study.public_id, lease.token]),
                {"part": part, "raw": raw, "left": page.context["left_caption"].pk},
                follow=True,  # the feedback is a page after a redirect (issue 42)
            )
            assert response.status_code in (200, 302), response.content.decode()[:400]
            if response.status_code == 200:
                pages.append(response.content.decode())
    assert groups, "still served after 50 groups"
    return pages


def fives(on_left):
    return 5  # "both match equally": fails every attention check


def honest(on_left):
    return 2 if on_left else 8


@pytest.mark.parametrize("failed_code", [True, False])
def test_humanr_a_worker_failing_every_attention_check_earns_no_code(researcher, failed_code):
    settings = {"prolific_completion_url": FULL_URL, **OPEN_DOORS}
    if failed_code:
        settings["failed_check_code"] = FAILED_CODE
    study = humanr_study(researcher, **settings)
    client = arrive(study, "fives", "203.0.113.5")

    pages = play_humanr(client, study, fives)

    worker = participant_of(study, "fives")
    judgments = Judgment.objects.filter(participant=worker)
    assert worker.state["groups_done"] >= 1
    assert worker.state["groups_failed"] == worker.state["groups_done"]
    assert judgments.exists() and not judgments.filter(excluded=False).exists()
    assert worker.completed_at is None, "every comparison excluded, yet the code was earned"
    assert_told_why_without_the_code(pages, study, failed_code=failed_code)
    assert "attention check failed in" in pages[-1]


def test_humanr_a_failed_group_then_a_passed_one_earns_the_code(researcher):
    """Only work that the checks keep counts: a passed group after a failed one earns it."""
    study = humanr_study(researcher, images=40, systems=("GIT",), **OPEN_DOORS)
    client = arrive(study, "learner", "203.0.113.6")

    def careless_then_honest(on_left, group):
        return fives(on_left) if group == 0 else honest(on_left)

    pages = play_humanr(client, study, careless_then_honest, groups=2)
    worker = participant_of(study, "learner")
    assert worker.state["groups_failed"] == 1 and worker.state["groups_done"] == 2
    assert worker.completed_at is not None
    assert any(study.completion_code in page for page in pages)


# ------------------------------------------------------------------------------ THumB


def test_thumb_a_worker_caught_by_catch_trials_earns_no_code_and_is_told_why(make_study):
    study = thumb_study(
        make_study,
        captions={},
        extra_images=12,
        settings={
            **OPEN_DOORS,
            "stage2": False,
            "require_native_fluency": False,
            "completion_images": 5,
            "catch_rate": 0.5,
            "catch_min_seen": 3,
            "failed_check_code": FAILED_CODE,
            "prolific_completion_url": FULL_URL,
        },
    )
    client = arrive(study, "junk", "203.0.113.7")
    pages = []
    for _ in range(40):
        page = next_page(client, study)
        pages.append(page.content.decode())
        lease = page.context.get("assignment")
        if lease is None:
            break
        response = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            form_for(lease.item, precision=5),
        )
        assert response.status_code == 302, response.content.decode()[:300]

    worker = participant_of(study, "junk")
    assert "catch_failed" in [flag["kind"] for flag in worker.flags]
    assert worker.completed_at is None
    assert_told_why_without_the_code(pages, study, failed_code=True)


# ------------------------------------------------------------------------------ VICR

ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
CAPTION = re.compile(r'<p class="vicr-caption">.*?“(.*?)”</p>', re.S)


def test_vicr_a_player_the_gates_turn_away_earns_no_code_and_is_told_why(researcher):
    study = vicr_study(
        researcher,
        seconds_before_submit=0,
        failed_check_code=FAILED_CODE,
        prolific_completion_url=FULL_URL,
        **OPEN_DOORS,
    )
    truths = dict(
        Caption.objects.filter(study=study, purpose__in=("tutorial", "probation")).values_list(
            "text", "spec__truth"
        )
    )
    client = arrive(study, "far", "203.0.113.8")
    pages = []
    for _ in range(80):
        page = next_page(client, study)
        text = page.content.decode()
        pages.append(text)
        action = ACTION.search(text)
        if action is None:
            break
        truth = truths[html.unescape(CAPTION.search(text).group(1))]
        # The feedback is a page of its own after a redirect (issue 42): follow it.
        rating = {"rating": 5 if truth <= 2 else 1}
        answer = client.post(html.unescape(action.group(1)), rating, follow=True)
        assert answer.status_code == 200, answer.content.decode()[:300]
        pages.append(answer.content.decode())

    worker = participant_of(study, "far")
    assert worker.status == "excluded"
    assert worker.completed_at is None
    assert_told_why_without_the_code(pages, study, failed_code=True)
