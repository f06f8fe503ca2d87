"""Job rows: create and enqueue, claim a run, report progress and signs of life, finish or
fail, and sweep the jobs whose process vanished.

A job always ends (docs/architecture.md, "Long work"):

- **time limits**: each kind is published with Celery's soft and hard time limits
  (``CAPEVAL_JOB_TIME_LIMITS``); the runner turns the soft limit into a failed job with its
  reason, the task's ``on_failure`` does the same for the hard limit;
- **attempts**: a worker killed mid-job has its message delivered again (``acks_late``);
  ``job_start`` counts the runs and fails the job instead of starting run
  ``CAPEVAL_JOB_MAX_ATTEMPTS + 1``;
- **heartbeat**: the process running a job stamps ``heartbeat_at``; ``job_sweep_stale``
  fails a running job silent for longer than ``CAPEVAL_JOB_STALE_SECONDS`` (a web request
  killed mid-job in the embedded default, a worker killed by its hard limit whose failure
  could not be written, a message lost with Redis), and a queued job no worker started
  within ``CAPEVAL_JOB_QUEUED_HOURS``;
- **queue down**: when the task cannot be published (``annotation.tasks.enqueue``), the
  job is failed at once (``job_not_enqueued``) and the request refused with 503
  (``QUEUE_UNAVAILABLE``).

Writes of a run (progress, heartbeat, finish, fail) apply only while the row still belongs
to that run (same ``attempts``): a run that was given up on never overwrites a newer one.

Services create job rows and never import ``annotation.tasks``: the task runs the job
through ``services/runner.py``, which imports the services that create jobs, so an import
of the task here would be a cycle. The view, API view or command that asked for the job
enqueues it with ``annotation.tasks.enqueue`` (import-linter's contracts forbid the other
direction).
"""

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation import storage
from annotation.models import Job, Study, User

logger = logging.getLogger(__name__)

QUEUE_UNAVAILABLE = (
    "The task queue is unavailable; your request was not started. Try again in a minute."
)
#: Seconds a client is told to wait (``Retry-After``) when the queue is unavailable.
QUEUE_RETRY_AFTER_S = 60


def job_create(
    *, kind: str, study: Study | None, created_by: User | None, params: dict[str, Any]
) -> Job:
    """Create a queued job. The caller (a view, API view or command) enqueues it with
    ``annotation.tasks.enqueue``: services never import tasks (Saleor's export pattern)."""
    return Job.objects.create(kind=kind, study=study, created_by=created_by, params=params)


def job_not_enqueued(*, job: Job) -> None:
    """Fail a job whose task could not be published, and delete the uploads it was given.

    Not left queued: no message exists, so no worker would ever start it (nor delete the
    staging folder of an import, ``params["staging"]``, which only its run removes).
    """
    job_fail(job=job, error=QUEUE_UNAVAILABLE)
    staging = (job.params or {}).get("staging")
    if staging:
        storage.remove_upload_folder(staging)


def job_time_limits(kind: str) -> tuple[int, int]:
    """(soft, hard) time limit in seconds of a job of ``kind`` on a worker."""
    soft, hard = settings.CAPEVAL_JOB_TIME_LIMITS[kind]
    return int(soft), int(hard)


def job_start(*, job: Job) -> bool:
    """Claim a delivery of the job for a run: count the attempt and mark it running.

    Return False when it must not run: it is finished, or it has already been started
    ``CAPEVAL_JOB_MAX_ATTEMPTS`` times without finishing (each time its worker died), in
    which case it is failed here with that reason. ``job`` is refreshed either way.
    """
    now = timezone.now()
    with transaction.atomic():
        row = Job.objects.select_for_update().get(pk=job.pk)
        if row.is_finished:
            job.refresh_from_db()
            return False
        if row.attempts >= settings.CAPEVAL_JOB_MAX_ATTEMPTS:
            error = attempts_reason(row.attempts, row.started_at)
            Job.objects.filter(pk=job.pk).update(
                status=Job.Status.FAILED, error=error, message="Failed", finished_at=now
            )
            logger.error("job %s: %s", job.pk, error)
            job.refresh_from_db()
            return False
        Job.objects.filter(pk=job.pk).update(
            status=Job.Status.RUNNING,
            attempts=row.attempts + 1,
            started_at=now,
            heartbeat_at=now,
            progress=0,
            message="",
            error="",
        )
    job.refresh_from_db()
    return True


def _this_run(job: Job):
    """The job's row while it still belongs to this run of it."""
    return Job.objects.filter(pk=job.pk, attempts=job.attempts)


