"""Researchers choose a study's annotators and the researchers who share it."""

import pytest
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.services.studies import study_set_people

pytestmark = pytest.mark.django_db


def test_owner_sets_annotators_and_members_by_name(client, researcher, make_user, make_study):
    study = make_study("vicr")
    anna, bob = make_user("anna2"), make_user("bob2")
    colleague = make_user("carla", researcher=True)
    client.force_login(researcher)

    response = client.post(
        reverse("study_people", args=[study.pk]),
        {"annotators": "anna2, bob2", "members": "carla"},
    )

    assert response.status_code == 302
    assert set(study.annotators.all()) == {anna, bob}
    assert list(study.members.all()) == [colleague]
    page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert "anna2 bob2" in page or "bob2 anna2" in page


def test_unknown_names_change_nothing_and_are_named(client, researcher, make_user, make_study):
    study = make_study("vicr")
    make_user("anna2")
    client.force_login(researcher)

    response = client.post(reverse("study_people", args=[study.pk]), {"annotators": "anna2 ghost"})

    assert response.status_code == 400
    assert "ghost" in response.content.decode()
    assert not study.annotators.exists()


def test_a_member_may_set_annotators_but_not_members(researcher, make_user, make_study):
    study = make_study("vicr")
    colleague = make_user("carla", researcher=True)
    study.members.add(colleague)
    make_user("anna2")

    study_set_people(study=study, changed_by=colleague, annotators=["anna2"])
    assert study.annotators.get().username == "anna2"
    with pytest.raises(ServiceError) as refused:
        study_set_people(study=study, changed_by=colleague, annotators=[], members=["carla"])
    assert refused.value.status == 403


def test_members_must_be_researchers(researcher, make_user, make_study):
    study = make_study("vicr")
    make_user("anna2")
    with pytest.raises(ServiceError, match="Not researchers: anna2"):
        study_set_people(study=study, changed_by=researcher, annotators=[], members=["anna2"])


def test_another_researcher_gets_404(client, other_researcher, make_study):
    study = make_study("vicr")
    client.force_login(other_researcher)
    response = client.post(reverse("study_people", args=[study.pk]), {"annotators": ""})
    assert response.status_code == 404
