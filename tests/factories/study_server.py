"""A real server process with the demo's live studies, that a test or a bench can kill and
start again on the same port and database.

Used by ``tests/e2e/test_server_restart.py`` and ``bench/client_faults.py``; it imports no
Django, so the bench can use it outside pytest (Django runs only in the subprocesses).

- ``server_env(var_dir, database_url)``: the environment of a fresh clone with its own
  ``var/`` (media, broker folder) and database: a SQLite file there, or ``database_url``;
- ``prepare_demo(env)``: ``migrate`` and ``load_demo --no-finished --no-published`` (one
  live study per mode with the demo's photographs and captions), then the crowd's limits
  per network address lifted on each (every simulated worker comes from 127.0.0.1, as in
  the load benches) through ``study_update_settings``; returns each study's mode, name and
  signed crowd link;
- ``RunServer``: ``manage.py runserver --noreload`` (the embedded default's web server;
  threaded, static files served) on a fixed port, ``kill()`` with SIGKILL (a crash, not a
  shutdown) and ``start()`` again on the same port;
- ``stored_judgments(env)``: every Judgment row as (lease token, part, worker id, item id).
- ``scratch_postgres(url, name)``: a PostgreSQL database created for the run and dropped
  after it, when ``DATABASE_URL`` says PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120
#: Generous: the server's first request competes with browsers for two cores.
PROBE_TIMEOUT_S = 10


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(var_dir: Path, database_url: str = "") -> dict[str, str]:
    """A fresh clone's environment: its own var/ folder and database, no broker (Celery is
    eager: no job runs in these studies), development settings as ``make demo`` has."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "CAPEVAL_BROKER_DIR", "DJANGO_SETTINGS_MODULE"}
        and not key.startswith("PYTEST")
    }
    env["CAPEVAL_VAR_DIR"] = str(var_dir)
    env["DATABASE_URL"] = database_url or f"sqlite:///{var_dir / 'capeval.sqlite3'}"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "platform")])
    env["DEBUG"] = "true"  # runserver serves the static files (the pages' scripts) only so
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args[:2])} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _django_json(env: dict[str, str], code: str) -> object:
    """Run ``code`` in ``manage.py shell`` against the env's database; its last line, as
    JSON (the code prints it)."""
    out = manage(env, "shell", "-c", code, timeout=300)
    return json.loads(out.strip().splitlines()[-1])


LIFT_LIMITS = """
import json
from annotation.models import Study
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_update_settings
found = []
for study in Study.objects.filter(name__startswith="Demo: ").order_by("pk"):
    study_update_settings(study=study, settings={
        **study.settings,
        "crowd_arrivals_per_address_per_hour": 100000,
        "crowd_open_leases_per_address": 100000,
    })
    found.append({"mode": study.mode, "name": study.name, "id": study.pk,
                  "link": "/p/" + crowd_link_token(study) + "/"})
print(json.dumps(found))
"""

JUDGMENTS = """
import json
from annotation.models import Judgment
print(json.dumps(list(Judgment.objects.values_list(
    "assignment__token", "part", "participant__external_id", "item_id", "study__mode"))))
"""


def prepare_demo(env: dict[str, str]) -> list[dict]:
    """Migrate, load the demo's live studies, lift the per-address crowd limits; return
    ``[{"mode", "name", "id", "link"}]`` of the live studies."""
    manage(env, "migrate", "-v", "0")
    manage(env, "load_demo", "--no-finished", "--no-published")
    return _django_json(env, LIFT_LIMITS)


def stored_judgments(env: dict[str, str]) -> list[tuple[str, int, str, int, str]]:
    """Every stored judgment: (lease token, part, worker id, item id, mode)."""
    return [tuple(row) for row in _django_json(env, JUDGMENTS)]


class RunServer:
    """``manage.py runserver --noreload`` on ``port``; its output goes to ``log_path``."""

    def __init__(self, env: dict[str, str], log_path: Path, port: int | None = None):
        self.env = env
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with self.log_path.open("a") as log:
            log.write(f"\n--- start {self.starts} ---\n")
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, str(REPO / "manage.py"), "runserver", "--noreload",
                 f"127.0.0.1:{self.port}"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None:
                raise RuntimeError(f"runserver exited {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"runserver did not answer within {START_TIMEOUT_S} s")
            time.sleep(0.2)

    def _answers(self) -> bool:
        try:
            return (
                requests.get(f"{self.url}/accounts/login/", timeout=PROBE_TIMEOUT_S).status_code
                == 200
            )
        except requests.RequestException:
            return False

    def kill(self) -> None:
        """SIGKILL the server (a crash or a lost machine: nothing is finished or flushed)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@contextlib.contextmanager
def scratch_postgres(url: str, name: str) -> Iterator[str]:
    """A database ``name`` on the server of ``url`` (a postgres:// URL), dropped first and
    after; yields its URL."""
    import psycopg

    server = url.rsplit("/", 1)[0]
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
