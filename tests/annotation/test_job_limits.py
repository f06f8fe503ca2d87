"""Jobs always end, and job requests survive the task queue being down (issue 12).

- Time limits per kind: an import past its soft limit fails with its reason and stores
  nothing; a job that ignores the soft limit is stopped and failed at the hard limit.
- Attempts: a job whose worker keeps dying is failed after CAPEVAL_JOB_MAX_ATTEMPTS runs;
  one killed once finishes once, with nothing duplicated.
- Heartbeat and sweep: a job whose process vanished is failed when its page or the API is
  polled (the embedded default has no beat), and by beat.
- Queue down: a job request answers 503 with Retry-After and fails its job at once, never
  hangs on a silent Redis, and works again once Redis is back; participants never need it.

The worker tests start real Celery workers on PostgreSQL and Redis (``tests/factories/
workers.py``; slow jobs come from ``tests/factories/worker_hooks.py``); the queue tests
start a ``redis-server`` of their own and stop it. Run with: DATABASE_URL=postgres://...
REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/pytest tests/annotation/test_job_limits.py
"""

import io
import json
import socket
import threading
import time
import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from PIL import Image as PILImage
from rest_framework.test import APIClient

from annotation import selectors
from annotation.models import Caption, Image, Job, Judgment, Participant
from annotation.services.exports import export_request
from annotation.services.imports import import_request
from annotation.services.jobs import QUEUE_UNAVAILABLE, job_sweep_stale
from annotation.services.participants import crowd_link_token
from annotation.services.reports import report_request
from annotation.tasks import enqueue, run_job, sweep_stale_jobs
from tests.factories.core import vehicle_study
from tests.factories.machine import load_factor
from tests.factories.workers import (  # noqa: F401  (the fixtures are used by name)
    JOB_TIMEOUT_S,
    broker_fixture,
    free_port,
    job_row,
    judged_study,
    private_redis_fixture,
    start_worker_fixture,
    use_broker,
    wait_for,
)

IMAGES = 6


