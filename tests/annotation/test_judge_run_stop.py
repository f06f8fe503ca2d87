"""Stopping a judge run: by its soft time limit, and by a researcher's Stop button.

The runner asks the questions in a batch thread while the job's thread writes the progress.
When the soft time limit interrupts the job's thread, the job fails and the batch's answers
are never stored; the batch used to go on asking every question left, each one paid for.
Now it is told to stop: the requests in flight finish and no other is sent.

The soft time limit is Celery's ``SoftTimeLimitExceeded``, raised in the job's thread; here
the progress writer raises it at its first count of answers, through the real service
(``judge_run``) and its batch thread, against the loopback judge server.

A researcher's stop (``judge_run_stop``, the page's button and the API) is read by the
runner at its next progress tick: no new question is sent, the answers in by then are
stored, and a rerun of the same prompt version asks only the rest. Only who started the
run, or whose key it spends, may stop it.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.test import TestCase
from django.urls import reverse

from annotation.models import Job, JudgeAnswer, JudgeFailure
from annotation.services.jobs import job_finish
from annotation.services.judge_endpoints import judge_endpoint_save
from annotation.services.judge_runs import (
    judge_run,
    judge_run_request,
    judge_run_stop,
)
from annotation.services.runner import job_run
from annotation.tasks import enqueue
from tests.annotation.test_judge_runs import write_images
from tests.factories.judge_server import KEY, fake_judge, judge_on_loopback  # noqa: F401
from tests.factories.vicr import vicr_study

# The fake judge listens on the loopback, which the deployment must list to be reached.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("judge_on_loopback")]

#: At 2 replies in flight and 0.1 s a reply the server answers at most 20 questions a
#: second, and the runner reads a stop within a second or so: 60 pairs leave most of the
#: run unasked even on a slow, loaded machine.
PAIRS, CONCURRENCY, SECONDS_PER_REPLY = 60, 2, 0.1


def _batch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("judge-run")]


def _study(researcher):
    study = vicr_study(researcher, game=PAIRS)
    write_images(study)
    return study


def _save(study, url, **extra):
    judge_endpoint_save(study=study, name="toy-vlm", base_url=url, model="judge-7b",
                        api_key=KEY, concurrency=CONCURRENCY, by=study.owner, **extra)  # fmt: skip


def _asked(message: str) -> int:
    found = re.match(r"([\d,]+) of [\d,]+ asked", message)
    return int(found.group(1).replace(",", "")) if found else 0


def test_a_run_interrupted_by_its_time_limit_sends_no_new_question(researcher):
    study = _study(researcher)
    seen: list[int] = []

    def progress(percent: int, message: str = "") -> None:
        if _asked(message):
            seen.append(_asked(message))
            raise SoftTimeLimitExceeded()

    with fake_judge(lambda prompt, n: ("sleep", SECONDS_PER_REPLY, "4")) as server:
        _save(study, server.url)
        job = judge_run_request(study=study, by=study.owner)

        with pytest.raises(SoftTimeLimitExceeded):
            judge_run(job=job, progress=progress)

        deadline = time.monotonic() + 10
        while _batch_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _batch_threads(), "the batch thread ended"
        # At the interruption `seen[0]` answers were in and at most CONCURRENCY requests
        # in flight; a worker that finished one between the count and the stop may have
        # taken one more (a scheduling margin: replies take 0.1 s, the gap microseconds).
        assert seen and server.total <= seen[0] + 2 * CONCURRENCY
        assert server.total < PAIRS, "not every question was paid for"
    assert not JudgeAnswer.objects.exists(), "a failed run stores nothing"


def test_a_stopped_run_keeps_what_was_answered_and_a_rerun_asks_only_the_rest(researcher):
    study = _study(researcher)
    with fake_judge(lambda prompt, n: ("sleep", SECONDS_PER_REPLY, "4")) as server:
        _save(study, server.url)
        job = judge_run_request(study=study, by=researcher)
        stopped_at: list[int] = []

        def progress(percent: int, message: str = "") -> None:
            # The researcher presses Stop once some answers are in (same service as the
            # button; the runner reads it at its next tick, half a second later).
            if _asked(message) and not stopped_at:
                stopped_at.append(_asked(message))
                judge_run_stop(study=study, job_id=job.pk, by=researcher)

        outcome = judge_run(job=job, progress=progress)
        job_finish(job=job, **outcome)  # as the runner ends it

        result = outcome["result"]
        stored = JudgeAnswer.objects.filter(judge__study=study).count()
        assert stored == result["answered"] == server.total, "every answer sent is stored"
        assert result["not_asked"] == PAIRS - server.total > 0
        assert stopped_at[0] <= server.total, "what was in flight at the stop was kept"
        assert result["failed"] == 0 and not JudgeFailure.objects.exists()
        assert outcome["message"].startswith(f"Stopped by {researcher.username}: ")
        assert result["stopped_by"] == researcher.username

        # A rerun of the same prompt version asks only the questions not asked.
        before = server.total
        with TestCase.captureOnCommitCallbacks(execute=True):
            rerun = enqueue(judge_run_request(study=study, by=researcher))
        rerun.refresh_from_db()
        assert rerun.status == Job.Status.DONE, rerun.error
        assert server.total - before == result["not_asked"]
        assert rerun.result["already_stored"] == stored and rerun.result["not_asked"] == 0
        assert JudgeAnswer.objects.filter(judge__study=study).count() == PAIRS


def _stop_from_page(client, study, job):
    return client.post(reverse("study_judge_stop", args=[study.pk, job.pk]), HTTP_HX_REQUEST="true")


def _stop_from_api(client, study, job):
    return client.post(f"/api/studies/{study.pk}/judges/runs/{job.pk}/stop/")


@pytest.mark.parametrize("route", [_stop_from_page, _stop_from_api])
def test_a_queued_run_stopped_through_the_views_asks_nothing(route, researcher, client):
    study = _study(researcher)
    with fake_judge(lambda prompt, n: "4") as server:
        _save(study, server.url)
        job = judge_run_request(study=study, by=researcher)  # queued, not yet started
        client.force_login(researcher)

        answer = route(client, study, job)

        assert answer.status_code in (200, 202)
        if route is _stop_from_page:
            assert "Stopping: no new question is sent" in answer.content.decode()
        job.refresh_from_db()
        assert job.stop_requested_by == researcher and job.stop_requested_at
        job_run(job=job)
        job.refresh_from_db()
        assert job.status == Job.Status.DONE, job.error
        assert server.total == 0 and job.result["not_asked"] == PAIRS
        assert job.message.startswith(f"Stopped by {researcher.username}: 0 answered")
        # An ended run cannot be stopped: 409 (the page: its message in the fragment).
        again = route(client, study, job)
        assert "This run has already ended." in again.content.decode()
        assert again.status_code == (200 if route is _stop_from_page else 409)


@pytest.mark.parametrize("route", [_stop_from_page, _stop_from_api])
def test_a_member_cannot_stop_a_rivals_run(route, researcher, other_researcher, client):
    """A researcher the study is shared with, who neither started the run nor pays for it,
    cannot stop it (and is not offered the button)."""
    study = _study(researcher)
    study.members.add(other_researcher)
    with fake_judge(lambda prompt, n: "4") as server:
        _save(study, server.url)
        job = judge_run_request(study=study, by=researcher)
        client.force_login(other_researcher)
        page = client.get(reverse("study_judges", args=[study.pk]))
        assert page.status_code == 200 and "Stop the run" not in page.content.decode()

        answer = route(client, study, job)

        body = answer.content.decode()
        assert "Only the researcher who started this run" in body and "Traceback" not in body
        assert answer.status_code == (200 if route is _stop_from_page else 403)
        job.refresh_from_db()
        assert job.stop_requested_at is None
        # The one who started it sees the button.
        client.force_login(researcher)
        page = client.get(reverse("study_judges", args=[study.pk]))
        assert "Stop the run" in page.content.decode()
