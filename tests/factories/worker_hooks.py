"""Imported by the tests' Celery workers only (``CELERY_IMPORTS`` of their settings module),
never by the test process: the study mode those tests use, and a hook that slows jobs down.

- Mode ``test-worker``: no columns of its own (the export's generic columns are what is
  checked) and a report counting the study's judgments, with progress reports.
- The slow hook wraps every entry of ``services/runner.py:RUNNERS``: the real service runs,
  but each run sleeps ``CAPEVAL_TEST_PROGRESS_DELAY_S`` when it starts and after every
  progress report, so that a test can kill its worker or reach a time limit midway. With
  ``CAPEVAL_TEST_IGNORE_SOFT_LIMIT`` the sleeps swallow Celery's soft time limit and go on,
  as a C call that never returns to Python would: only the hard limit stops such a job.
  Every run logs ``test hook: run <attempt> of job <id> started`` for the tests to count.
"""

import logging
import time
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from annotation.models import Judgment, Study
from annotation.modes.base import Mode, Report, register
from annotation.services import runner

MODE_NAME = "test-worker"
logger = logging.getLogger("capeval.test_worker")


class WorkerReport(Report):
    def run(self, study: Study, progress) -> dict[str, Any]:
        progress(10, "Counting judgments")
        judgments = Judgment.objects.filter(study=study).count()
        progress(90, "Counted")
        return {"judgments": judgments}


@register
class WorkerTestMode(Mode):
    name = MODE_NAME
    report_class = WorkerReport


def _pause() -> None:
    delay = float(getattr(settings, "CAPEVAL_TEST_PROGRESS_DELAY_S", 0) or 0)
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        try:
            time.sleep(max(0.0, min(0.1, deadline - time.monotonic())))
        except SoftTimeLimitExceeded:
            if not getattr(settings, "CAPEVAL_TEST_IGNORE_SOFT_LIMIT", False):
                raise
            logger.warning("test hook: soft time limit ignored")
            deadline = float("inf")


def _slowed(run):
    def slowed_run(*, job, progress):
        attempt = getattr(job, "attempts", "?")  # "?": the code before attempts were counted
        logger.warning("test hook: run %s of job %s started", attempt, job.pk)

        def slowed_progress(percent, message=""):
            progress(percent, message)
            _pause()

        _pause()
        return run(job=job, progress=slowed_progress)

    return slowed_run


runner.RUNNERS.update({kind: _slowed(run) for kind, run in runner.RUNNERS.items()})