def png(number: int) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 6), (number * 40 % 256, 10, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def import_files() -> dict:
    """Upload fields of an import of IMAGES images and one caption each (a CSV)."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        for number in range(IMAGES):
            zf.writestr(f"img{number}.png", png(number))
    rows = ["image,system,caption"] + [f"img{n}.png,Human,picture {n}" for n in range(IMAGES)]
    return {
        "images_zip": SimpleUploadedFile("photos.zip", archive.getvalue(), "application/zip"),
        "captions": SimpleUploadedFile("captions.csv", "\n".join(rows).encode(), "text/csv"),
    }


def files_under(folder) -> list[Path]:
    root = Path(folder)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def with_limit(settings, kind: str, soft: int, hard: int) -> None:
    settings.CAPEVAL_JOB_TIME_LIMITS = {**settings.CAPEVAL_JOB_TIME_LIMITS, kind: (soft, hard)}


def utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def runs_logged(worker, job: Job) -> int:
    return worker.log(tail=10**7).count(f"of job {job.pk} started")


# ----------------------------------------------------------------------------------------
# Time limits, with a real worker
# ----------------------------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_an_import_past_its_soft_limit_fails_with_its_reason_and_stores_nothing(
    client, researcher, make_study, settings, tmp_path, start_worker
):
    settings.VAR_DIR = tmp_path / "var"
    with_limit(settings, "import", soft=3, hard=30)
    study = make_study("thumb")
    worker = start_worker(CAPEVAL_TEST_PROGRESS_DELAY_S=0.5)
    client.force_login(researcher)

    response = client.post(
        reverse("study_import", args=[study.pk]), {**import_files(), "purpose": "study"}
    )

    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert response.status_code == 302, response.content.decode()
    wait_for(lambda: job_row(job).is_finished, JOB_TIMEOUT_S, lambda: worker.log(), worker=worker)
    job = job_row(job)
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("Stopped after 3 seconds: the limit for import jobs."), job.error
    # Images take 0 to 60 percent, one pause of 0.5 s each: stopped among them.
    assert 0 < job.progress < 60, "stopped midway, with images staged"
    assert "Soft time limit (3s) exceeded" in worker.log(tail=10**7)
    assert (Image.objects.count(), Caption.objects.count()) == (0, 0)
    assert files_under(settings.MEDIA_ROOT) == [], "no image file, no staging folder left"
    assert files_under(settings.VAR_DIR / "uploads") == [], "the uploads are removed"
    time.sleep(2)  # a redelivery, if the message were not acknowledged, would show by now
    assert (job_row(job).attempts, runs_logged(worker, job)) == (1, 1)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_job_that_ignores_its_soft_limit_is_stopped_and_failed_at_the_hard_limit(
    researcher, settings, start_worker
):
    with_limit(settings, "report", soft=2, hard=4)
    study = judged_study(researcher, participants=2, items=3)
    worker = start_worker(CAPEVAL_TEST_PROGRESS_DELAY_S=60, CAPEVAL_TEST_IGNORE_SOFT_LIMIT=True)

    job = enqueue(report_request(study=study, user=researcher))

    wait_for(lambda: job_row(job).is_finished, 30, lambda: worker.log(), worker=worker)
    job = job_row(job)
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("Stopped after 4 seconds: the limit for report jobs."), job.error
    log = worker.log(tail=10**7)
    assert "test hook: soft time limit ignored" in log
    assert "Hard time limit (4s) exceeded" in log
    time.sleep(2)
    assert (job_row(job).attempts, runs_logged(worker, job)) == (1, 1), "not run again"


@pytest.mark.django_db(transaction=True)
def test_a_job_is_published_with_the_time_limits_of_its_kind(
    client, researcher, settings, private_redis
):
    """The limits travel with each message (the worker applies them); see also below."""
    with_limit(settings, "export", soft=120, hard=150)
    study = vehicle_study(researcher, captions=2)
    queue = f"capeval-test-{uuid.uuid4().hex[:12]}"
    client.force_login(researcher)
    with use_broker(settings, private_redis.url, queue):
        client.post(reverse("study_export", args=[study.pk]), {"format": "csv"})
    message = json.loads(private_redis.client().lindex(queue, 0))
    job = Job.objects.get(study=study)
    assert message["headers"]["task"] == "annotation.tasks.run_job"
    assert message["headers"]["argsrepr"] == f"({job.pk},)"
    assert message["headers"]["timelimit"] == [150, 120], "(hard, soft) in seconds"


# ----------------------------------------------------------------------------------------
# Attempts, with a real worker killed
# ----------------------------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_keeps_dying_is_failed_after_the_maximum_attempts(
    researcher, settings, start_worker
):
    settings.CAPEVAL_JOB_MAX_ATTEMPTS = 3
    study = judged_study(researcher, participants=2, items=3)
    worker = start_worker(CAPEVAL_TEST_PROGRESS_DELAY_S=60)
    job = enqueue(report_request(study=study, user=researcher))

    for run in (1, 2, 3):
        wait_for(
            lambda run=run: (
                runs_logged(worker, job) == run and job_row(job).status == Job.Status.RUNNING
            ),
            JOB_TIMEOUT_S,
            lambda: f"{job_row(job).__dict__}\n{worker.log()}",
            worker=worker,
        )
        last_start = job_row(job).started_at
        worker.kill_pool()

    wait_for(lambda: job_row(job).is_finished, JOB_TIMEOUT_S, lambda: worker.log(), worker=worker)
    job = job_row(job)
    assert job.status == Job.Status.FAILED
    assert job.error.startswith(
        f"The worker running this job stopped 3 times; last started at {utc(last_start)}."
    ), job.error
    log = worker.log(tail=10**7)
    assert log.count("WorkerLostError") >= 3
    assert (job.attempts, runs_logged(worker, job)) == (3, 3), "ran 3 times, not a 4th"


def request_job(kind: str, study, researcher) -> Job:
    if kind == "export":
        return enqueue(export_request(study=study, user=researcher, export_format="csv"))
    if kind == "report":
        return enqueue(report_request(study=study, user=researcher))
    return enqueue(import_request(study=study, user=researcher, **import_files()))


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("kind", "delay_s", "killed_at_percent"),
    [("import", 0.5, 20), ("export", 0.3, 30), ("report", 1.0, 10)],
)
def test_a_job_whose_worker_dies_once_finishes_once_with_nothing_duplicated(
    kind, delay_s, killed_at_percent, researcher, make_study, settings, tmp_path, start_worker
):
    settings.VAR_DIR = tmp_path / "var"
    if kind == "import":
        study = make_study("thumb")
    else:
        study = judged_study(researcher, participants=4, items=150)
    worker = start_worker(CAPEVAL_TEST_PROGRESS_DELAY_S=delay_s, chunk_size=100)
    job = request_job(kind, study, researcher)
    wait_for(
        lambda: (
            (row := job_row(job)).status == Job.Status.RUNNING and row.progress >= killed_at_percent
        ),
        JOB_TIMEOUT_S,
        lambda: f"{job_row(job).__dict__}\n{worker.log()}",
        worker=worker,
    )

    worker.kill_pool()

    wait_for(lambda: job_row(job).is_finished, JOB_TIMEOUT_S, lambda: worker.log(), worker=worker)
    job = job_row(job)
    assert job.status == Job.Status.DONE, job.error
    assert (job.attempts, runs_logged(worker, job)) == (2, 2)
    assert Job.objects.filter(study=study).count() == 1
    if kind == "import":
        assert Image.objects.filter(study=study).count() == IMAGES
        assert Caption.objects.filter(study=study).count() == IMAGES, "one per CSV row"
        assert (job.result["images_new"], job.result["captions"]) == (IMAGES, IMAGES)
        assert files_under(settings.VAR_DIR / "uploads") == []
    elif kind == "export":
        root = Path(django_settings.CAPEVAL_EXPORT_DIR)
        data = [p for p in files_under(root) if p.suffix == ".csv"]
        assert [p.name for p in data] == [job.result_file], "one result file"
        lines = data[0].read_text().splitlines()
        assert len(lines) == len(set(lines)) == 1 + Judgment.objects.filter(study=study).count()
        assert not [p for p in files_under(root) if p.name.endswith(".part")]
    else:
        assert job.result == {"judgments": 600}
        assert selectors.report_latest(study).pk == job.pk


# ----------------------------------------------------------------------------------------
# Heartbeat and sweep
# ----------------------------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_vanished_is_failed_when_its_page_is_polled(
    client, researcher, settings, start_worker
):
    settings.CAPEVAL_JOB_HEARTBEAT_SECONDS = 1
    settings.CAPEVAL_JOB_STALE_SECONDS = 4
    study = judged_study(researcher, participants=2, items=3)
    # One silent step of a minute: no progress call, only the heartbeat shows it is alive.
    worker = start_worker(CAPEVAL_TEST_PROGRESS_DELAY_S=60)
    job = enqueue(report_request(study=study, user=researcher))
    wait_for(
        lambda: job_row(job).status == Job.Status.RUNNING, JOB_TIMEOUT_S, worker.log, worker=worker
    )
    first_beat = job_row(job).heartbeat_at
    wait_for(lambda: job_row(job).heartbeat_at >= first_beat + timedelta(seconds=2), 10, worker.log)
    assert job_row(job).progress == 0, "alive without any progress call"
    client.force_login(researcher)
    url = reverse("job_status", args=[job.pk])

    worker.kill()  # the whole worker: its message waits an hour for redelivery

    alive = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert job_row(job).status == Job.Status.RUNNING and 'hx-trigger="every 1s"' in alive
    time.sleep(settings.CAPEVAL_JOB_STALE_SECONDS + 1)
    gone = client.get(url, headers={"HX-Request": "true"}).content.decode()
    job = job_row(job)
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("The process running this job stopped (no sign of life since ")
    assert "no sign of life since" in gone and "hx-trigger" not in gone, "polling stops"


def left_running(study, researcher, *, silent_for: timedelta, kind=Job.Kind.IMPORT) -> Job:
    """A job as a web request killed mid-import leaves it: running, its last beat long ago."""
    now = timezone.now()
    return Job.objects.create(
        kind=kind,
        study=study,
        created_by=researcher,
        status=Job.Status.RUNNING,
        attempts=1,
        progress=40,
        started_at=now - silent_for - timedelta(minutes=1),
        heartbeat_at=now - silent_for,
    )


@pytest.mark.django_db
def test_polling_a_job_whose_request_was_killed_fails_it_and_stops_polling(
    client, researcher, make_study
):
    study = make_study("thumb")
    dead = left_running(study, researcher, silent_for=timedelta(minutes=6))
    alive = left_running(study, researcher, silent_for=timedelta(seconds=20))
    client.force_login(researcher)

    dead_html = client.get(
        reverse("job_status", args=[dead.pk]), headers={"HX-Request": "true"}
    ).content.decode()
    alive_html = client.get(
        reverse("job_status", args=[alive.pk]), headers={"HX-Request": "true"}
    ).content.decode()

    dead.refresh_from_db()
    assert dead.status == Job.Status.FAILED and dead.finished_at is not None
    assert dead.error.startswith(
        f"The process running this job stopped (no sign of life since {utc(dead.heartbeat_at)})."
    ), dead.error
    assert "no sign of life" in dead_html and "hx-trigger" not in dead_html
    assert job_row(alive).status == Job.Status.RUNNING and 'hx-trigger="every 1s"' in alive_html


@pytest.mark.django_db
def test_the_api_fails_a_vanished_job_when_it_is_read(researcher, make_study):
    study = make_study("thumb")
    dead = left_running(study, researcher, silent_for=timedelta(minutes=6), kind=Job.Kind.EXPORT)
    other = left_running(study, researcher, silent_for=timedelta(minutes=7))
    api = APIClient()
    api.force_authenticate(researcher)

    one = api.get(reverse("api_job", args=[dead.pk])).json()
    listed = api.get(reverse("api_study_jobs", args=[study.pk])).json()

    assert one["status"] == "failed" and "no sign of life" in one["error"]
    assert {row["id"]: row["status"] for row in listed} == {dead.pk: "failed", other.pk: "failed"}


@pytest.mark.django_db
def test_the_sweep_spares_live_and_waiting_jobs_and_fails_lost_ones(
    researcher, make_study, settings
):
    study = make_study("thumb")
    now = timezone.now()
    stale = left_running(study, researcher, silent_for=timedelta(seconds=301))
    live = left_running(study, researcher, silent_for=timedelta(seconds=299))
    # A row from before heartbeats: its start stands in for its last sign of life.
    legacy = left_running(study, researcher, silent_for=timedelta(hours=1))
    Job.objects.filter(pk=legacy.pk).update(heartbeat_at=None)
    waiting = Job.objects.create(kind=Job.Kind.EXPORT, study=study)
    lost = Job.objects.create(kind=Job.Kind.EXPORT, study=study)
    Job.objects.filter(pk=lost.pk).update(created_at=now - timedelta(hours=25))
    done = Job.objects.create(kind=Job.Kind.EXPORT, study=study, status=Job.Status.DONE)
    Job.objects.filter(pk=done.pk).update(created_at=now - timedelta(days=3))

    assert sweep_stale_jobs.delay().get() == 3  # beat's task: every job
    assert dict(Job.objects.values_list("pk", "status")) == {
        stale.pk: "failed",
        legacy.pk: "failed",
        lost.pk: "failed",
        live.pk: "running",
        waiting.pk: "queued",
        done.pk: "done",
    }
    assert Job.objects.get(pk=lost.pk).error.startswith(
        "No worker started this job within 24 hours"
    )
    assert Job.objects.get(pk=legacy.pk).error.startswith(
        f"The process running this job stopped (no sign of life since {utc(legacy.started_at)})."
    )
    assert job_sweep_stale() == 0, "nothing left to sweep"
    schedule = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "annotation.tasks.sweep_stale_jobs" in schedule


@pytest.mark.django_db
def test_a_job_out_of_attempts_is_failed_instead_of_run_again(researcher, make_study):
    study = make_study("thumb")
    started = timezone.now() - timedelta(minutes=3)
    # What three runs killed by the OOM killer leave: running, started three times.
    job = Job.objects.create(
        kind=Job.Kind.IMPORT,
        study=study,
        status=Job.Status.RUNNING,
        attempts=3,
        started_at=started,
        heartbeat_at=started,
        params={"captions": "/nonexistent.csv"},
    )

    run_job.delay(job.pk)  # the redelivery, run eagerly

    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and job.attempts == 3
    assert job.error.startswith(
        f"The worker running this job stopped 3 times; last started at {utc(started)}."
    ), job.error


@pytest.mark.django_db
def test_an_import_stopped_inside_its_transaction_stores_nothing(
    researcher, make_study, settings, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    """The soft limit may strike anywhere: inside the one INSERT transaction too."""
    settings.VAR_DIR = tmp_path / "var"
    study = make_study("thumb")

    def interrupted(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(Caption.objects, "bulk_create", interrupted)
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(import_request(study=study, user=researcher, **import_files()))

    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("Stopped after 30 minutes: the limit for import jobs."), job.error
    assert (Image.objects.count(), Caption.objects.count()) == (0, 0), "images rolled back too"
    assert files_under(settings.MEDIA_ROOT) == [], "the files it had placed are removed"
    assert files_under(settings.VAR_DIR / "uploads") == []


# ----------------------------------------------------------------------------------------
# The task queue down
# ----------------------------------------------------------------------------------------


def ask_for(route: str, client, researcher, study, draft):
    """Request a job the way a researcher does; return the response and the job's study."""
    if route == "export page":
        return client.post(reverse("study_export", args=[study.pk]), {"format": "csv"}), study
    if route == "export page (htmx)":
        return client.post(
            reverse("study_export", args=[study.pk]),
            {"format": "csv"},
            headers={"HX-Request": "true"},
        ), study
    if route == "report page":
        return client.post(reverse("study_report", args=[study.pk])), study
    if route == "import page":
        form = {**import_files(), "purpose": "study"}
        return client.post(reverse("study_import", args=[draft.pk]), form), draft
    api = APIClient()
    api.force_authenticate(researcher)
    return api.post(reverse("api_study_exports", args=[study.pk]), {"format": "csv"}), study


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "route", ["export page", "export page (htmx)", "report page", "import page", "export API"]
)
def test_a_job_request_with_redis_down_says_so_and_works_once_redis_is_back(
    route, client, researcher, make_study, settings, tmp_path, private_redis
):
    settings.VAR_DIR = tmp_path / "var"
    study = vehicle_study(researcher, captions=2)
    draft = make_study("thumb", name="Draft")
    queue = f"capeval-test-{uuid.uuid4().hex[:12]}"
    client.force_login(researcher)
    with use_broker(settings, private_redis.url, queue):
        private_redis.stop()

        started = time.monotonic()
        refused, job_study = ask_for(route, client, researcher, study, draft)
        took = time.monotonic() - started

        job = Job.objects.get(study=job_study)
        assert (job.status, job.error) == (Job.Status.FAILED, QUEUE_UNAVAILABLE), "not left queued"
        # Wall-clock by nature (socket timeouts), so scaled by the machine's load.
        assert took < 5 * load_factor(), f"the request waited {took:.1f} s for Redis"
        body = refused.content.decode()
        if route == "export page (htmx)":
            # htmx swaps only 2xx answers: the failed job's fragment shows the reason.
            assert refused.status_code == 200 and f'id="job-{job.pk}"' in body
            assert "The task queue is unavailable" in body and "hx-trigger" not in body
        elif route == "export API":
            assert refused.status_code == 503 and refused["Retry-After"] == "60"
            assert refused.json() == {"detail": QUEUE_UNAVAILABLE, "code": "unavailable"}
        else:
            assert refused.status_code == 503 and refused["Retry-After"] == "60"
            assert "The task queue is unavailable; your request was not started." in body
        assert files_under(settings.VAR_DIR / "uploads") == [], "an import's uploads go too"

        private_redis.start()
        accepted, _ = ask_for(route, client, researcher, study, draft)

    assert accepted.status_code in (200, 202, 302), accepted.content.decode()[:500]
    again = Job.objects.filter(study=job_study).exclude(pk=job.pk).get()
    assert again.status == Job.Status.QUEUED
    message = json.loads(private_redis.client().lindex(queue, 0))
    assert message["headers"]["argsrepr"] == f"({again.pk},)", "its task is in the queue"


