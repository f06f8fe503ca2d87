"""Real Celery workers on Redis and PostgreSQL run export jobs, and finish them after a crash.

Each test starts ``celery -A capeval.celery_app worker`` as a subprocess against the
PostgreSQL test database pytest-django created and against Redis, on a Redis database of
its own (``CAPEVAL_TEST_REDIS_DB``, default 15) and a queue name unique to the test, so
that neither stale messages nor the short visibility timeout below touch anyone else's
work. The worker reads a settings module generated in the test's folder: the project's
settings plus the test's export folder, the test database, a slow-export hook and, for
the crash test, a visibility timeout of a few seconds (production keeps one hour).

Recovery works in two ways, both tested:

- the whole worker dies (SIGKILL, a lost machine): the message was never acknowledged
  (``acks_late``), so Redis hands it to the next worker once the visibility timeout has
  passed; ``run_job`` finds the job RUNNING and starts it again from scratch;
- only the pool process dies: the worker rejects and requeues the message at once
  (``reject_on_worker_lost``).

Run with: DATABASE_URL=postgres://postgres@127.0.0.1:5432/capeval
REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/pytest tests/annotation/test_celery_worker.py
"""

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from annotation.models import Assignment, Caption, Image, Item, Job, Judgment, Participant, Study
from annotation.services.exports import export_request
from tests.factories.core import skip_or_fail

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
WORKER_START_TIMEOUT_S = 30
JOB_TIMEOUT_S = 60
MODE_NAME = "test-worker"
# The worker imports this module (CELERY_IMPORTS) to register the study's mode; the mode
# has no columns of its own, so the export's generic columns are what is checked.
MODE_MODULE = f'''
from annotation.modes import Mode, register


@register
class WorkerTestMode(Mode):
    name = "{MODE_NAME}"
'''


def redis_url_for_tests() -> str:
    """REDIS_URL with the tests' own database number, or a skip/fail naming what is wrong."""
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        skip_or_fail("real worker tests need PostgreSQL: set DATABASE_URL=postgres://...")
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url:
        skip_or_fail("real worker tests need Redis: set REDIS_URL=redis://host:6379/0")
    parts = urlsplit(redis_url)
    url = urlunsplit(parts._replace(path=f"/{os.environ.get('CAPEVAL_TEST_REDIS_DB', '15')}"))
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at {redis_url} is unreachable: {exc}")
    return url


@pytest.fixture
def broker(settings) -> Iterator[tuple[str, str]]:
    """Send this test's tasks to Redis (not eagerly) on a queue of its own; yield (url, queue).

    The Celery app caches its broker connection pools; they are dropped so that the
    producer connects to the tests' Redis database, and dropped again afterwards.
    """
    url = redis_url_for_tests()
    queue = f"capeval-test-{uuid.uuid4().hex[:12]}"
    from capeval.celery_app import app

    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "task_routes")}
    settings.CELERY_TASK_ALWAYS_EAGER = False

    def reset_pools() -> None:
        app._pool = None
        app.amqp._producer_pool = None

    reset_pools()
    app.conf.update(
        broker_url=url,
        task_always_eager=False,
        task_routes={"annotation.tasks.run_job": {"queue": queue}},
    )
    try:
        yield url, queue
    finally:
        app.conf.update(**saved)
        reset_pools()
        import redis

        redis.Redis.from_url(url).delete(
            queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"
        )


