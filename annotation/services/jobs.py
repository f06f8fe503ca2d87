"""Job rows: create and enqueue, report progress, finish or fail.

``job_create`` holds the code base's one function-level import (of ``annotation.tasks``):
the task runs the job through ``services/runner.py``, which imports the services that
create jobs (imports, exports, reports), and they import this module. Importing the task
where it is enqueued, not at module level, is what keeps that loop from being an import
cycle. ``tests/annotation/test_structure.py`` checks that no other exists.
"""

from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.models import Job, Study, User


def job_create(
    *, kind: str, study: Study | None, created_by: User | None, params: dict[str, Any]
) -> Job:
    """Create a queued job and enqueue its task once the surrounding transaction commits."""
    from annotation.tasks import run_job  # the one lazy import: see the module docstring

    job = Job.objects.create(kind=kind, study=study, created_by=created_by, params=params)
    transaction.on_commit(lambda: run_job.delay(job.pk))
    return job


def job_start(*, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), progress=0, error=""
    )
    job.refresh_from_db()


def job_progress(*, job: Job, percent: int, message: str = "") -> None:
    """Record progress; the job row is updated outside any open transaction of the caller's."""
    percent = max(0, min(100, int(percent)))
    Job.objects.filter(pk=job.pk).update(progress=percent, message=message[:500])


def job_finish(
    *, job: Job, result: dict[str, Any] | None = None, result_file: str = "", message: str = ""
) -> None:
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.DONE,
        progress=100,
        result=result or {},
        result_file=result_file,
        message=message[:500],
        finished_at=timezone.now(),
    )
    job.refresh_from_db()


def job_fail(*, job: Job, error: str, result: dict[str, Any] | None = None) -> None:
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.FAILED,
        error=error,
        result=result or {},
        message="Failed",
        finished_at=timezone.now(),
    )
    job.refresh_from_db()
