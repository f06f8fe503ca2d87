"""Web nodes as separate processes for the scale-out tests (issue 41).

``web_node`` starts ``manage.py runserver`` (no reloader) on a free loopback port with a
settings module of its own folder: the project's settings, the PostgreSQL test database,
the test's broker queue (``tests/factories/workers.py``) and whatever ``extra`` settings
the test gives (each node its own ``MEDIA_ROOT``, ``VAR_DIR`` and export folder, so a
hidden shared-disk assumption fails; ``STORAGES`` on the test's object store). It yields
the node's base URL and stops it when the test ends.

``logged_in`` is a ``requests`` session carrying a session the test process made in the
shared database: a node keeps no session of its own, so any node accepts it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.test import Client

from tests.factories.workers import REPO, free_port, worker_settings_module

#: A hang guard, not a speed limit: on two busy cores (the parallel suite) a process that
#: imports the app and runs its checks has taken well over a minute (test_deploy.py).
NODE_START_TIMEOUT_S = 180


@contextlib.contextmanager
def web_node(folder: Path, *, url: str, queue: str, **extra) -> Iterator[str]:
    """A web node in ``folder`` sending its jobs to ``queue`` on ``url``; yields its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    routes = {"annotation.tasks.run_job": {"queue": queue}}
    module = worker_settings_module(
        url=url,
        chunk_size=100,
        chunk_delay_s=0.0,
        visibility_timeout_s=3600,
        extra={"ALLOWED_HOSTS": ["127.0.0.1"], "CELERY_TASK_ROUTES": routes, **extra},
    )
    (folder / "capeval_node_settings.py").write_text(module)
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "capeval_node_settings",
        "PYTHONPATH": os.pathsep.join([str(folder), str(REPO), str(REPO / "platform")]),
    }
    log = folder / "node.log"
    command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        # Up when /healthz answers (a hang guard, not a speed limit).
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"the web node exited with {process.returncode}:\n{log.read_text()}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"the web node did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def logged_in(user) -> requests.Session:
    """A ``requests`` session logged in as ``user`` (the session row is in the database)."""
    client = Client()
    client.force_login(user)
    session = requests.Session()
    session.cookies.set(
        settings.SESSION_COOKIE_NAME, client.cookies[settings.SESSION_COOKIE_NAME].value
    )
    return session


def csrf_token(session: requests.Session, page_url: str) -> str:
    """The CSRF token of a form page, as a browser would read it before posting."""
    page = session.get(page_url, timeout=30)
    assert page.status_code == 200, page.text[-500:]
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found, "no CSRF token on the page"
    return found.group(1)
