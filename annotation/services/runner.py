"""Run a job by kind: the table of job kinds, and the one place that turns a failure into a
failed job row."""

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils.module_loading import import_string

from annotation.errors import ServiceError
from annotation.models import Job
from annotation.services.jobs import (
    job_fail,
    job_finish,
    job_heartbeat,
    job_progress,
    job_start,
    job_time_limits,
    time_limit_reason,
)

logger = logging.getLogger(__name__)


def _service(path: str) -> Callable[..., dict[str, Any]]:
    """The service at ``path``, imported when a job of its kind first runs: an export job
    in a fresh process then skips the metric lab's imports (sacrebleu and the metrics,
    about 1 s and 15 MB; issue 27, the fixed costs of an export)."""

    def run(**kwargs: Any) -> dict[str, Any]:
        return import_string(path)(**kwargs)

    return run


#: The service each kind of job runs: ``(job=, progress=)`` -> what ``job_finish`` stores.
RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    Job.Kind.IMPORT: _service("annotation.services.imports.import_run"),
    Job.Kind.EXPORT: _service("annotation.services.exports.export_run"),
    Job.Kind.REPORT: _service("annotation.services.reports.report_run"),
    Job.Kind.METRICS: _service("annotation.services.metrics.metrics_run"),
    Job.Kind.JUDGE: _service("annotation.services.judge_runs.judge_run"),
}


def job_run(*, job: Job) -> None:
    """Run the job's service; any exception marks the job failed.

    Nothing runs when ``job_start`` refuses the delivery (finished, or out of attempts).
    A ServiceError's message (and details, e.g. an import's bad rows) is shown on the job
    as is; the soft time limit is shown as such; anything else is a bug, logged with its
    traceback and shown by its text.
    """
    if not job_start(job=job):
        return
    try:
        with _Heartbeat(job):
            outcome = RUNNERS[job.kind](
                job=job,
                progress=lambda pct, msg="": job_progress(job=job, percent=pct, message=msg),
            )
        job_finish(job=job, **outcome)
    except SoftTimeLimitExceeded:
        # Celery raised it wherever the job was; the services clean up on the way out (an
        # import's one transaction rolls back, an export deletes its partial files).
        soft, _hard = job_time_limits(job.kind)
        logger.warning("job %s stopped by its soft time limit (%s s)", job.pk, soft)
        _fail_after_interruption(job, time_limit_reason(job.kind, soft))
    except ServiceError as exc:
        job_fail(job=job, error=exc.message, result=exc.details)
    except Exception as exc:
        logger.exception("job %s failed", job.pk)
        job_fail(job=job, error=str(exc) or repr(exc))


def _fail_after_interruption(job: Job, error: str) -> None:
    """Fail the job, on a fresh connection if the interrupted query left it unusable."""
    try:
        job_fail(job=job, error=error)
    except DatabaseError:
        connection.close()
        job_fail(job=job, error=error)


class _Heartbeat:
    """Stamp the job's heartbeat every ``CAPEVAL_JOB_HEARTBEAT_SECONDS`` while it runs.

    A thread, not the progress calls alone: a long silent step (a report's bootstrap, an
    import's one INSERT transaction) must not look like a dead process to the sweep. The
    thread dies with the process, which is what the sweep detects; a hung job that keeps
    beating is ended by its hard time limit instead. The thread has its own database
    connection (Django's are per thread) and closes it.
    """

    def __init__(self, job: Job):
        self.job = job
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._beat, name=f"capeval-job-{job.pk}-heartbeat", daemon=True
        )

    def __enter__(self) -> "_Heartbeat":
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _beat(self) -> None:
        try:
            while not self.stop.wait(settings.CAPEVAL_JOB_HEARTBEAT_SECONDS):
                try:
                    job_heartbeat(job=self.job)
                except DatabaseError as exc:  # e.g. SQLite busy with the job's own write
                    logger.warning("job %s: heartbeat not written: %s", self.job.pk, exc)
        finally:
            connection.close()
