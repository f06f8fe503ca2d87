"""Celery tasks: thin, idempotent, taking ids and calling services."""

import logging

from celery import Task, shared_task
from celery.exceptions import TimeLimitExceeded
from django.db import connections

from annotation.models import Job
from annotation.services.assignments import assignment_release_expired
from annotation.services.exports import export_delete_old
from annotation.services.jobs import job_fail_time_limit, job_sweep_stale
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
def delete_old_exports() -> int:
    return export_delete_old()
