"""Celery tasks: thin, idempotent, taking ids and calling services; and ``enqueue``, how a
view, API view or command starts the job a ``*_request`` service created."""

import logging

from celery import Task, shared_task
from celery.exceptions import TimeLimitExceeded
from django.db import connections, transaction
from kombu.exceptions import OperationalError as BrokerUnavailable

from annotation.errors import Unavailable
from annotation.models import Job
from annotation.services.assignments import assignment_release_expired
from annotation.services.crowd.sync import crowd_sync_live as _crowd_sync_live
from annotation.services.exports import export_delete_old
from annotation.services.jobs import (
    QUEUE_RETRY_AFTER_S,
    QUEUE_UNAVAILABLE,
    job_fail_time_limit,
    job_not_enqueued,
    job_sweep_stale,
    job_time_limits,
)
from annotation.services.reports import reports_refresh
from annotation.services.runner import job_run

logger = logging.getLogger(__name__)


class JobTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        """Fail the job its hard time limit stopped.

        Celery calls this in the worker's main process after killing the pool process that
        ran the job, which had no chance to write anything (the soft limit is handled by
        the runner itself). The connection is closed again: the main process forks new pool
        processes, which must not inherit it.
        """
        if isinstance(exc, TimeLimitExceeded) and args:
            try:
                job_fail_time_limit(job_id=args[0])
            finally:
                connections.close_all()


@shared_task(base=JobTask, acks_late=True, reject_on_worker_lost=True)
def run_job(job_id: int) -> None:
    """Run a queued job (import, export, report, metrics); a finished job is left alone.

    A delivery after a lost worker runs the job again from the start, up to
    CAPEVAL_JOB_MAX_ATTEMPTS runs (``services/jobs.py:job_start``).
    """
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.is_finished:
        return
    job_run(job=job)


@shared_task
def sweep_stale_jobs() -> int:
    return job_sweep_stale()


@shared_task
def release_expired_leases() -> int:
    return assignment_release_expired()


@shared_task
def crowd_sync_live() -> int:
    """Reclaim leases of crowd workers who left, for live studies linked to a crowd study."""
    return _crowd_sync_live()


@shared_task
def refresh_reports() -> int:
    """Queue the reports that live studies' modes say are due (``reports_refresh``: an
    adaptive arena design reads the latest report). A job the queue refused is failed by
    ``enqueue`` and the next minute asks again; the others still go."""
    jobs = reports_refresh()
    for job in jobs:
        try:
            enqueue(job)
        except Unavailable:
            logger.warning("report %s of study %s not enqueued", job.pk, job.study_id)
    return len(jobs)


@shared_task
def delete_old_exports() -> int:
    return export_delete_old()


def enqueue(job: Job) -> Job:
    """Publish ``job``'s task once the surrounding transaction commits; return the job.

    Called by whoever asked a service for the job (views, API views, commands), never by a
    service: the task imports the services, so a service importing it would be a cycle.
    When the task queue cannot take it, the job is failed (``job_not_enqueued``) and
    ``ServiceError`` (503, ``details["retry_after"]`` and ``details["job_id"]``) is raised
    where the transaction commits: at once when called outside one.
    """
    transaction.on_commit(lambda: _publish(job))
    return job


def _publish(job: Job) -> None:
    soft, hard = job_time_limits(job.kind)
    try:
        run_job.apply_async((job.pk,), soft_time_limit=soft, time_limit=hard)
    except BrokerUnavailable as exc:
        logger.warning("job %s not enqueued, the task queue is unavailable: %s", job.pk, exc)
        job_not_enqueued(job=job)
        raise Unavailable(
            QUEUE_UNAVAILABLE,
            details={"retry_after": QUEUE_RETRY_AFTER_S, "job_id": job.pk},
        ) from exc