def job_progress(*, job: Job, percent: int, message: str = "") -> None:
    """Record progress (a sign of life too); the row is updated outside any open transaction
    of the caller's."""
    percent = max(0, min(100, int(percent)))
    _this_run(job).filter(status=Job.Status.RUNNING).update(
        progress=percent, message=message[:500], heartbeat_at=timezone.now()
    )


def job_heartbeat(*, job: Job) -> None:
    """Record that the process running the job is alive."""
    _this_run(job).filter(status=Job.Status.RUNNING).update(heartbeat_at=timezone.now())


def job_finish(
    *, job: Job, result: dict[str, Any] | None = None, result_file: str = "", message: str = ""
) -> None:
    # A run the sweep gave up on that finishes after all did its work: DONE is the truth.
    _this_run(job).update(
        status=Job.Status.DONE,
        progress=100,
        result=result or {},
        result_file=result_file,
        message=message[:500],
        error="",
        finished_at=timezone.now(),
    )
    job.refresh_from_db()


def job_fail(*, job: Job, error: str, result: dict[str, Any] | None = None) -> None:
    # Never over a finish (a soft time limit raised just after it, say).
    _this_run(job).exclude(status=Job.Status.DONE).update(
        status=Job.Status.FAILED,
        error=error,
        result=result or {},
        message="Failed",
        finished_at=timezone.now(),
    )
    job.refresh_from_db()


def job_fail_time_limit(*, job_id: int) -> None:
    """Fail a running job that its hard time limit stopped (the task's ``on_failure``)."""
    job = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).first()
    if job is not None:
        job_fail(job=job, error=time_limit_reason(job.kind, job_time_limits(job.kind)[1]))


def job_sweep_stale(*, job_ids: Iterable[int] | None = None, now: datetime | None = None) -> int:
    """Fail the jobs whose process vanished; return how many.

    A running job without a sign of life for ``CAPEVAL_JOB_STALE_SECONDS`` is failed (its
    heartbeat, or its start for rows from before heartbeats). A queued job older than
    ``CAPEVAL_JOB_QUEUED_HOURS`` is failed rather than enqueued again: a second message
    could run it twice, and the first may still be waiting behind a long queue. Only
    ``job_ids`` are looked at when given (a page polling one job); beat sweeps them all.
    """
    now = now or timezone.now()
    jobs = Job.objects.all() if job_ids is None else Job.objects.filter(pk__in=job_ids)
    stale_before = now - timedelta(seconds=settings.CAPEVAL_JOB_STALE_SECONDS)
    silent = (
        jobs.filter(status=Job.Status.RUNNING)
        .annotate(
            seen=Coalesce("heartbeat_at", "started_at", "created_at", output_field=DateTimeField())
        )
        .filter(seen__lt=stale_before)
    )
    failed = 0
    for job in silent:
        # Conditional on the row as read: a beat or a finish since then wins.
        failed += (
            _this_run(job)
            .filter(status=Job.Status.RUNNING, heartbeat_at=job.heartbeat_at)
            .update(
                status=Job.Status.FAILED,
                error=stale_reason(job.seen),
                message="Failed",
                finished_at=now,
            )
        )
    queued_before = now - timedelta(hours=settings.CAPEVAL_JOB_QUEUED_HOURS)
    lost = list(
        jobs.filter(status=Job.Status.QUEUED, created_at__lt=queued_before).values_list(
            "pk", flat=True
        )
    )
    if lost:  # read first: every poll runs this, and on SQLite an UPDATE takes the write lock
        failed += Job.objects.filter(pk__in=lost, status=Job.Status.QUEUED).update(
            status=Job.Status.FAILED,
            error=never_started_reason(settings.CAPEVAL_JOB_QUEUED_HOURS),
            message="Failed",
            finished_at=now,
        )
    if failed:
        logger.warning("failed %s job(s) whose process stopped or never started", failed)
    return failed


def _duration(seconds: int) -> str:
    if seconds % 60 == 0:
        minutes = seconds // 60
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "an unknown time"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def time_limit_reason(kind: str, seconds: int) -> str:
    return (
        f"Stopped after {_duration(seconds)}: the limit for {kind} jobs. "
        "Ask for less at once, or ask the administrator for a longer limit."
    )


def attempts_reason(attempts: int, last_started: datetime | None) -> str:
    return (
        f"The worker running this job stopped {attempts} times; last started at "
        f"{_when(last_started)}. It is not run again: the job may need more memory or time "
        "than a worker has."
    )


def stale_reason(last_seen: datetime | None) -> str:
    return (
        f"The process running this job stopped (no sign of life since {_when(last_seen)}). "
        "Request it again."
    )


def never_started_reason(hours: int) -> str:
    return (
        f"No worker started this job within {hours} hours (the task queue lost it). "
        "Request it again."
    )
