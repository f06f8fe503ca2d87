"""A crowd worker of an arena study through the real pages: a Django test client arriving
through the crowd link (Prolific or MTurk parameters) and answering every battle offered
as an attentive worker would (issue 46 tests)."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

from annotation.models import Assignment
from annotation.modes.arena.protocol import CATCH
from annotation.services.participants import crowd_link_token
from tests.factories.arena import shown_left

#: What a page says to a worker it sends back without pay.
RETURN = "return your submission"
RANK = {"gamma": 0, "alpha": 1, "delta": 2, "beta": 3}


def honest(lease: Assignment) -> str:
    """An attentive worker: the real caption of a gold battle wins, a battle goes to the
    better-ranked system, given for the side the page shows it on."""
    item = lease.item
    if item.kind == CATCH:
        canonical = "a"
    else:
        canonical = "a" if RANK[item.spec["system_a"]] < RANK[item.spec["system_b"]] else "b"
    if shown_left(lease) == "a":
        return canonical
    return "b" if canonical == "a" else "a"


def link(study) -> str:
    return reverse("crowd_entry", args=[crowd_link_token(study)])


def prolific(pid: str, session: str = "SESSION-1") -> dict[str, str]:
    return {"PROLIFIC_PID": pid, "STUDY_ID": "S46", "SESSION_ID": session}


def mturk(worker_id: str) -> dict[str, str]:
    return {
        "workerId": worker_id,
        "assignmentId": f"ASG-{worker_id}",
        "hitId": "HIT46",
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }


def play(
    study, client: Client, params: dict[str, str], *, limit: int = 60, choose=None
) -> tuple[int, str]:
    """Arrive with ``params`` and answer every battle the pages offer (at most ``limit``)
    with ``choose(lease)`` (default ``honest``): the answers given and the last page's HTML."""
    choose = choose or honest
    arrived = client.get(link(study), params)
    assert arrived.status_code == 302, arrived.content[:400]
    answered, html = 0, ""
    while True:
        html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
        found = re.search(r'action="[^"]*/submit/([^/"]+)/', html)
        if found is None or answered == limit:
            return answered, html
        lease = Assignment.objects.select_related("item").get(token=found.group(1))
        page = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {"part": "0", "outcome": choose(lease)},
        )
        assert page.status_code == 302, page.content[:400]
        answered += 1
