"""Reports: the mode aggregates the study's judgments; the result is stored on the job.

Every result of a mode that takes a judge also carries ``people_judge``: the people +
judge estimates (``services/people_judges.py``, issue 40), so
``GET /api/studies/<id>/report/`` has them.
"""

import logging
from typing import Any

from django.db.models import Exists, OuterRef

from annotation.models import Job, Study
from annotation.modes import get_mode
from annotation.services.jobs import job_create
from annotation.services.people_judges import people_judge_report

logger = logging.getLogger(__name__)


def report_request(*, study, user, params: dict[str, Any] | None = None) -> Job:
    """Queue a report job for the study."""
    return job_create(kind=Job.Kind.REPORT, study=study, created_by=user, params=params or {})


def reports_refresh() -> list[Job]:
    """Queue a report for each live study whose mode says its report is due
    (``Report.refresh_due``: an adaptive arena design reads the latest report, so a study
    nobody looks at still adapts). Never a second one while one of the study's reports is
    queued or running. Returns the new jobs; the beat's task enqueues them.

    A job asked for by no one (``created_by`` empty), kept like any other report."""
    busy = Job.objects.filter(
        study_id=OuterRef("pk"),
        kind=Job.Kind.REPORT,
        status__in=(Job.Status.QUEUED, Job.Status.RUNNING),
    )
    jobs = []
    for study in Study.objects.filter(status=Study.Status.LIVE).exclude(Exists(busy)):
        if get_mode(study.mode).report.refresh_due(study):
            jobs.append(report_request(study=study, user=None, params={"refresh": True}))
    return jobs


def report_run(*, job: Job, progress) -> dict[str, Any]:
    """Run the mode's report and add the people + judge section to it."""
    mode = get_mode(job.study.mode)
    result = mode.report.run(job.study, progress)
    # Only a mode that takes a judge has the section: the others' reports are unchanged.
    if isinstance(result, dict) and mode.judging.unit:
        result["people_judge"] = _people_judge(job.study, mode)
    return {"result": result, "message": "Report ready"}


def _people_judge(study, mode) -> dict[str, Any]:
    """The section, or ``{"error": ...}``: a secondary section never costs the researcher
    the mode's report (``people_judge_report`` already turns the study's state, no judge or
    too few units, into its own error; this catches what it did not foresee)."""
    try:
        return people_judge_report(study, mode=mode)
    except Exception as exc:  # noqa: BLE001 - logged; the mode's report is kept
        logger.exception("people + judge section of study %s failed", study.pk)
        # The exception's text may hold internals (a query, a path): the log has it.
        return {
            "error": "The people + judge estimate could not be computed "
            f"({type(exc).__name__}; the server's log has the details)."
        }
