"""Reports: the mode aggregates the study's judgments; the result is stored on the job."""

from typing import Any

from annotation.models import Job
from annotation.modes import get_mode
from annotation.services.jobs import job_create


def report_request(*, study, user, params: dict[str, Any] | None = None) -> Job:
    """Queue a report job for the study."""
    return job_create(kind=Job.Kind.REPORT, study=study, created_by=user, params=params or {})


def report_run(*, job: Job, progress) -> dict[str, Any]:
    result = get_mode(job.study.mode).report.run(job.study, progress)
    return {"result": result, "message": "Report ready"}
