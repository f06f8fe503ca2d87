"""A study's report computed as the report job computes it (the Celery task's code path
without the broker), for tests that read what a report stores."""

from __future__ import annotations

from annotation.services.reports import report_request
from annotation.services.runner import job_run


def report_of(study, user) -> dict:
    """The stored result of a report job run now; fails the test if the job failed."""
    job = report_request(study=study, user=user)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return job.result


def by_system(section: dict) -> dict[str, dict]:
    """A people + judge section's rows by system name."""
    return {row["system"]: row for row in section["systems"]}
