"""Participants: crowd links (Prolific, MTurk), registered annotators, sessions, framing, and
the generic participant pages driven by the tests-only rating mode."""

from datetime import timedelta

import pytest
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Judgment, Participant, Study
from annotation.services.assignments import assignment_next, assignment_release_expired
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_close
from tests.factories.core import vehicle_study

pytestmark = pytest.mark.django_db

PROLIFIC = {"PROLIFIC_PID": "5f1e0c", "STUDY_ID": "st-1", "SESSION_ID": "se-1"}
MTURK = {
    "workerId": "A1WORKER",
    "assignmentId": "3ASSIGN",
    "hitId": "3HIT",
    "turkSubmitTo": "https://workersandbox.mturk.com",
}


def frame_ancestors(response) -> set[str]:
    """Who may frame the page: the sources of its CSP frame-ancestors directive (the rest of
    the policy is tests/annotation/test_csp.py's)."""
    for directive in response.headers["Content-Security-Policy"].split(";"):
        name, *sources = directive.split()
        if name == "frame-ancestors":
            return set(sources)
    raise AssertionError("the policy has no frame-ancestors")


MTURK_ORIGINS = {"https://www.mturk.com", "https://workersandbox.mturk.com"}


def crowd_url(study):
    return reverse("crowd_entry", args=[crowd_link_token(study)])


def join(client, study, params):
    response = client.get(crowd_url(study), params)
    assert response.status_code == 302, response.content.decode()
    assert response.url == reverse("participate_intro", args=[study.public_id])
    return Participant.objects.get(pk=client.session[f"capeval.participant.{study.pk}"])


def test_a_prolific_worker_joining_twice_in_their_browser_resumes_the_same_participant(
    client, researcher
):
    study = vehicle_study(researcher)
    first = join(client, study, PROLIFIC)
    lease = client.get(reverse("participate_next", args=[study.public_id])).context["assignment"]
    client.session.flush()  # the session may end; the browser cookie stays

    again = join(client, study, {**PROLIFIC, "PROLIFIC_PID": " 5f1e0c ", "SESSION_ID": "se-2"})

    assert again.pk == first.pk
    assert Participant.objects.count() == 1
    assert (first.source, first.external_id) == ("prolific", "5f1e0c")
    assert first.external_meta == PROLIFIC
    assert again.external_meta == {**PROLIFIC, "SESSION_ID": "se-2"}, "the latest visit wins"
    resumed = client.get(reverse("participate_next", args=[study.public_id]))
    assert resumed.context["assignment"].token == lease.token, "the same lease, resumed"


def test_an_mturk_worker_is_identified_by_worker_id(client, researcher):
    study = vehicle_study(researcher)

    participant = join(client, study, MTURK)

    assert (participant.source, participant.external_id) == ("mturk", "A1WORKER")
    assert participant.external_meta == MTURK


def test_one_worker_id_in_two_studies_is_two_participants(client, researcher):
    first, second = vehicle_study(researcher), vehicle_study(researcher, name="Second")

    assert join(client, first, PROLIFIC).pk != join(client, second, PROLIFIC).pk


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda token: token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "not valid"),
        (lambda token: "not-a-signed-token", "not valid"),
        (lambda token: token.replace(":", ":x", 1), "not valid"),
    ],
)
def test_a_forged_link_is_refused_with_a_clear_message(client, researcher, mangle, message):
    study = vehicle_study(researcher)

    response = client.get(reverse("crowd_entry", args=[mangle(crowd_link_token(study))]), PROLIFIC)

    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Participant.objects.exists()


def test_a_link_naming_another_study_id_cannot_be_made_without_the_key(client, researcher):
    study = vehicle_study(researcher)
    other = vehicle_study(researcher, name="Other")
    token = crowd_link_token(study)
    value, rest = token.split(":", 1)
    swapped = f"{other.public_id}:{rest}"
    assert value == str(study.public_id)
    with pytest.raises(signing.BadSignature):
        signing.TimestampSigner(salt="capeval.crowd-link").unsign(swapped)

    response = client.get(reverse("crowd_entry", args=[swapped]), PROLIFIC)

    assert response.status_code == 400
    assert not Participant.objects.exists()


def test_an_expired_link_is_refused(client, researcher, settings):
    study = vehicle_study(researcher)
    # The stable link expires CAPEVAL_LINK_MAX_AGE after the study last changed status.
    long_ago = timezone.now() - timedelta(seconds=settings.CAPEVAL_LINK_MAX_AGE + 60)
    Study.objects.filter(pk=study.pk).update(updated_at=long_ago)
    old_token = crowd_link_token(study)

    response = client.get(reverse("crowd_entry", args=[old_token]), PROLIFIC)

    assert response.status_code == 400
    assert "expired" in response.content.decode()
    assert not Participant.objects.exists()


