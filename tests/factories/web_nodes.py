"""Web nodes as separate processes for the scale-out tests (issue 41).

``web_node`` starts ``manage.py runserver`` (no reloader) on a free loopback port with a
settings module of its own folder: the project's settings, the PostgreSQL test database,
the test's broker queue (``tests/factories/workers.py``) and whatever ``extra`` settings
the test gives (each node its own ``MEDIA_ROOT``, ``VAR_DIR`` and export folder, so a
hidden shared-disk assumption fails; ``STORAGES`` on the test's object store). It yields
the node's base URL and stops it when the test ends.

``logged_in`` is a ``requests`` session carrying a session the test process made in the
shared database: a node keeps no session of its own, so any node accepts it.

``web_nodes`` starts several at once; ``own_folders`` gives a process folders of its own;
``post_form`` posts a page's form with its CSRF token; ``via_store`` follows a node's
redirect to the object store's presigned link; ``files_under`` lists what a folder got.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.test import Client

from tests.factories.servers import free_port
from tests.factories.workers import REPO, worker_settings_module

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


@contextlib.contextmanager
def web_nodes(*nodes: tuple[Path, dict], url: str, queue: str) -> Iterator[list[str]]:
    """Several ``web_node``s, each ``(folder, extra settings)``, started at once (a start is
    mostly the process importing the app and running its checks, which overlap on two
    cores); yields their URLs in order and stops them all when the block ends. A node that
    fails to start fails the test after the others have been stopped."""
    managers = [web_node(folder, url=url, queue=queue, **extra) for folder, extra in nodes]
    with contextlib.ExitStack() as stack:
        with ThreadPoolExecutor(max_workers=len(managers)) as pool:
            starting = [pool.submit(manager.__enter__) for manager in managers]
        failure: BaseException | None = None
        for manager, future in zip(managers, starting, strict=True):
            error = future.exception()
            if error is None:
                stack.push(manager.__exit__)
            failure = failure or error
        if failure is not None:
            raise failure
        yield [future.result() for future in starting]


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


def own_folders(root: Path) -> dict:
    """A node's or worker's own media, var and export folders, as settings: no folder in
    common with another process, so a file one writes locally is missing for the others."""
    return {
        "MEDIA_ROOT": str(root / "media"),
        "VAR_DIR": str(root / "var"),
        "CAPEVAL_EXPORT_DIR": str(root / "exports"),
    }


def files_under(folder: Path) -> list[Path]:
    """Every file below ``folder`` (none when it does not exist)."""
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def via_store(session: requests.Session, url: str) -> requests.Response:
    """GET a node's download URL, which answers with a redirect to a presigned link of the
    object store, and follow it without the session's cookie (the store needs none)."""
    answer = session.get(url, allow_redirects=False, timeout=30)
    assert answer.status_code == 302, (url, answer.status_code, answer.text[-300:])
    stored = requests.get(answer.headers["Location"], timeout=30)
    assert stored.status_code == 200, (url, stored.status_code, stored.text[-300:])
    return stored


def post_form(
    session: requests.Session, page_url: str, action_url: str, data: dict, **extra
) -> requests.Response:
    """Post a form of ``page_url`` to ``action_url`` with the page's CSRF token, without
    following the answer (a redirect says the form was taken)."""
    token = csrf_token(session, page_url)
    return session.post(
        action_url,
        data={"csrfmiddlewaretoken": token, **data},
        headers={"Referer": page_url},
        allow_redirects=False,
        timeout=60,
        **extra,
    )
