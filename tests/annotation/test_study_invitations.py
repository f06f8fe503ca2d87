"""People join a study by accepting an invitation (issue 45, rows 11 and 12).

Attacks through the real pages and the API:

- Row 12: a researcher put any researcher among a study's members, or any account among
  its annotators, without their consent. Now the People form and the API invite; the person
  becomes a member or an annotator only by accepting on their own start page.
- Row 11: the People form told which accounts exist and what they are (a name of an
  account was taken, another refused; "Not researchers" for an annotator's name). Now
  anything shaped like a user name or an e-mail address gets the same answer, and the
  pages list no account but the study's own people.
"""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import models
from annotation.models import Study

pytestmark = pytest.mark.django_db


def saved_message(response) -> str:
    """What the People form said after a save: the flash on the study page it redirects to,
    or the form's own error."""
    html = response.content.decode()
    found = re.search(
        r'<ul class="messages">(.*?)</ul>|<p class="error" role="alert">(.*?)</p>', html, re.S
    )
    text = re.sub(r"<[^>]+>", " ", found.group(found.lastindex)) if found else ""
    return re.sub(r"\s+", " ", text).strip()


def people_post(client, study, **fields):
    body = {"annotators": "", **fields}
    return client.post(reverse("study_people", args=[study.pk]), body, follow=True)


def start_page(client) -> str:
    return client.get(reverse("home")).content.decode()


def invitation_form(html: str, action: str) -> str:
    """The URL of the start page's accept (or decline) form for the one invitation shown."""
    found = re.findall(rf'<form method="post" action="([^"]*/{action}/)"', html)
    assert len(found) == 1, f"expected one {action} form, found {found}"
    return found[0]


# ---------------------------------------------------------------------- row 12: consent


def test_a_researcher_named_as_member_joins_only_when_they_accept(
    client, researcher, make_user, make_study
):
    study = make_study("vicr", name="Shared study")
    carla = make_user("carla", researcher=True)
    client.force_login(researcher)

    people_post(client, study, members="carla")

    assert not study.members.filter(pk=carla.pk).exists(), "a member without her consent"
    colleague = type(client)()
    colleague.force_login(carla)
    assert colleague.get(reverse("study_detail", args=[study.pk])).status_code == 404
    page = start_page(colleague)
    assert "Shared study" in page and "rita" in page

    accepted = colleague.post(invitation_form(page, "accept"))

    assert accepted.status_code == 302
    assert study.members.filter(pk=carla.pk).exists()
    assert colleague.get(reverse("study_detail", args=[study.pk])).status_code == 200
    assert "/accept/" not in start_page(colleague)


def test_an_annotator_named_in_the_form_annotates_only_after_accepting(
    client, researcher, annotator, make_study
):
    study = make_study("vicr", name="Lab study")
    study.status = Study.Status.LIVE
    study.save()
    client.force_login(researcher)

    people_post(client, study, annotators=annotator.username)

    assert not study.annotators.exists(), "an annotator without their consent"
    own = type(client)()
    own.force_login(annotator)
    page = start_page(own)
    assert reverse("participate_intro", args=[study.public_id]) not in page
    own.post(invitation_form(page, "accept"))
    assert list(study.annotators.all()) == [annotator]
    assert reverse("participate_intro", args=[study.public_id]) in start_page(own)


def test_a_declined_invitation_adds_nobody_and_leaves_the_start_page(
    client, researcher, annotator, make_study
):
    study = make_study("vicr", name="Unwanted study")
    client.force_login(researcher)
    people_post(client, study, annotators=annotator.username)
    own = type(client)()
    own.force_login(annotator)

    own.post(invitation_form(start_page(own), "decline"))

    assert not study.annotators.exists()
    assert "You declined to join Unwanted study" in start_page(own)
    assert "Unwanted study" not in start_page(own)
    invitation = models.StudyInvitation.objects.get()
    assert invitation.declined_at is not None and invitation.accepted_at is None


def test_nobody_else_can_accept_an_invitation(client, researcher, make_user, make_study):
    study = make_study("vicr")
    carla = make_user("carla", researcher=True)
    client.force_login(researcher)
    people_post(client, study, members="carla")
    other = type(client)()
    other.force_login(carla)
    accept = invitation_form(start_page(other), "accept")

    # The inviter, a rival researcher and an anonymous browser try it.
    rival = type(client)()
    rival.force_login(make_user("rival", researcher=True))
    for stranger in (client, rival):
        assert stranger.post(accept).status_code == 404
    assert type(client)().post(accept).status_code == 302  # to the login page
    assert not study.members.exists()
    assert models.StudyInvitation.objects.get().accepted_at is None


def test_the_api_invites_members_and_annotators_too(researcher, make_user, make_study):
    study = make_study("vicr")
    carla = make_user("carla", researcher=True)
    anna = make_user("anna2")
    api = APIClient()
    api.force_authenticate(researcher)
    url = reverse("api_study_people", args=[study.pk])

    answer = api.put(url, {"annotators": ["anna2"], "members": ["carla"]}, format="json")

    assert answer.status_code == 200, answer.content
    assert not study.members.exists() and not study.annotators.exists()
    assert answer.json()["annotators"] == [] and answer.json()["members"] == []
    invited = {(row["name"], row["role"]) for row in answer.json()["invited"]}
    assert invited == {("anna2", "annotator"), ("carla", "member")}
    assert {i.invitee for i in models.StudyInvitation.objects.all()} == {carla, anna}


# ---------------------------------------------------------------------- row 11: probing


def test_the_people_form_answers_an_account_and_a_made_up_name_alike(
    client, researcher, make_user, make_study
):
    make_user("anna2")
    make_user("carla", researcher=True)
    client.force_login(researcher)

    answers = {}
    for field, name in [
        ("annotators", "anna2"),  # an annotator's account
        ("annotators", "carla"),  # a researcher's account
        ("annotators", "ghost"),  # nobody
        ("members", "carla"),  # a researcher
        ("members", "anna2"),  # an annotator, who cannot be a member
        ("members", "ghost"),  # nobody
        ("members", "ghost@example.org"),  # an address of nobody
    ]:
        study = make_study("vicr")
        response = people_post(client, study, **{field: name})
        answers[(field, name)] = (response.status_code, saved_message(response).replace(name, "X"))

    assert len({answers[key] for key in answers if key[0] == "annotators"}) == 1, answers
    assert len({answers[key] for key in answers if key[0] == "members"}) == 1, answers
    assert answers[("members", "ghost")][0] == 200


def test_the_study_page_lists_no_account_but_the_studys_own_people(
    client, researcher, make_user, make_study
):
    study = make_study("vicr")
    for name in ("zelda-annotator", "yves-researcher", "xena-admin"):
        make_user(name, researcher="researcher" in name, staff="admin" in name)
    client.force_login(researcher)

    page = client.get(reverse("study_detail", args=[study.pk])).content.decode()

    for name in ("zelda-annotator", "yves-researcher", "xena-admin"):
        assert name not in page
    assert "<select" not in page.split('id="people-heading"')[1].split("</section>")[0]