def test_a_link_to_a_draft_or_closed_study_is_refused(client, researcher):
    draft = vehicle_study(researcher, live=False)
    closed = vehicle_study(researcher, name="Closed")
    study_close(study=closed)

    for study in (draft, closed):
        response = client.get(crowd_url(study), PROLIFIC)
        assert response.status_code == 410
        assert "not open" in response.content.decode()
        assert client.get(reverse("participate_intro", args=[study.public_id])).status_code in (
            302,
            404,
        )
    assert not Participant.objects.exists()


def test_a_link_without_a_worker_id_is_refused(client, researcher):
    study = vehicle_study(researcher)

    response = client.get(crowd_url(study), {"STUDY_ID": "st-1", "PROLIFIC_PID": "  "})

    assert response.status_code == 400
    assert "PROLIFIC_PID or workerId" in response.content.decode()
    assert not Participant.objects.exists()


def test_an_mturk_preview_shows_the_task_read_only_and_creates_nothing(client, researcher):
    study = vehicle_study(researcher)

    response = client.get(
        crowd_url(study), {**MTURK, "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "preview" in page.lower()
    assert reverse("participate_next", args=[study.public_id]) not in page
    assert not Participant.objects.exists()
    assert not any(key.startswith("capeval.participant") for key, _ in client.session.items())
    assert "X-Frame-Options" not in response.headers
    assert frame_ancestors(response) == MTURK_ORIGINS


def test_mturk_pages_may_be_framed_by_mturk_only_and_other_pages_never(client, researcher):
    study = vehicle_study(researcher)
    join(client, study, MTURK)
    pages = [
        reverse("participate_intro", args=[study.public_id]),
        reverse("participate_next", args=[study.public_id]),
    ]

    for url in pages:
        response = client.get(url)
        assert response.status_code == 200
        assert "X-Frame-Options" not in response.headers
        assert frame_ancestors(response) == MTURK_ORIGINS
    token = response.context["assignment"].token
    refused = client.post(
        reverse("participate_submit", args=[study.public_id, "nope"]), {"rating": 3}
    )
    assert refused.status_code == 404 and "X-Frame-Options" not in refused.headers

    prolific = Client()
    join(prolific, study, PROLIFIC)
    for url in pages:
        response = prolific.get(url)
        assert response.headers["X-Frame-Options"] == "DENY"
        assert frame_ancestors(response) == {"'none'"}
    assert token


def test_the_entry_link_may_be_framed_only_when_mturk_opens_it(client, researcher):
    study = vehicle_study(researcher)
    forged = reverse("crowd_entry", args=["forged-token"])

    prolific_entry = client.get(crowd_url(study), PROLIFIC)
    prolific_error = client.get(forged, PROLIFIC)
    mturk_entry = client.get(crowd_url(study), MTURK)
    mturk_error = client.get(forged, MTURK)

    for denied in (prolific_entry, prolific_error):
        assert denied.headers["X-Frame-Options"] == "DENY"
        assert frame_ancestors(denied) == {"'none'"}
    for framed in (mturk_entry, mturk_error):
        assert "X-Frame-Options" not in framed.headers
        assert frame_ancestors(framed) == MTURK_ORIGINS
    assert mturk_error.status_code == 400, "the worker reads why, inside MTurk's frame"


def test_a_crowd_worker_cannot_see_another_studys_pages(client, researcher):
    study = vehicle_study(researcher)
    other = vehicle_study(researcher, name="Secret other study")
    join(client, study, PROLIFIC)
    other_lease_holder = Participant.objects.create(
        study=other, source="prolific", external_id="someone-else"
    )

    other_lease = assignment_next(participant=other_lease_holder)

    intro = client.get(reverse("participate_intro", args=[other.public_id]))
    assert intro.status_code == 302 and "/accounts/login/" in intro.url
    for response in (
        client.get(reverse("participate_next", args=[other.public_id])),
        client.post(
            reverse("participate_submit", args=[other.public_id, other_lease.token]), {"rating": 3}
        ),
    ):
        assert response.status_code == 404
        assert "Secret other study" not in response.content.decode()
    assert not Judgment.objects.exists()
    assert Participant.objects.filter(study=other).count() == 1


def test_the_participant_flow_intro_next_submit_next_then_finished(client, researcher):
    study = vehicle_study(researcher, captions=2, target=1)
    join(client, study, PROLIFIC)
    next_url = reverse("participate_next", args=[study.public_id])

    intro = client.get(reverse("participate_intro", args=[study.public_id]))
    assert intro.status_code == 200 and next_url in intro.content.decode()

    shown = client.get(next_url)
    lease = shown.context["assignment"]
    assert shown.context["caption"].text in shown.content.decode()
    assert client.get(next_url).context["assignment"].token == lease.token, "a reload: same"

    bad = client.post(shown.context["submit_url"], {"rating": "7", "part": "0"})
    assert bad.status_code == 400
    assert "Choose a rating from 1 to 5." in bad.content.decode()
    assert not Judgment.objects.exists()

    done = client.post(shown.context["submit_url"], {"rating": "4", "part": "0"})
    assert done.status_code == 302 and done.url == next_url
    again = client.post(shown.context["submit_url"], {"rating": "1", "part": "0"})
    assert again.status_code == 302, "a double click is answered, not refused"
    assert list(Judgment.objects.values_list("payload", flat=True)) == [{"rating": 4}]

    second = client.get(next_url).context["assignment"]
    assert second.item_id != lease.item_id
    client.post(
        reverse("participate_submit", args=[study.public_id, second.token]), {"rating": "2"}
    )

    finished = client.get(next_url)
    assert finished.status_code == 200
    assert study.completion_code in finished.content.decode(), "earned after two answers"
    assert Judgment.objects.count() == 2


def test_a_submission_to_a_token_not_served_to_this_participant_stores_nothing(client, researcher):
    study = vehicle_study(researcher, captions=2, target=2)
    join(client, study, PROLIFIC)
    client.get(reverse("participate_next", args=[study.public_id]))

    someone = Client()
    join(someone, study, MTURK)
    their_lease = someone.get(reverse("participate_next", args=[study.public_id])).context[
        "assignment"
    ]

    for token in (their_lease.token, "made-up-token"):
        response = client.post(
            reverse("participate_submit", args=[study.public_id, token]), {"rating": "3"}
        )
        assert response.status_code == 404
        assert "not served to you" in response.content.decode()
    assert not Judgment.objects.exists()
    their_lease.refresh_from_db()
    assert their_lease.status == Assignment.Status.OPEN


def test_a_late_answer_after_the_lease_went_to_someone_else_is_refused(
    client, researcher, settings
):
    settings.CAPEVAL_LEASE_SECONDS = 60
    study = vehicle_study(researcher, captions=1, target=1)
    join(client, study, PROLIFIC)
    lease = client.get(reverse("participate_next", args=[study.public_id])).context["assignment"]

    assignment_release_expired(now=lease.expires_at + timedelta(seconds=1))
    # Someone else takes the freed slot (with room left, a late answer is stored: issue 42,
    # tests/annotation/test_submit_protocol.py).
    someone = Client()
    join(someone, study, {**PROLIFIC, "PROLIFIC_PID": "SOMEONE"})
    assert someone.get(reverse("participate_next", args=[study.public_id])).context["assignment"]

    response = client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]), {"rating": "3"}
    )

    assert response.status_code == 409
    assert "time ran out" in response.content.decode()
    assert not Judgment.objects.exists()


