"""Closing asks first and says what it does; a closed study can be reopened (issue 11)."""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.assignments import assignment_next
from annotation.services.studies import study_close, study_reopen
from tests.factories.core import crowd_participant, vehicle_study


def page(client, study) -> str:
    return client.get(reverse("study_detail", args=[study.pk])).content.decode()


def test_the_study_page_asks_before_closing(client, researcher):
    study = vehicle_study(researcher)
    client.force_login(researcher)
    html = page(client, study)
    confirm = reverse("study_close_confirm", args=[study.pk])
    # No one-click close: the button leads to the confirmation page.
    assert not re.search(r'<button[^>]*value="close"', html)
    assert f'href="{confirm}"' in html

    asked = client.get(confirm)
    assert asked.status_code == 200
    text = asked.content.decode()
    assert "0 judgments stored stay" in text
    assert "reopen" in text.lower()
    assert re.search(r'<button[^>]*name="action"[^>]*value="close"', text)
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE, "asking changes nothing"


def test_the_confirmation_counts_the_leases_an_answer_to_which_is_refused(client, researcher):
    study = vehicle_study(researcher)
    assignment_next(participant=crowd_participant(study, "worker-1"))
    client.force_login(researcher)
    text = client.get(reverse("study_close_confirm", args=[study.pk])).content.decode()
    assert "1 item held by participants now" in text


def test_close_then_reopen_through_the_pages(client, researcher):
    study = vehicle_study(researcher, captions=2)
    items = sorted(study.items.values_list("pk", flat=True))
    client.force_login(researcher)
    status_url = reverse("study_status", args=[study.pk])

    assert client.post(status_url, {"action": "close"}).status_code == 302
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED
    html = page(client, study)
    assert re.search(r'<button[^>]*value="reopen"', html)

    assert client.post(status_url, {"action": "reopen"}).status_code == 302
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE
    assert sorted(study.items.values_list("pk", flat=True)) == items, "no item rebuilt"
    # Served again.
    assert assignment_next(participant=crowd_participant(study, "worker-2")) is not None


def test_reopening_a_study_that_is_not_closed_is_refused_on_a_page_saying_why(client, researcher):
    study = vehicle_study(researcher)
    client.force_login(researcher)
    response = client.post(reverse("study_status", args=[study.pk]), {"action": "reopen"})
    assert response.status_code == 409
    assert "Only a closed study can be reopened" in response.content.decode()
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE


def test_a_study_closed_before_it_had_items_reopens_as_a_draft(researcher):
    study = vehicle_study(researcher, live=False)
    study_close(study=study)
    study_reopen(study=study)
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT
    with pytest.raises(ServiceError):
        study_reopen(study=study)


def test_the_api_reopens_a_closed_study_and_refuses_a_live_one(researcher, other_researcher):
    study = vehicle_study(researcher)
    api = APIClient()
    api.force_authenticate(researcher)
    url = reverse("api_study_reopen", args=[study.pk])

    refused = api.post(url)
    assert refused.status_code == 409 and "closed" in refused.json()["detail"]

    api.post(reverse("api_study_close", args=[study.pk]))
    reopened = api.post(url)
    assert (reopened.status_code, reopened.json()["status"]) == (200, "live")

    stranger = APIClient()
    stranger.force_authenticate(other_researcher)
    api.post(reverse("api_study_close", args=[study.pk]))
    assert stranger.post(url).status_code == 404
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED
