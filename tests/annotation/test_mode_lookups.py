"""The study's mode is looked up once per request and per job (issue 44) and handed to
whatever needs it, instead of each function asking the registry again.

Every lookup goes through ``annotation.registry.get_mode``, which reads ``MODES``; the
modules hold their own reference to that function, so the tests swap the dictionary for
one that counts its reads, then drive the real views and jobs of a VICR crowd study.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation import registry
from annotation.models import Job, Judgment
from annotation.services.exports import export_request
from annotation.services.participants import crowd_link_token
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')


class _CountingModes(dict):
    """The registry's modes, counting the reads by name (each is one ``get_mode``)."""

    reads = 0

    def __getitem__(self, name):
        self.reads += 1
        return super().__getitem__(name)


@pytest.fixture
def lookups(monkeypatch):
    counting = _CountingModes(registry.MODES)
    monkeypatch.setattr(registry, "MODES", counting)
    return counting


def _lookups_of(lookups: _CountingModes, call, *args, **kwargs):
    """How many times ``call(*args, **kwargs)`` looked a mode up, and what it returned."""
    lookups.reads = 0
    result = call(*args, **kwargs)
    return lookups.reads, result


@pytest.fixture
def study(researcher):
    study = vicr_study(researcher, game=12, seconds_before_submit=0)
    for _ in range(3):  # other players: the report, the exports and the dashboard have rows
        play(in_game(study), 3)
    return study


@pytest.mark.parametrize("export_format", ["csv", "dataset"])
def test_an_export_job_looks_the_mode_up_once(researcher, study, lookups, export_format):
    job = export_request(study=study, user=researcher, export_format=export_format)
    count, _ = _lookups_of(lookups, job_run, job=job)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    assert count == 1


def test_a_report_job_and_its_page_look_the_mode_up_once(client, researcher, study, lookups):
    job = report_request(study=study, user=researcher)
    count, _ = _lookups_of(lookups, job_run, job=job)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    assert count == 1
    client.force_login(researcher)
    url = reverse("study_report", args=[study.pk])
    count, page = _lookups_of(lookups, client.get, url)
    assert page.status_code == 200 and count == 1


# Not the planner yet: its form (annotation/forms.py) looks the mode up on its own.
@pytest.mark.parametrize(
    "view", ["study_dashboard", "study_detail", "study_judges", "study_guidelines"]
)
def test_a_dashboard_poll_and_the_researcher_pages_look_the_mode_up_once(
    client, researcher, study, lookups, view
):
    client.force_login(researcher)
    url = reverse(view, args=[study.pk])
    count, page = _lookups_of(lookups, client.get, url)
    assert page.status_code == 200 and count == 1


def test_each_participation_request_looks_the_mode_up_once(client, study, lookups):
    in_game(study, "P1")
    entry = client.get(reverse("crowd_entry", args=[crowd_link_token(study)]) + "?PROLIFIC_PID=P1")
    assert entry.status_code == 302
    url = reverse("participate_next", args=[study.public_id])
    for _ in range(2):  # a fresh lease, then one with a submission behind
        count, page = _lookups_of(lookups, client.get, url)
        form = FORM_ACTION.search(page.content.decode())
        assert page.status_code == 200 and form and count == 1
        stored = Judgment.objects.count()
        answer = {"rating": "3", "part": "0"}
        count, answered = _lookups_of(lookups, client.post, form.group(1), answer)
        assert answered.status_code == 302 and count == 1
        assert Judgment.objects.count() == stored + 1
        count, feedback = _lookups_of(lookups, client.get, answered["Location"])
        assert feedback.status_code == 200 and count == 1
