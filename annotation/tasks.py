"""Celery tasks: thin, idempotent, taking ids and calling services."""

import logging

from celery import shared_task

from annotation.models import Job
from annotation.services.assignments import assignment_release_expired
from annotation.services.exports import export_delete_old
from annotation.services.runner import job_run

logger = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_job(job_id: int) -> None:
    """Run a queued job (import, export, report); a finished job is left alone."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.is_finished:
        return
    job_run(job=job)


@shared_task
def release_expired_leases() -> int:
    return assignment_release_expired()


@shared_task
def delete_old_exports() -> int:
    return export_delete_old()
