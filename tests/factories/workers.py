"""Real Celery workers and a real Redis for the job tests, on PostgreSQL.

Fixtures: a test module imports ``broker_fixture``, ``start_worker_fixture`` or
``private_redis_fixture`` and asks for ``broker``, ``start_worker`` or ``private_redis``.

``start_worker`` starts
``celery -A capeval.celery_app worker`` as a subprocess against the PostgreSQL test database
pytest-django created and against Redis, on a Redis database of its own
(``CAPEVAL_TEST_REDIS_DB``, default 15) and a queue name unique to the test, so that neither
stale messages nor short visibility timeouts touch anyone else's work. The worker reads a
settings module generated in the test's folder: the project's settings plus the test's
media, var and export folders, the test database, the job limits the test process has
(publishing applies the time limits, the worker the rest), the slow-export hook, the
``worker_hooks`` module (a study mode and a slow-job hook) and any extra settings.

``PrivateRedis`` is a ``redis-server`` of the test's own on a free loopback port, which a
test may stop and start again (the machine's Redis is never touched); ``use_broker`` points
the test process's Celery app at a Redis URL.

Run with: DATABASE_URL=postgres://postgres@127.0.0.1:5432/capeval
REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/pytest tests/annotation/test_celery_worker.py
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from annotation.models import Assignment, Caption, Image, Item, Job, Judgment, Participant, Study
from capeval.celery_app import app
from tests.factories.core import skip_or_fail
from tests.factories.servers import free_port

REPO = Path(__file__).resolve().parents[2]
WORKER_START_TIMEOUT_S = 30
JOB_TIMEOUT_S = 60
#: The mode ``tests/factories/worker_hooks.py`` registers in the workers.
MODE_NAME = "test-worker"
#: Settings of the test process the workers copy (see the module docstring).
JOB_SETTINGS = (
    "CAPEVAL_JOB_TIME_LIMITS",
    "CAPEVAL_JOB_MAX_ATTEMPTS",
    "CAPEVAL_JOB_HEARTBEAT_SECONDS",
    "CAPEVAL_JOB_STALE_SECONDS",
    "CAPEVAL_JOB_QUEUED_HOURS",
)


def require_postgres_url() -> None:
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        skip_or_fail("real worker tests need PostgreSQL: set DATABASE_URL=postgres://...")


def redis_url_for_tests() -> str:
    """REDIS_URL with the tests' own database number, or a skip/fail naming what is wrong."""
    require_postgres_url()
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url:
        skip_or_fail("real worker tests need Redis: set REDIS_URL=redis://host:6379/0")
    parts = urlsplit(redis_url)
    url = urlunsplit(parts._replace(path=f"/{os.environ.get('CAPEVAL_TEST_REDIS_DB', '15')}"))
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at {redis_url} is unreachable: {exc}")
    return url


def reset_producer_pools() -> None:
    """The Celery app caches its broker connection pools: drop them after a URL change."""
    app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def use_broker(settings, url: str, queue: str) -> Iterator[None]:
    """Send the test process's job tasks to ``url`` (not eagerly), on ``queue``."""
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "task_routes")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    reset_producer_pools()
    app.conf.update(
        broker_url=url,
        task_always_eager=False,
        task_routes={"annotation.tasks.run_job": {"queue": queue}},
    )
    try:
        yield
    finally:
        app.conf.update(**saved)
        reset_producer_pools()


@pytest.fixture(name="broker")
def broker_fixture(settings) -> Iterator[tuple[str, str]]:
    """This test's job tasks go to the tests' Redis on a queue of its own; yield (url, queue)."""
    url = redis_url_for_tests()
    queue = f"capeval-test-{uuid.uuid4().hex[:12]}"
    with use_broker(settings, url, queue):
        try:
            yield url, queue
        finally:
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

    def log(self, tail: int = 5000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:]

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

    def kill_pool(self) -> None:
        """SIGKILL the pool processes only, as the kernel's OOM killer would."""
        for pid in self.pool_pids():
            os.kill(pid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once, as a lost machine would."""
        # The whole group, even if the main process is gone: its pool may have outlived it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def worker_settings_module(
    *, url: str, chunk_size: int, chunk_delay_s: float, visibility_timeout_s: int, extra: dict
) -> str:
    job_settings = {name: getattr(django_settings, name) for name in JOB_SETTINGS}
    lines = [
        "from capeval.settings import *  # noqa: F403",
        f"DATABASES['default']['NAME'] = {connection.settings_dict['NAME']!r}",
        f"MEDIA_ROOT = {str(django_settings.MEDIA_ROOT)!r}",
        f"VAR_DIR = {str(django_settings.VAR_DIR)!r}",
        f"CAPEVAL_EXPORT_DIR = {str(django_settings.CAPEVAL_EXPORT_DIR)!r}",
        f"CAPEVAL_EXPORT_CHUNK_SIZE = {chunk_size}",
        f"CAPEVAL_EXPORT_CHUNK_DELAY_S = {chunk_delay_s}",
        f"CELERY_BROKER_URL = {url!r}",
        "CELERY_TASK_ALWAYS_EAGER = False",
        "CELERY_IMPORTS = ['tests.factories.worker_hooks']",
        # The project's transport options (socket timeouts included), with the visibility
        # timeout of the test, and abandoned messages swept every second, not every 100 s.
        "CELERY_BROKER_TRANSPORT_OPTIONS = {**CELERY_BROKER_TRANSPORT_OPTIONS, "  # noqa: F405
        f"'visibility_timeout': {visibility_timeout_s}, "
        "'unacked_restore_interval': 1, 'unacked_restore_throttle': 1}",
        *(f"{name} = {value!r}" for name, value in {**job_settings, **extra}.items()),
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(name="start_worker")
def start_worker_fixture(tmp_path, broker) -> Iterator[Callable[..., Worker]]:
    """Start workers with the test's settings; every one is killed when the test ends."""
    url, queue = broker
    workers: list[Worker] = []

    def start(
        *,
        chunk_size: int = 100,
        chunk_delay_s: float = 0.0,
        visibility_timeout_s: int = 3600,
        **extra: Any,
    ) -> Worker:
        (tmp_path / "capeval_worker_settings.py").write_text(
            worker_settings_module(
                url=url,
                chunk_size=chunk_size,
                chunk_delay_s=chunk_delay_s,
                visibility_timeout_s=visibility_timeout_s,
                extra=extra,
            )
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


def job_row(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def judged_study(owner, *, participants: int, items: int) -> Study:
    """A study of the workers' mode with participants x items judgments, written in bulk."""
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


class PrivateRedis:
    """A ``redis-server`` of the test's own on a loopback port, without persistence."""

    def __init__(self, folder: Path):
        binary = shutil.which("redis-server")
        if binary is None:
            skip_or_fail("redis-server is not installed (Debian's redis-server package)")
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_connect_timeout=1)


@pytest.fixture(name="private_redis")
def private_redis_fixture(tmp_path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
