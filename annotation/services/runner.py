"""Run a job by kind: the table of job kinds, and the one place that turns a failure into a
failed job row."""

import logging
from collections.abc import Callable
from typing import Any

from annotation.errors import ServiceError
from annotation.models import Job
from annotation.services import exports, imports, reports
from annotation.services.jobs import job_fail, job_finish, job_progress, job_start

logger = logging.getLogger(__name__)

#: The service each kind of job runs: ``(job=, progress=)`` -> what ``job_finish`` stores.
RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    Job.Kind.IMPORT: imports.import_run,
    Job.Kind.EXPORT: exports.export_run,
    Job.Kind.REPORT: reports.report_run,
}


def job_run(*, job: Job) -> None:
    """Run the job's service; any exception marks the job failed.

    A ServiceError's message (and details, e.g. an import's bad rows) is shown on the job
    as is; anything else is a bug, logged with its traceback and shown by its text.
    """
    job_start(job=job)
    try:
        outcome = RUNNERS[job.kind](
            job=job, progress=lambda pct, msg="": job_progress(job=job, percent=pct, message=msg)
        )
    except ServiceError as exc:
        job_fail(job=job, error=exc.message, result=exc.details)
        return
    except Exception as exc:
        logger.exception("job %s failed", job.pk)
        job_fail(job=job, error=str(exc) or repr(exc))
        return
    job_finish(job=job, **outcome)
