"""Issue 45, row 6 (VICR): a replayed gate, once flagged, withholds the completion code
until the researcher reviews it, with one click on the crowd review page.

The attack, rerun through the real pages: scout ids (each a browser at an address of its
own) play the tutorial and write down every expert rating the feedback shows, until their
notes cover the whole tutorial pool; a replayer id (another browser and address) passes the
tutorial on the notes and answers junk in the game. The replay flag was already raised
(issue 29), but the replayer still got the completion code and was paid. Now the code
waits: the replayer's pages say so, the researcher releases or returns with one click, and
each decision goes through ``services/crowd/holds.py``.
"""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Judgment, Participant
from annotation.models.crowd import crowd_left
from annotation.modes.base import HOLD_FLAG, HOLD_RELEASED_FLAG, HOLD_RETURNED_FLAG
from annotation.services.participants import crowd_link_token
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

CAPTION = re.compile(r'<p class="vicr-caption">.*?“(.*?)”</p>', re.S)
ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
TRUTH = re.compile(r'id="vicr-truth">(\d)<')
FULL_URL = "https://app.prolific.com/submissions/complete?cc=FULL77"
OPEN_LIMITS = {"crowd_arrivals_per_address_per_hour": 1000, "crowd_open_leases_per_address": 1000}
GUESS = 3


def gate_truths(n: int, offset: int = 0) -> list[int]:
    """Truths 1, 2, 4, 5 only: a guess of 3 earns at most 1 point, so a pass needs notes."""
    return [(1, 2, 4, 5)[(i + offset) % 4] for i in range(n)]


class CrowdId:
    """One crowd worker id: a browser at an address, arrived through the crowd link."""

    def __init__(self, study, worker: str, address: str):
        self.study, self.worker = study, worker
        self.client = Client(REMOTE_ADDR=address)
        arrived = self.client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]),
            {"PROLIFIC_PID": worker, "STUDY_ID": "S", "SESSION_ID": f"se-{worker}"},
        )
        assert arrived.status_code == 302, arrived.content[:300]
        self.next_url = reverse("participate_next", args=[study.public_id])
        self.pages: list[str] = []

    @property
    def participant(self) -> Participant:
        return Participant.objects.get(study=self.study, external_id=self.worker)

    def page(self) -> str:
        text = self.client.get(self.next_url).content.decode()
        self.pages.append(text)
        return text

    def rate(self, choose) -> dict:
        text = self.page()
        action = ACTION.search(text)
        assert action is not None, "no pair was served"
        caption = html.unescape(CAPTION.search(text).group(1))
        # The feedback is a page of its own after a redirect (issue 42): follow it.
        rating = {"rating": str(choose(caption))}
        answer = self.client.post(html.unescape(action.group(1)), rating, follow=True)
        assert answer.status_code == 200, answer.content[:300]
        self.pages.append(answer.content.decode())
        truth = TRUTH.search(answer.content.decode())
        return {"caption": caption, "truth": int(truth.group(1)) if truth else None}


def replay_attack(researcher, **settings):
    """The scouts, then the replayer with their notes and junk in the game; the replayer.

    Small blocks so scouts can cover the pool (4 pairs a tutorial, 12 in the pool); the
    code comes with the first-game check's 10th rating, when the replay rule looks.
    """
    study = vicr_study(
        researcher,
        tutorial=gate_truths(12),
        probation=gate_truths(3 * 20 * 2, offset=1),
        game=25,
        tutorial_pairs=4,
        tutorial_pass=8,
        first_game_ratings=10,
        # The first-game check lets junk through (a study that sets it low, or a replayer
        # whose junk scores just enough): the replay rule is what must catch it.
        first_game_pass=-20,
        completion_game_ratings=10,
        gate_pool_multiple=3,
        seconds_before_submit=0,
        prolific_completion_url=FULL_URL,
        **OPEN_LIMITS,
        **settings,
    )
    notes: dict[str, int] = {}
    scouts = 0
    while len(notes) < 12:
        scouts += 1
        assert scouts <= 30, "the scouts should have covered the pool by now"
        scout = CrowdId(study, f"SCOUT{scouts}", f"203.0.113.{scouts}")
        for _ in range(4):
            shown = scout.rate(lambda caption: GUESS)
            notes[shown["caption"]] = shown["truth"]
    replayer = CrowdId(study, "REPLAYER", "198.51.100.60")
    for _ in range(4):
        replayer.rate(lambda caption: notes[caption])
    assert replayer.participant.status == "game", "the pooled notes pass the tutorial"
    for _ in range(12):  # past the code's 10 ratings: junk, 1 on every pair (consensus 4)
        replayer.rate(lambda caption: 1)
    assert replayer.participant.status == "game", "still in the game: only the flag stands"
    return study, replayer


def owner_client(researcher) -> Client:
    client = Client(REMOTE_ADDR="192.0.2.200")
    client.force_login(researcher)
    return client


