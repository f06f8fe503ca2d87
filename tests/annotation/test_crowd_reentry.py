"""Crowd re-entry (issue 46, row 3), through the real views: a worker who earned the code
and reopened the link in another browser (same Prolific id) was told to return the
submission, which forfeits their pay. Now the code is shown again to the same submission,
and what stops a different person from harvesting codes still holds.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import CrowdRefusal
from tests.factories.arena import MODE, arena_study
from tests.factories.arena_crowd import RETURN, link, play, prolific

pytestmark = pytest.mark.django_db

CODE = "ARENA-PAID-46"


def reachable_study(researcher):
    return arena_study(
        researcher,
        systems=("alpha", "beta", "gamma", "delta"),
        images=36,
        completion_code=CODE,
        prolific_study_id="S46",
    )


def test_a_worker_who_completed_sees_the_code_again_from_another_browser(researcher):
    study = reachable_study(researcher)
    needed = MODE.settings(study).completion_battles
    answered, first = play(study, Client(REMOTE_ADDR="10.46.3.1"), prolific("X46"), limit=needed)
    assert CODE in first and answered == needed

    # The same worker, another browser (no cookie), the same Prolific id and session.
    again = Client(REMOTE_ADDR="10.46.3.9")
    page = again.get(link(study), prolific("X46"), follow=True)

    assert page.status_code == 200
    html = page.content.decode()
    assert CODE in html, html[html.find("<main") :][:1500]
    assert RETURN not in html
    # Shown, not resumed: the other browser cannot answer as this worker.
    nxt = again.get(reverse("participate_next", args=[study.public_id]))
    assert nxt.status_code == 404


def test_another_browser_with_an_id_that_did_not_complete_is_still_refused(researcher):
    study = reachable_study(researcher)
    play(study, Client(REMOTE_ADDR="10.46.3.2"), prolific("halfway"), limit=5)

    page = Client(REMOTE_ADDR="10.46.3.8").get(link(study), prolific("halfway"))

    assert page.status_code == 403
    assert CODE not in page.content.decode()
    assert CrowdRefusal.objects.filter(reason="foreign_browser", external_id="halfway").exists()


def test_a_completed_id_with_another_prolific_session_is_refused(researcher):
    # The Prolific id alone (seen in a shared screenshot, say) is not the submission: the
    # session must be the one that did the work.
    study = reachable_study(researcher)
    needed = MODE.settings(study).completion_battles
    play(study, Client(REMOTE_ADDR="10.46.3.3"), prolific("Y46"), limit=needed)

    page = Client(REMOTE_ADDR="10.46.3.7").get(link(study), prolific("Y46", session="OTHER"))

    assert page.status_code == 403
    assert CODE not in page.content.decode()
