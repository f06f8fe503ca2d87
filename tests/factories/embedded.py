"""The embedded default as ``make demo`` runs it, in a folder of its own: SQLite, Kombu's
filesystem broker and ``manage.py demo_server`` (runserver and a real Celery worker), driven
over HTTP like a browser would.

Used by ``tests/annotation/test_jobs_embedded.py`` and ``bench/jobs_embedded.py``; it
imports no Django, so that the bench can use it outside pytest. Every process it starts is
a child of ``demo_server``, which it stops with the Ctrl-C signal, as a person would.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 40
#: How a job's progress fragment (``templates/metrics/_job.html``) names its status.
JOB_LINE = re.compile(r"Metrics job (\d+): ([A-Za-z]+)")
PERCENT = re.compile(r'<span class="percent"[^>]*>(\d+)%</span>')
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def embedded_env(var_dir: Path) -> dict[str, str]:
    """The environment of a fresh clone: no database or broker URL, var/ elsewhere."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "CAPEVAL_BROKER_DIR", "DJANGO_SETTINGS_MODULE"}
    }
    env["CAPEVAL_VAR_DIR"] = str(var_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "platform")])
    return env


def manage(var_dir: Path, *args: str, timeout: float = 600) -> str:
    """Run ``manage.py`` in the embedded default; its output, or an error naming it."""
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args],
        cwd=REPO,
        env=embedded_env(var_dir),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux /proc), deepest last."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        path = Path(f"/proc/{parent}/task/{parent}/children")
        try:
            kids = [int(kid) for kid in path.read_text().split()]
        except FileNotFoundError:
            continue
        found.extend(kids)
        todo.extend(kids)
    return found


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


class DemoServer:
    """``manage.py demo_server`` on a free port; its output goes to ``<var>/demo.log``."""

    def __init__(self, var_dir: Path, *, concurrency: int = 1):
        self.var_dir = var_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = var_dir / "demo.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    str(REPO / "manage.py"),
                    "demo_server",
                    f"127.0.0.1:{self.port}",
                    "--noreload",
                    f"--concurrency={concurrency}",
                ],
                cwd=REPO,
                env=embedded_env(var_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(self._answers, START_TIMEOUT_S, f"the demo server:\n{self.log()}")

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"demo_server exited {self.process.returncode}:\n{self.log()}")
        try:
            return requests.get(f"{self.url}/accounts/login/", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    def log(self) -> str:
        worker_log = self.var_dir / "worker.log"
        worker = worker_log.read_text(errors="replace")[-3000:] if worker_log.exists() else ""
        return self.log_path.read_text(errors="replace")[-3000:] + "\n--- worker ---\n" + worker

    def descendants(self) -> list[int]:
        return children(self.process.pid)

    def interrupt(self) -> list[int]:
        """Ctrl-C the demo; return the processes it had started, for the caller to check."""
        started = self.descendants()
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=STOP_TIMEOUT_S)
        return started

    def kill(self) -> None:
        """Clean-up after a failure: the command, its children and theirs."""
        for pid in [self.process.pid, *self.descendants()]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_TIMEOUT_S)


class EagerServer:
    """``manage.py runserver`` alone, without a broker: Celery eager, as ``make demo`` was
    before issue 26 (the bench's baseline)."""

    def __init__(self, var_dir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = var_dir / "eager.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    str(REPO / "manage.py"),
                    "runserver",
                    "--noreload",
                    f"127.0.0.1:{self.port}",
                ],
                cwd=REPO,
                env=embedded_env(var_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(self._answers, START_TIMEOUT_S, "the eager server")

    def _answers(self) -> bool:
        try:
            return requests.get(f"{self.url}/accounts/login/", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=STOP_TIMEOUT_S)


def login(url: str, username: str, password: str) -> requests.Session:
    """A session logged in through the login form, as a browser would."""
    session = requests.Session()
    form = session.get(f"{url}/accounts/login/", timeout=10)
    token = CSRF_INPUT.search(form.text).group(1)
    answer = session.post(
        f"{url}/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{url}/accounts/login/"},
        timeout=10,
        allow_redirects=False,
    )
    if answer.status_code != 302:
        raise RuntimeError(f"login as {username} refused: {answer.status_code}")
    return session


def study_id(session: requests.Session, url: str, name: str) -> int:
    """The id of the study called ``name`` on the researcher's home page."""
    home = session.get(f"{url}/", timeout=10).text
    found = re.search(r'href="/studies/(\d+)/"[^>]*>\s*' + re.escape(name) + r"\s*<", home)
    if found is None:
        raise RuntimeError(f"no study {name!r} on the home page")
    return int(found.group(1))


def post_metrics(
    session: requests.Session,
    url: str,
    study: int,
    names: list[str] | None = None,
    timeout: float = 60,
) -> requests.Response:
    """Press "Compute the metrics" as htmx does, with the metrics ``names`` (default: those
    the form has checked)."""
    page = session.get(f"{url}/studies/{study}/metrics/", timeout=10).text
    form = page[page.index('class="metrics-form"') :]
    form = form[: form.index("</form>")]
    checked = re.findall(r'name="metrics" value="([^"]+)" checked', form)
    token = CSRF_INPUT.search(form).group(1)
    return session.post(
        f"{url}/studies/{study}/metrics/",
        data={"metrics": checked if names is None else names, "csrfmiddlewaretoken": token},
        headers={
            "HX-Request": "true",
            "X-CSRFToken": token,
            "Referer": f"{url}/studies/{study}/metrics/",
        },
        timeout=timeout,
    )


def job_state(fragment: str) -> tuple[int, str, int, bool]:
    """(job id, status word, percent, whether the fragment polls again) of a job fragment."""
    line = JOB_LINE.search(fragment)
    percent = PERCENT.search(fragment)
    if line is None or percent is None:
        raise AssertionError(f"not a metrics job fragment:\n{fragment[:2000]}")
    return int(line.group(1)), line.group(2), int(percent.group(1)), "hx-get=" in fragment


def poll_job(
    session: requests.Session,
    url: str,
    study: int,
    job: int,
    timeout_s: float,
    latencies: list[float] | None = None,
) -> list[tuple[str, int]]:
    """Poll the job's fragment every 0.25 s until it stops polling; the states seen (and
    each poll's seconds appended to ``latencies``)."""
    seen: list[tuple[str, int]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        started = time.perf_counter()
        answer = session.get(
            f"{url}/studies/{study}/metrics/jobs/{job}/",
            headers={"HX-Request": "true"},
            timeout=10,
        )
        if latencies is not None:
            latencies.append(time.perf_counter() - started)
        if answer.headers.get("HX-Refresh") == "true":
            # The job is done: the page is told to reload and show its tables (issue 46).
            seen.append(("Done", 100))
            return seen
        _, status, percent, polls = job_state(answer.text)
        seen.append((status, percent))
        if not polls:
            return seen
        time.sleep(0.25)
    raise TimeoutError(f"job {job} still running after {timeout_s} s: {seen[-5:]}")
