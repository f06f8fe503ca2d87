"""The submit protocol of issue 42 through the real views (docs/participation.md).

An item form posted with ``Accept: application/json`` is answered in JSON for every outcome,
so the page's script can keep or clear its draft: stored, already stored (a resend after a
lost reply, acknowledged with the judgment stored first), invalid, too fast, lease expired
(stored or discarded), study closed, not a participant. A resend is stored once, also when
two posts race. The HTML path stays as it was, except that a mode's feedback is a page of
its own reached by a redirect, so reloading it never posts again.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Caption, Judgment
from annotation.modes.humanr.protocol import reference_on_left
from annotation.services.assignments import (
    assignment_next,
    assignment_release,
    assignment_release_expired,
)
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_close
from tests.factories.arena import arena_study
from tests.factories.core import assert_counts_exact, require_postgres, run_together
from tests.factories.humanr import do_group, humanr_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}
KEYS = {"status", "message", "next_url", "ack", "fields", "retry_after", "work"}


def submit_url(study, lease):
    return reverse("participate_submit", args=[study.public_id, lease.token])


def next_url(study):
    return reverse("participate_next", args=[study.public_id])


def feedback_url(study, lease):
    return reverse("participate_feedback", args=[study.public_id, lease.token])


def arrive(client, study, pid):
    response = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X"},
    )
    assert response.status_code == 302
    return study.participants.get(external_id=pid)


def serve(client, study, *, ago=60) -> Assignment:
    """Show the participant their next item, as if it had been shown ``ago`` seconds ago."""
    page = client.get(next_url(study))
    assert page.status_code == 200
    lease = page.context["assignment"]
    shown = timezone.now() - timedelta(seconds=ago)
    Assignment.objects.filter(pk=lease.pk).update(served_at=shown)
    lease.refresh_from_db()
    return lease


def reply(response, status: int, code: str) -> dict:
    """The JSON body of ``response``, checked to be the protocol's with this status."""
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert set(body) == KEYS, body
    assert (response.status_code, body["status"]) == (status, code), body
    assert body["message"].strip(), "every reply says something to the annotator"
    return body


# ---------------------------------------------------------------------- arena (no feedback)


def arena(researcher, **settings):
    settings.setdefault("min_seconds", 0)
    return arena_study(researcher, systems=("alpha", "beta"), images=2, **settings)


def test_a_stored_answer_is_acknowledged_with_its_judgment(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)

    body = reply(client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 200, "stored")

    stored = Judgment.objects.get()
    assert body["ack"] == {"lease": lease.token, "part": 0, "judgment_id": stored.pk}
    assert body["next_url"] == next_url(study), "the arena has no feedback page"
    assert body["work"] is None and body["fields"] == [] and body["retry_after"] is None


def test_a_resend_after_a_lost_reply_is_already_stored_and_names_the_same_judgment(
    client, researcher
):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    first = reply(client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 200, "stored")

    again = client.post(submit_url(study, lease), {"outcome": "a"}, **JSON)

    body = reply(again, 200, "already_stored")
    assert body["ack"] == first["ack"]
    assert body["next_url"] == next_url(study)
    assert Judgment.objects.count() == 1
    assert_counts_exact(study)


def test_a_resend_without_javascript_stores_nothing_new(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    assert client.post(submit_url(study, lease), {"outcome": "a"}).status_code == 302

    again = client.post(submit_url(study, lease), {"outcome": "b"})

    assert again.status_code == 302 and again["Location"] == next_url(study)
    assert list(Judgment.objects.values_list("payload__outcome", flat=True)) == ["a"]


def test_an_answer_the_mode_refuses_is_invalid_with_its_fields(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)

    body = reply(client.post(submit_url(study, lease), {"outcome": ""}, **JSON), 400, "invalid")

    assert [problem["field"] for problem in body["fields"]] == ["outcome"]
    assert all(problem["message"] for problem in body["fields"])
    assert body["ack"] is None and body["next_url"] is None
    assert not Judgment.objects.exists()


def test_an_answer_under_the_minimum_time_says_when_to_retry(client, researcher):
    study = arena(researcher, min_seconds=20)
    arrive(client, study, "W1")
    lease = serve(client, study, ago=5)
    before = timezone.now()

    response = client.post(submit_url(study, lease), {"outcome": "a"}, **JSON)

    after = timezone.now()
    body = reply(response, 429, "too_fast")
    # Whole seconds until 20 s after the page was shown, as the clock stood during the post.
    latest = math.ceil(20 - (before - lease.served_at).total_seconds())
    earliest = math.ceil(20 - (after - lease.served_at).total_seconds())
    assert earliest <= body["retry_after"] <= latest
    assert response["Retry-After"] == str(body["retry_after"])
    assert not Judgment.objects.exists()


def test_a_late_answer_to_a_lease_still_open_is_stored_and_said_to_be_late(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(1))

    body = reply(
        client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 409, "lease_expired"
    )

    assert body["work"] == "stored"
    assert body["ack"]["judgment_id"] == Judgment.objects.get().pk
    assert body["next_url"] == next_url(study)
    assert_counts_exact(study)


def test_a_late_answer_to_a_released_lease_is_stored_when_the_item_has_room(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(1))
    assert assignment_release_expired() == 1  # the beat's sweep gave the slot back

    body = reply(
        client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 409, "lease_expired"
    )

    assert body["work"] == "stored"
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.SUBMITTED
    assert body["ack"] == {
        "lease": lease.token,
        "part": 0,
        "judgment_id": Judgment.objects.get(assignment=lease).pk,
    }
    assert_counts_exact(study)
    # Sent again (its reply lost too): the same judgment, nothing new.
    again = reply(
        client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 200, "already_stored"
    )
    assert again["ack"] == body["ack"] and Judgment.objects.count() == 1


def test_a_late_answer_is_discarded_when_its_item_went_to_someone_else(client, researcher):
    study = arena_study(
        researcher, systems=("alpha", "beta"), images=1, min_seconds=0, battle_target=1
    )
    arrive(client, study, "W1")
    lease = serve(client, study)
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(1))
    assignment_release_expired()
    other = Client()
    arrive(other, study, "W2")
    assert serve(other, study).item_id == lease.item_id, "the battle went to the next worker"

    body = reply(
        client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 409, "lease_expired"
    )

    assert body["work"] == "discarded" and body["ack"] is None
    assert "someone else" in body["message"]
    assert body["next_url"] == next_url(study)
    assert not Judgment.objects.exists()
    assert_counts_exact(study)


