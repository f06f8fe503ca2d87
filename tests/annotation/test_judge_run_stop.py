"""A judge run cut short by the job's soft time limit stops spending.

The runner asks the questions in a batch thread while the job's thread writes the progress.
When the soft time limit interrupts the job's thread, the job fails and the batch's answers
are never stored; the batch used to go on asking every question left, each one paid for.
Now it is told to stop: the requests in flight finish and no other is sent.

The soft time limit is Celery's ``SoftTimeLimitExceeded``, raised in the job's thread; here
the progress writer raises it at its first count of answers, through the real service
(``judge_run``) and its batch thread, against the loopback judge server.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from annotation.models import JudgeAnswer
from annotation.services.judge_runs import judge_endpoint_save, judge_run, judge_run_request
from tests.annotation.test_judge_runs import write_images
from tests.factories.judge_server import KEY, fake_judge
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

PAIRS, CONCURRENCY, SECONDS_PER_REPLY = 24, 2, 0.1


def _batch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("judge-run")]


def test_a_run_interrupted_by_its_time_limit_sends_no_new_question(researcher):
    study = vicr_study(researcher, game=PAIRS)
    write_images(study)
    seen: list[int] = []

    def progress(percent: int, message: str = "") -> None:
        asked = re.match(r"([\d,]+) of [\d,]+ asked", message)
        if asked and int(asked.group(1).replace(",", "")) > 0:
            seen.append(int(asked.group(1).replace(",", "")))
            raise SoftTimeLimitExceeded()

    with fake_judge(lambda prompt, n: ("sleep", SECONDS_PER_REPLY, "4")) as server:
        judge_endpoint_save(study=study, name="toy-vlm", base_url=server.url, model="judge-7b",
                            api_key=KEY, concurrency=CONCURRENCY, by=study.owner)  # fmt: skip
        job = judge_run_request(study=study, by=study.owner)

        with pytest.raises(SoftTimeLimitExceeded):
            judge_run(job=job, progress=progress)

        deadline = time.monotonic() + 10
        while _batch_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _batch_threads(), "the batch thread ended"
        # At the interruption `seen[0]` answers were in and at most CONCURRENCY requests
        # in flight; one more answer may have landed between the count and the stop.
        assert seen and server.total <= seen[0] + CONCURRENCY + 1
        assert server.total < PAIRS, "not every question was paid for"
    assert not JudgeAnswer.objects.exists(), "a failed run stores nothing"