def test_the_replayer_informed_by_scouts_gets_no_code_until_the_researcher_decides(researcher):
    study, replayer = replay_attack(researcher)

    person = replayer.participant
    kinds = [flag["kind"] for flag in person.flags]
    assert "gate_replay" in kinds, "the replay flag (issue 29) is raised"
    assert person.state["game_total"] >= 10, "the replayer did the work the code asks"
    assert person.completed_at is None, "the flagged replayer earned the completion code"
    assert HOLD_FLAG in kinds
    for page in replayer.pages:
        assert "FULL77" not in page and study.completion_code not in page
    last = replayer.page()
    assert 'id="held-for-review"' in last
    assert "the researcher reviews your work before the completion code is given" in last

    # The researcher's review page lists the held worker with the two one-click decisions.
    review = owner_client(researcher).get(reverse("study_crowd_review", args=[study.pk]))
    assert review.status_code == 200
    text = review.content.decode()
    assert f'id="release-{person.pk}"' in text and f'id="return-{person.pk}"' in text
    assert "gate_replay: practice answers matched the expert rating on 4 of 4" in text


def test_release_is_one_click_and_the_worker_then_sees_the_code(researcher):
    study, replayer = replay_attack(researcher)
    person = replayer.participant
    owner = owner_client(researcher)

    clicked = owner.post(
        reverse("study_crowd_hold", args=[study.pk, person.pk]), {"decision": "release"}
    )

    assert clicked.status_code == 302
    person.refresh_from_db()
    assert person.completed_at is not None
    assert [f["kind"] for f in person.flags][-1] == HOLD_RELEASED_FLAG
    assert person.flags[-1]["detail"] == f"by {researcher.username}"
    page = replayer.page()
    assert "FULL77" in page and 'id="held-for-review"' not in page
    after = owner.get(reverse("study_crowd_review", args=[study.pk])).content.decode()
    assert f'id="release-{person.pk}"' not in after, "decided: no longer listed"
    # A second click (or a second researcher) changes nothing and says why.
    again = owner.post(
        reverse("study_crowd_hold", args=[study.pk, person.pk]),
        {"decision": "return"},
        follow=True,
    )
    assert "not waiting for a review" in again.content.decode()
    person.refresh_from_db()
    assert person.completed_at is not None and not crowd_left(person.flags)


def test_return_is_one_click_and_the_worker_is_asked_to_return(researcher):
    study, replayer = replay_attack(researcher)
    person = replayer.participant

    clicked = owner_client(researcher).post(
        reverse("study_crowd_hold", args=[study.pk, person.pk]), {"decision": "return"}
    )

    assert clicked.status_code == 302
    person.refresh_from_db()
    assert person.completed_at is None
    assert HOLD_RETURNED_FLAG in [f["kind"] for f in person.flags]
    judgments = Judgment.objects.filter(participant=person)
    assert judgments.exists() and not judgments.filter(excluded=False).exists()
    assert judgments.filter(exclusion_reason__contains="RETURN REQUESTED").exists()
    page = replayer.page()
    assert 'id="returned-after-review"' in page and "return your submission" in page
    assert "FULL77" not in page and ACTION.search(page) is None, "served nothing more"


def test_only_the_owner_decides_and_a_bad_decision_names_the_field(researcher, make_user):
    study, replayer = replay_attack(researcher)
    person = replayer.participant
    member = make_user("member", researcher=True)
    study.members.add(member)
    colleague = Client(REMOTE_ADDR="192.0.2.201")
    colleague.force_login(member)
    url = reverse("study_crowd_hold", args=[study.pk, person.pk])

    assert colleague.post(url, {"decision": "release"}).status_code == 404
    bad = owner_client(researcher).post(url, {"decision": "pay"}, follow=True)
    assert "Choose release or return." in bad.content.decode()
    person.refresh_from_db()
    assert person.completed_at is None and HOLD_FLAG in [f["kind"] for f in person.flags]
    assert not {HOLD_RELEASED_FLAG, HOLD_RETURNED_FLAG} & {f["kind"] for f in person.flags}


def test_an_honest_player_is_not_held(researcher):
    study = vicr_study(
        researcher,
        tutorial=gate_truths(12),
        probation=gate_truths(3 * 20 * 2, offset=1),
        game=25,
        tutorial_pairs=4,
        tutorial_pass=8,
        first_game_ratings=10,
        first_game_pass=0,
        completion_game_ratings=10,
        gate_pool_multiple=3,
        seconds_before_submit=0,
        prolific_completion_url=FULL_URL,
        **OPEN_LIMITS,
    )
    truths = dict(study.captions.filter(purpose="tutorial").values_list("text", "spec__truth"))
    honest = CrowdId(study, "HONEST", "192.0.2.60")
    for _ in range(4):
        honest.rate(lambda caption: truths[caption])
    for n in range(10):  # 6 of 10 on the consensus (4), the rest one off
        honest.rate(lambda caption, n=n: 4 if n % 5 < 3 else 3)
    person = honest.participant
    assert person.flags == [] and person.completed_at is not None
    assert "FULL77" in honest.page()
