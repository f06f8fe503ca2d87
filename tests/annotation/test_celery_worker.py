"""Real Celery workers on Redis and PostgreSQL run export jobs, and finish them after a crash.

The harness (workers as subprocesses, their generated settings, the tests' Redis database
and queue) is ``tests/factories/workers.py``; for the crash test the visibility timeout is
a few seconds (production's exceeds the longest job time limit).

Recovery works in two ways, both tested:

- the whole worker dies (SIGKILL, a lost machine): the message was never acknowledged
  (``acks_late``), so Redis hands it to the next worker once the visibility timeout has
  passed; ``run_job`` finds the job RUNNING and starts it again from scratch;
- only the pool process dies: the worker rejects and requeues the message at once
  (``reject_on_worker_lost``).

Run with: DATABASE_URL=postgres://postgres@127.0.0.1:5432/capeval
REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/pytest tests/annotation/test_celery_worker.py
"""

import csv
import os
import signal
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from annotation.models import Job, Judgment, Study
from annotation.services.exports import export_request
from annotation.tasks import enqueue
from tests.factories.workers import (  # noqa: F401  (the fixtures are used by name)
    JOB_TIMEOUT_S,
    broker_fixture,
    job_row,
    judged_study,
    start_worker_fixture,
    wait_for,
)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def assert_complete_export(job: Job, study: Study) -> None:
    job = job_row(job)
    assert job.status == Job.Status.DONE, job.error
    root = Path(django_settings.CAPEVAL_EXPORT_DIR)
    with (root / job.result_file).open(newline="", encoding="utf-8") as data:
        ids = [int(row["judgment_id"]) for row in csv.DictReader(data)]
    expected = list(
        Judgment.objects.filter(study=study).order_by("id").values_list("id", flat=True)
    )
    assert ids == expected, "every judgment once, in order"
    assert (root / job.result["datasheet"]).is_file()
    assert not list(root.glob(".*.part")), "no temporary file is left"


def test_worker_runs_an_export_job(researcher, start_worker):
    study = judged_study(researcher, participants=5, items=60)
    start_worker()

    job = enqueue(export_request(study=study, user=researcher, export_format="csv"))

    wait_for(lambda: job_row(job).is_finished, JOB_TIMEOUT_S, lambda: str(job_row(job)))
    assert_complete_export(job, study)
    assert job_row(job).result["rows"] == 300


def test_export_completes_after_its_worker_is_killed_mid_task(researcher, start_worker):
    study = judged_study(researcher, participants=10, items=100)
    options = {"chunk_size": 50, "chunk_delay_s": 0.2, "visibility_timeout_s": 6}
    first = start_worker(**options)
    job = enqueue(export_request(study=study, user=researcher, export_format="csv"))
    wait_for(
        lambda: job_row(job).progress >= 15, JOB_TIMEOUT_S, lambda: str(job_row(job)), worker=first
    )

    first.kill()

    stuck = job_row(job)
    assert stuck.status == Job.Status.RUNNING and stuck.progress < 100
    root = Path(django_settings.CAPEVAL_EXPORT_DIR)
    assert not any(root.glob("*.csv")), "no data file under its final name"
    assert list(root.glob(".*.part")), "the killed run left its half-written temporary file"
    second = start_worker(**options)
    wait_for(
        lambda: job_row(job).is_finished,
        JOB_TIMEOUT_S,
        lambda: f"{job_row(job)}\n{second.log()}",
        worker=second,
    )
    assert_complete_export(job, study)


def test_export_completes_after_its_pool_process_is_killed(researcher, start_worker):
    study = judged_study(researcher, participants=10, items=100)
    worker = start_worker(chunk_size=50, chunk_delay_s=0.2)
    job = enqueue(export_request(study=study, user=researcher, export_format="jsonl"))
    wait_for(
        lambda: job_row(job).progress >= 15, JOB_TIMEOUT_S, lambda: str(job_row(job)), worker=worker
    )

    for pid in worker.pool_pids():
        os.kill(pid, signal.SIGKILL)

    wait_for(
        lambda: job_row(job).is_finished,
        JOB_TIMEOUT_S,
        lambda: f"{job_row(job)}\n{worker.log()}",
        worker=worker,
    )
    job = job_row(job)
    assert job.status == Job.Status.DONE, job.error
    log = worker.log()
    assert "WorkerLostError" in log
    assert log.count("Task annotation.tasks.run_job[") >= 2, "received again after the loss"
    assert job.attempts == 2, "the second run counted"
    lines = (Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file).read_text().splitlines()
    assert len(lines) == len(set(lines)) == 1000
