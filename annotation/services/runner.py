"""Run a job by kind: the one place that turns a failure into a failed job row."""

import logging

from annotation.models import Job
from annotation.services.jobs import job_fail, job_finish, job_progress, job_start

logger = logging.getLogger(__name__)


def job_run(*, job: Job) -> None:
    """Run the job's service; any exception marks the job failed with its message."""
    from annotation.services import exports, imports, reports

    runners = {
        Job.Kind.IMPORT: imports.import_run,
        Job.Kind.EXPORT: exports.export_run,
        Job.Kind.REPORT: reports.report_run,
    }
    job_start(job=job)
    try:
        outcome = runners[job.kind](
            job=job, progress=lambda pct, msg="": job_progress(job=job, percent=pct, message=msg)
        )
    except Exception as exc:
        logger.exception("job %s failed", job.pk)
        job_fail(
            job=job,
            error=getattr(exc, "user_message", None) or str(exc) or repr(exc),
            result=getattr(exc, "details", None),
        )
        return
    job_finish(job=job, **outcome)
