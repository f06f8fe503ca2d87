"""Researchers name a study's annotators and the researchers who share it; each new name is
invited and joins on accepting (issue 45, row 12; the attacks are in
``test_study_invitations.py``)."""

import pytest
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import StudyInvitation
from annotation.services.people import invitation_accept, study_set_people
from tests.factories.core import require_postgres, run_together

pytestmark = pytest.mark.django_db


def accept_all():
    for invitation in StudyInvitation.objects.filter(invitee__isnull=False):
        invitation_accept(invitation_id=invitation.pk, user=invitation.invitee)


def test_owner_invites_annotators_and_members_by_name(client, researcher, make_user, make_study):
    study = make_study("vicr")
    anna, bob = make_user("anna2"), make_user("bob2")
    colleague = make_user("carla", researcher=True)
    client.force_login(researcher)

    response = client.post(
        reverse("study_people", args=[study.pk]),
        {"annotators": "anna2, bob2", "members": "carla"},
    )

    assert response.status_code == 302
    assert not study.annotators.exists() and not study.members.exists()
    page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert "Invited: anna2, bob2, carla." in page
    assert "anna2 as annotator" in page and "carla as member" in page
    accept_all()
    assert set(study.annotators.all()) == {anna, bob}
    assert list(study.members.all()) == [colleague]
    page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert ">anna2 bob2</textarea>" in page and "Invited, not answered yet" not in page


def test_an_e_mail_address_reaches_the_one_account_that_has_it(researcher, make_user, make_study):
    study = make_study("vicr")
    anna = make_user("anna2")
    anna.email = "Anna@Example.org"
    anna.save()

    study_set_people(study=study, changed_by=researcher, annotators=["anna@example.org"])

    assert StudyInvitation.objects.get().invitee == anna
    accept_all()
    assert list(study.annotators.all()) == [anna]


def test_an_address_two_accounts_share_reaches_neither(researcher, make_user, make_study):
    study = make_study("vicr")
    for name in ("anna2", "anna3"):
        user = make_user(name)
        user.email = "lab@example.org"
        user.save()

    study_set_people(study=study, changed_by=researcher, annotators=["lab@example.org"])

    assert StudyInvitation.objects.get().invitee is None


def test_names_left_out_are_removed_or_their_invitations_withdrawn(
    researcher, make_user, make_study
):
    study = make_study("vicr")
    anna, bob = make_user("anna2"), make_user("bob2")
    study_set_people(study=study, changed_by=researcher, annotators=["anna2", "bob2"])
    invitation_accept(invitation_id=anna.study_invitations.get().pk, user=anna)

    study_set_people(study=study, changed_by=researcher, annotators=["anna2", "bob2"])
    assert StudyInvitation.objects.count() == 2, "a name already there is not invited again"
    study_set_people(study=study, changed_by=researcher, annotators=[])

    assert not study.annotators.exists()
    assert not StudyInvitation.objects.filter(invitee=bob).exists()


def test_a_researcher_naming_themselves_joins_at_once(researcher, make_study):
    study = make_study("vicr")
    study_set_people(study=study, changed_by=researcher, annotators=["rita"])
    assert list(study.annotators.all()) == [researcher]


def test_malformed_names_change_nothing_and_are_named(client, researcher, make_user, make_study):
    study = make_study("vicr")
    make_user("anna2")
    client.force_login(researcher)

    response = client.post(reverse("study_people", args=[study.pk]), {"annotators": "anna2 gh<ost"})

    assert response.status_code == 400
    assert "Not a user name or e-mail address: gh&lt;ost." in response.content.decode()
    assert not StudyInvitation.objects.exists()


def test_a_member_may_set_annotators_but_not_members(researcher, make_user, make_study):
    study = make_study("vicr")
    colleague = make_user("carla", researcher=True)
    study.members.add(colleague)
    make_user("anna2")

    study_set_people(study=study, changed_by=colleague, annotators=["anna2"])
    assert StudyInvitation.objects.get().invited_by == colleague
    with pytest.raises(ServiceError) as refused:
        study_set_people(study=study, changed_by=colleague, annotators=[], members=["carla"])
    assert refused.value.status == 403


def test_a_member_invitation_reaches_only_a_researcher(researcher, make_user, make_study):
    study = make_study("vicr")
    anna = make_user("anna2")

    study_set_people(study=study, changed_by=researcher, annotators=[], members=["anna2"])

    invitation = StudyInvitation.objects.get()
    assert invitation.invitee is None and invitation.pending
    assert not anna.study_invitations.exists()


def test_a_researcher_who_lost_the_role_cannot_accept_to_share(researcher, make_user, make_study):
    study = make_study("vicr")
    carla = make_user("carla", researcher=True)
    study_set_people(study=study, changed_by=researcher, annotators=[], members=["carla"])
    carla.is_researcher = False
    carla.save()

    with pytest.raises(ServiceError) as refused:
        invitation_accept(invitation_id=carla.study_invitations.get().pk, user=carla)
    assert refused.value.status == 403
    assert not study.members.exists()


def test_another_researcher_gets_404(client, other_researcher, make_study):
    study = make_study("vicr")
    client.force_login(other_researcher)
    response = client.post(reverse("study_people", args=[study.pk]), {"annotators": ""})
    assert response.status_code == 404


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(10))
def test_an_acceptance_racing_a_withdrawal_never_adds_the_person_left_out(
    researcher, annotator, make_study, attempt
):
    require_postgres()
    study = make_study("vicr")
    study_set_people(study=study, changed_by=researcher, annotators=[annotator.username])
    invitation = StudyInvitation.objects.get()

    _, errors = run_together(
        [
            lambda: invitation_accept(invitation_id=invitation.pk, user=annotator),
            lambda: study_set_people(study=study, changed_by=researcher, annotators=[]),
        ]
    )

    assert all(isinstance(error, ServiceError) and error.status == 404 for error in errors), [
        repr(error) for error in errors
    ]
    assert not study.annotators.exists(), "the save left them out"
    assert not StudyInvitation.objects.filter(accepted_at=None, declined_at=None).exists()