class Worker:
    """A ``celery worker`` subprocess in its own process group, logging to a file."""

    def __init__(self, *, folder: Path, url: str, queue: str, name: str):
        self.log_path = folder / f"{name}.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "capeval_worker_settings",
            "PYTHONPATH": os.pathsep.join([str(folder), str(REPO), str(REPO / "platform")]),
            "REDIS_URL": url,
        }
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "capeval.celery_app",
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            "-Q",
            queue,
            "--loglevel=info",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"{name}-{queue}@%h",
        ]
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def wait_ready(self) -> None:
        wait_for(
            lambda: "ready." in self.log(),
            WORKER_START_TIMEOUT_S,
            lambda: f"worker did not start:\n{self.log()}",
            worker=self,
        )

    def pool_pids(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once, as a lost machine would."""
        # The whole group, even if the main process is gone: its pool may have outlived it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture
def start_worker(tmp_path, broker) -> Iterator[Callable[..., Worker]]:
    """Start workers with the test's settings; every one is killed when the test ends."""
    url, queue = broker
    workers: list[Worker] = []

    def start(*, chunk_size=100, chunk_delay_s=0.0, visibility_timeout_s=3600) -> Worker:
        (tmp_path / "capeval_worker_mode.py").write_text(MODE_MODULE)
        (tmp_path / "capeval_worker_settings.py").write_text(
            "from capeval.settings import *  # noqa: F403\n"
            f"DATABASES['default']['NAME'] = {connection.settings_dict['NAME']!r}\n"
            f"CAPEVAL_EXPORT_DIR = {str(django_settings.CAPEVAL_EXPORT_DIR)!r}\n"
            f"CAPEVAL_EXPORT_CHUNK_SIZE = {chunk_size}\n"
            f"CAPEVAL_EXPORT_CHUNK_DELAY_S = {chunk_delay_s}\n"
            f"CELERY_BROKER_URL = {url!r}\n"
            "CELERY_TASK_ALWAYS_EAGER = False\n"
            "CELERY_IMPORTS = ['capeval_worker_mode']\n"
            # Sweep for abandoned messages every second instead of every 100 s.
            "CELERY_BROKER_TRANSPORT_OPTIONS = {"
            f"'visibility_timeout': {visibility_timeout_s}, "
            "'unacked_restore_interval': 1, 'unacked_restore_throttle': 1}\n"
        )
        worker = Worker(folder=tmp_path, url=url, queue=queue, name=f"w{len(workers) + 1}")
        workers.append(worker)
        worker.wait_ready()
        return worker

    try:
        yield start
    finally:
        for worker in workers:
            worker.kill()


def wait_for(predicate, timeout_s: float, explain: Callable[[], str], worker=None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if worker is not None and worker.process.poll() is not None:
            pytest.fail(f"the worker exited with {worker.process.returncode}:\n{worker.log()}")
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s} s: {explain()}")


def judged_study(owner, *, participants: int, items: int) -> Study:
    """A study with participants x items judgments, written in bulk."""
    study = Study.objects.create(
        name="Worker study", mode=MODE_NAME, owner=owner, status=Study.Status.LIVE
    )
    image = Image.objects.create(
        study=study,
        name="img.png",
        sha256="0" * 64,
        file="o",
        display="d",
        width=1,
        height=1,
        format="PNG",
    )
    caption = Caption.objects.create(
        study=study, image=image, system="Human", raw_text="a dog", text="A dog."
    )
    made = Item.objects.bulk_create(
        Item(
            study=study,
            kind="rate",
            image=image,
            position=n,
            target=participants,
            judgment_count=participants,
            spec={"caption_ids": [caption.pk]},
        )
        for n in range(items)
    )
    people = Participant.objects.bulk_create(
        Participant(study=study, source=Participant.Source.PROLIFIC, external_id=f"worker-{n}")
        for n in range(participants)
    )
    now = timezone.now()
    leases = Assignment.objects.bulk_create(
        Assignment(
            participant=person,
            item=item,
            status=Assignment.Status.SUBMITTED,
            served_at=now,
            expires_at=now + timedelta(hours=1),
            submitted_at=now,
        )
        for person in people
        for item in made
    )
    Judgment.objects.bulk_create(
        (
            Judgment(
                study=study,
                item_id=lease.item_id,
                participant_id=lease.participant_id,
                assignment=lease,
                payload={"rating": 1 + n % 5},
                result={"points": n % 5 - 2},
                dwell_ms=3000,
            )
            for n, lease in enumerate(leases)
        ),
        batch_size=1000,
    )
    return study


def job_row(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def assert_complete_export(job: Job, study: Study) -> None:
    job = job_row(job)
    assert job.status == Job.Status.DONE, job.error
    root = Path(django_settings.CAPEVAL_EXPORT_DIR)
    with (root / job.result_file).open(newline="", encoding="utf-8") as data:
        ids = [int(row["judgment_id"]) for row in csv.DictReader(data)]
    expected = list(
        Judgment.objects.filter(study=study).order_by("id").values_list("id", flat=True)
    )
    assert ids == expected, "every judgment once, in order"
    assert (root / job.result["datasheet"]).is_file()
    assert not list(root.glob(".*.part")), "no temporary file is left"


def test_worker_runs_an_export_job(researcher, start_worker):
    study = judged_study(researcher, participants=5, items=60)
    start_worker()

    job = export_request(study=study, user=researcher, export_format="csv")

    wait_for(lambda: job_row(job).is_finished, JOB_TIMEOUT_S, lambda: str(job_row(job)))
    assert_complete_export(job, study)
    assert job_row(job).result["rows"] == 300


def test_export_completes_after_its_worker_is_killed_mid_task(researcher, start_worker):
    study = judged_study(researcher, participants=10, items=100)
    options = {"chunk_size": 50, "chunk_delay_s": 0.2, "visibility_timeout_s": 6}
    first = start_worker(**options)
    job = export_request(study=study, user=researcher, export_format="csv")
    wait_for(
        lambda: job_row(job).progress >= 15, JOB_TIMEOUT_S, lambda: str(job_row(job)), worker=first
    )

    first.kill()

    stuck = job_row(job)
    assert stuck.status == Job.Status.RUNNING and stuck.progress < 100
    root = Path(django_settings.CAPEVAL_EXPORT_DIR)
    assert not any(root.glob("*.csv")), "no data file under its final name"
    assert list(root.glob(".*.part")), "the killed run left its half-written temporary file"
    second = start_worker(**options)
    wait_for(
        lambda: job_row(job).is_finished,
        JOB_TIMEOUT_S,
        lambda: f"{job_row(job)}\n{second.log()}",
        worker=second,
    )
    assert_complete_export(job, study)


def test_export_completes_after_its_pool_process_is_killed(researcher, start_worker):
    study = judged_study(researcher, participants=10, items=100)
    worker = start_worker(chunk_size=50, chunk_delay_s=0.2)
    job = export_request(study=study, user=researcher, export_format="jsonl")
    wait_for(
        lambda: job_row(job).progress >= 15, JOB_TIMEOUT_S, lambda: str(job_row(job)), worker=worker
    )

    for pid in worker.pool_pids():
        os.kill(pid, signal.SIGKILL)

    wait_for(
        lambda: job_row(job).is_finished,
        JOB_TIMEOUT_S,
        lambda: f"{job_row(job)}\n{worker.log()}",
        worker=worker,
    )
    job = job_row(job)
    assert job.status == Job.Status.DONE, job.error
    log = worker.log()
    assert "WorkerLostError" in log
    assert log.count("Task annotation.tasks.run_job[") >= 2, "received again after the loss"
    lines = (Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file).read_text().splitlines()
    assert len(lines) == len(set(lines)) == 1000