def test_a_late_answer_to_a_lease_the_researcher_gave_back_is_discarded(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    assert assignment_release(study=study, assignment_id=lease.pk, released_by="rita")

    body = reply(
        client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 409, "lease_expired"
    )

    assert body["work"] == "discarded"
    assert not Judgment.objects.exists()
    assert_counts_exact(study)


def test_a_closed_study_answers_study_closed(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    study_close(study=study)

    body = reply(
        client.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 410, "study_closed"
    )

    assert body["ack"] is None
    assert not Judgment.objects.exists()


def test_a_browser_without_a_session_is_not_a_participant(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)

    stranger = Client()
    body = reply(
        stranger.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 403, "not_participant"
    )
    assert body["ack"] is None

    other = Client()
    arrive(other, study, "W2")
    reply(other.post(submit_url(study, lease), {"outcome": "a"}, **JSON), 403, "not_participant")
    assert not Judgment.objects.exists()


def test_every_item_page_gives_the_draft_its_key(client, researcher):
    study = arena(researcher)
    arrive(client, study, "W1")
    page = client.get(next_url(study))
    lease = page.context["assignment"]

    assert page.context["draft"] == {
        "key": f"{lease.token}:0",
        "expires_at": lease.expires_at.isoformat(),
        "submit_url": submit_url(study, lease),
    }


# ---------------------------------------------------------------------- two posts at once


def test_the_service_called_twice_stores_once(researcher):
    study = arena(researcher)
    worker = study.participants.create(source="prolific", external_id="W1")
    lease = assignment_next(participant=worker)
    later = timezone.now() + timedelta(seconds=30)

    first = judgment_submit(participant=worker, token=lease.token, data={"outcome": "a"}, now=later)
    second = judgment_submit(
        participant=worker, token=lease.token, data={"outcome": "b"}, now=later
    )

    assert (first.created, second.created) == (True, False)
    assert second.judgment.pk == first.judgment.pk
    assert Judgment.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_posts_of_one_lease_at_once_store_one(researcher):
    """Two tabs (or a retry racing the first post) send the same answer at the same instant:
    one is stored, the other acknowledged with it. Real row locks: PostgreSQL only."""
    require_postgres()
    study = arena_study(researcher, systems=("alpha", "beta"), images=5, min_seconds=0)
    for number in range(5):
        # A worker each (one worker's run of identical verdicts could be flagged), each on
        # an address of their own (the crowd's arrivals are limited per address).
        client = Client(REMOTE_ADDR=f"203.0.113.{number + 10}")
        arrive(client, study, f"W{number}")
        lease = serve(client, study)

        def post(lease=lease, client=client):
            tab = Client()
            tab.cookies.load({name: morsel.value for name, morsel in client.cookies.items()})
            response = tab.post(submit_url(study, lease), {"outcome": "a"}, **JSON)
            return response.status_code, response.json()

        results, errors = run_together([post, post])

        assert not errors, errors
        assert sorted(body["status"] for _, body in results) == ["already_stored", "stored"]
        stored = Judgment.objects.get(assignment=lease)
        assert {body["ack"]["judgment_id"] for _, body in results} == {stored.pk}
    assert Judgment.objects.count() == 5
    assert_counts_exact(study)


# ---------------------------------------------------------------------- VICR (feedback)


def vicr(researcher):
    return vicr_study(researcher, game=2, primes=(4, 4), tutorial_pairs=1, tutorial_pass=0)


def test_a_stored_vicr_rating_leads_to_its_feedback_page(client, researcher):
    study = vicr(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)

    body = reply(client.post(submit_url(study, lease), {"rating": "3"}, **JSON), 200, "stored")

    assert body["next_url"] == feedback_url(study, lease)
    assert body["ack"]["judgment_id"] == Judgment.objects.get().pk
    again = reply(
        client.post(submit_url(study, lease), {"rating": "3"}, **JSON), 200, "already_stored"
    )
    assert again["next_url"] == feedback_url(study, lease)
    assert again["ack"] == body["ack"] and Judgment.objects.count() == 1


def test_the_html_post_redirects_to_the_feedback_and_a_reload_stores_nothing(client, researcher):
    study = vicr(researcher)
    arrive(client, study, "W1")
    serve(client, study)
    client.post(submit_url(study, Assignment.objects.get()), {"rating": "3"})  # the tutorial
    lease = serve(client, study)

    response = client.post(submit_url(study, lease), {"rating": "2"})

    assert response.status_code == 302
    assert response["Location"] == feedback_url(study, lease)
    stored = Judgment.objects.count()
    for _ in range(2):  # the page, then a reload of it
        page = client.get(response["Location"])
        assert page.status_code == 200
        html = page.content.decode()
        shown = Caption.objects.get(pk=lease.item.spec["caption_id"])
        assert shown.text in html, "the feedback repeats the pair"
        assert f'href="{next_url(study)}"' in html
    assert Judgment.objects.count() == stored


def test_the_feedback_page_is_only_for_the_leases_own_participant(client, researcher):
    study = vicr(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)
    client.post(submit_url(study, lease), {"rating": "3"})

    other = Client()
    arrive(other, study, "W2")
    assert other.get(feedback_url(study, lease)).status_code == 404
    assert Client().get(feedback_url(study, lease)).status_code == 404
    assert client.get(feedback_url(study, lease)).status_code == 200


def test_the_feedback_page_of_an_unanswered_lease_is_not_found(client, researcher):
    study = vicr(researcher)
    arrive(client, study, "W1")
    lease = serve(client, study)

    assert client.get(feedback_url(study, lease)).status_code == 404


def test_a_vicr_item_page_gives_the_draft_its_key(client, researcher):
    study = vicr(researcher)
    arrive(client, study, "W1")
    page = client.get(next_url(study))
    lease = page.context["assignment"]

    assert page.context["draft"]["key"] == f"{lease.token}:0"
    assert page.context["draft"]["expires_at"] == lease.expires_at.isoformat()


# ---------------------------------------------------------------------- HUMANr (groups)


def test_a_humanr_trial_goes_on_and_the_groups_last_goes_to_its_feedback(client, researcher):
    study = humanr_study(researcher, images=12)
    worker = arrive(client, study, "P1")
    lease = do_group(worker, parts=8)
    spec = lease.item.spec

    def answer(part):
        left = client.get(next_url(study)).context
        assert left["draft"]["key"] == f"{lease.token}:{part}"
        on_left = reference_on_left(spec["seed"], lease.pk, part)
        data = {"part": part, "raw": 2 if on_left else 8, "left": left["left_caption"].pk}
        return client.post(submit_url(study, lease), data, **JSON)

    trial = reply(answer(8), 200, "stored")
    assert trial["next_url"] == next_url(study)
    assert trial["ack"]["part"] == 8
    last = reply(answer(9), 200, "stored")
    assert last["next_url"] == feedback_url(study, lease)
    assert "Group complete" in client.get(last["next_url"]).content.decode()
    # The reply of trial 8 was lost and the page sends it again: nothing new.
    data = {"part": 8, "raw": 5}
    again = reply(client.post(submit_url(study, lease), data, **JSON), 200, "already_stored")
    assert again["ack"] == trial["ack"]
    assert Judgment.objects.filter(assignment=lease).count() == 10


def test_a_late_trial_of_a_lapsed_group_is_discarded_and_the_group_kept(client, researcher):
    study = humanr_study(researcher, images=12)
    worker = arrive(client, study, "P1")
    lease = do_group(worker, parts=5)
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(1))
    assert assignment_release_expired() == 1

    data = {"part": 5, "raw": 5}
    body = reply(client.post(submit_url(study, lease), data, **JSON), 409, "lease_expired")

    assert body["work"] == "discarded" and body["ack"] is None
    assert "kept" in body["message"]
    assert Judgment.objects.filter(assignment=lease).count() == 5
    assert_counts_exact(study)
    # As the message says: served again, the group goes on at the trial that was refused.
    page = client.get(next_url(study))
    assert page.context["assignment"].pk == lease.pk
    assert page.context["draft"]["key"] == f"{lease.token}:5"