def test_registered_annotators_take_part_only_in_studies_they_were_added_to(
    client, researcher, annotator
):
    study = vehicle_study(researcher)
    intro_url = reverse("participate_intro", args=[study.public_id])
    assert client.get(intro_url).status_code == 302, "anonymous: asked to log in"

    client.force_login(annotator)
    assert client.get(intro_url).status_code == 404
    assert client.get(reverse("participate_next", args=[study.public_id])).status_code == 404
    assert not Participant.objects.exists()

    study.annotators.add(annotator)
    assert client.get(intro_url).status_code == 200
    lease = client.get(reverse("participate_next", args=[study.public_id])).context["assignment"]
    participant = Participant.objects.get()
    assert (participant.user, participant.source) == (annotator, "account")
    assert lease.participant_id == participant.pk
    home = client.get(reverse("home"))
    assert study in home.context["to_annotate"]


def test_an_accounts_participation_cannot_be_used_from_another_account(
    client, researcher, annotator, make_user
):
    study = vehicle_study(researcher)
    study.annotators.add(annotator)
    client.force_login(annotator)
    client.get(reverse("participate_next", args=[study.public_id]))
    participation = Participant.objects.get(user=annotator)

    intruder = Client()
    intruder.force_login(make_user("mallory"))
    session = intruder.session
    session[f"capeval.participant.{study.pk}"] = participation.pk
    session.save()

    assert intruder.get(reverse("participate_next", args=[study.public_id])).status_code == 404