@pytest.mark.django_db(transaction=True)
def test_a_job_request_to_a_silent_redis_gives_up_within_seconds(client, researcher, settings):
    """A Redis that accepts connections and never answers (hung, or a dead peer)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections complete in the kernel's backlog; nothing ever reads
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    study = vehicle_study(researcher, captions=2)
    client.force_login(researcher)
    answers = []
    try:
        with use_broker(settings, url, "capeval-test-silent"):

            def ask() -> None:
                try:
                    answers.append(
                        client.post(reverse("study_export", args=[study.pk]), {"format": "csv"})
                    )
                finally:
                    connection.close()  # the thread's own; the test database is dropped later

            asking = threading.Thread(target=ask, daemon=True)
            started = time.monotonic()
            asking.start()
            asking.join(timeout=20 * load_factor())
            took = time.monotonic() - started
    finally:
        silent.close()  # resets the connections, so a request still waiting ends
    assert not asking.is_alive() and answers, "the request hung on the silent Redis"
    assert took < 8 * load_factor(), f"the request waited {took:.1f} s"
    assert answers[0].status_code == 503 and answers[0]["Retry-After"] == "60"
    assert Job.objects.get(study=study).status == Job.Status.FAILED


@pytest.mark.django_db(transaction=True)
def test_participants_answer_with_the_broker_down(client, researcher, settings):
    study = vehicle_study(researcher, captions=2, target=1)
    nothing_listens = f"redis://127.0.0.1:{free_port()}/0"
    with use_broker(settings, nothing_listens, "capeval-test-down"):
        joined = client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]),
            {"PROLIFIC_PID": "p-1", "STUDY_ID": "s-1", "SESSION_ID": "x"},
        )
        next_url = reverse("participate_next", args=[study.public_id])
        answered = []
        for _ in range(2):
            shown = client.get(next_url)
            assert shown.status_code == 200
            answered.append(client.post(shown.context["submit_url"], {"rating": "4", "part": "0"}))
        finished = client.get(next_url)

    assert joined.status_code == 302
    assert [response.status_code for response in answered] == [302, 302]
    assert Judgment.objects.filter(study=study).count() == 2
    assert Participant.objects.get(study=study).external_id == "p-1"
    assert study.completion_code in finished.content.decode()
