"""The researcher's preview of the worker's view (issue 26, row 21): every mode's item page
renders for a researcher, and nothing (lease, participant, judgment) is recorded."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Judgment, Participant
from tests.factories.arena import arena_study
from tests.factories.humanr import humanr_study
from tests.factories.spans import spans_study
from tests.factories.thumb import thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db


#: Each mode's study factory and the form its item page shows.
CASES = {
    "thumb": (lambda researcher, make_study: thumb_study(make_study), 'id="thumb-form"'),
    "vicr": (lambda researcher, make_study: vicr_study(researcher), 'class="vicr-form"'),
    "humanr": (lambda researcher, make_study: humanr_study(researcher), 'class="hr-form"'),
    "arena": (lambda researcher, make_study: arena_study(researcher), 'class="arena-form"'),
    "spans": (lambda researcher, make_study: spans_study(researcher), 'class="spans-form"'),
}


@pytest.mark.parametrize("mode", sorted(CASES))
def test_a_researcher_previews_items_and_nothing_is_recorded(mode, researcher, make_study):
    make, form = CASES[mode]
    study = make(researcher, make_study)
    client = Client()
    client.force_login(researcher)
    url = reverse("study_preview", args=[study.pk])
    assert f'href="{url}"' in client.get(reverse("study_detail", args=[study.pk])).content.decode()
    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert form in text and 'id="preview-banner"' in text
    assert f'action="{url}?n=0"' in text
    answered = client.post(f"{url}?n=0", {"part": "0"})
    assert answered.status_code == 302 and answered["Location"] == f"{url}?n=1"
    second = client.get(answered["Location"]).content.decode()
    assert "that answer was not recorded" in second and form in second
    assert client.get(f"{url}?n=abc").status_code == 200
    assert client.get(f"{url}?n=999999").status_code == 302  # past the last item: the first
    for model in (Assignment, Judgment, Participant):
        assert not model.objects.filter(pk=0).exists()
    assert not Judgment.objects.filter(study=study).exists()
    assert not Assignment.objects.filter(item__study=study).exists()


def test_another_researcher_cannot_preview(researcher, make_user, make_study):
    study = thumb_study(make_study)
    rival = make_user("rival", researcher=True)
    client = Client()
    client.force_login(rival)
    assert client.get(reverse("study_preview", args=[study.pk])).status_code == 404
