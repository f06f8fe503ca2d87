"""Benchmark: what each fault costs, with the real components, and that no acknowledged
judgment is ever lost.

Not a test. Needs PostgreSQL's server binaries (initdb, pg_ctl), redis-server, for the
full-disk fault root (a tmpfs is mounted), and for the object-store fault Node.js with
s3rver (``node_modules``, as the storage tests). Takes about 2-3 minutes with
``--seconds 10``; ``--faults`` runs only the faults named (``--faults e``: the store alone):

    .venv/bin/python bench/faults.py [--seconds 20] [--players 12] [--pairs 5000] \
        [--workers 3] [--pg-down-seconds 3] [--redis-down-seconds 4] \
        [--store-down-seconds 3] [--faults abcde]

Everything runs on loopback and is private to the run: a PostgreSQL cluster made with
``initdb`` in a temporary folder on a free port (as the ``postgres`` user when run as root),
a ``redis-server`` on a free port (append-only file, so queued tasks survive its restart,
as in docker-compose.yml), gunicorn (``bench/_harness.py``) and a real Celery worker
(prefork, concurrency 1). The machine's own PostgreSQL and Redis (5432, 6379) are never
touched. gunicorn and the worker read a settings module written for the run: the project's
settings plus the run's folders, a slowed export (``CAPEVAL_EXPORT_CHUNK_DELAY_S``, so a
worker can be killed midway) and a 15-second broker visibility timeout (production keeps it
above the jobs' hard time limits), so a killed worker's task is handed out again soon.

The load is ``--players`` VICR crowd players already in the game phase (as in
``bench/assign.py``), each a thread with its own ``requests.Session`` going through the real
pages: GET next, POST a rating. A submission answered 2xx/3xx with the feedback page is
*acknowledged*; one answered otherwise is sent again (the same lease token, after
``min(Retry-After, 0.5)`` seconds) until acknowledged or the run ends.

Faults, in this order:

a. **Redis stopped** for ``--redis-down-seconds`` during the load, while a researcher asks
   for an export (API) and a report (page); then Redis is started again and an export is
   asked for again and must finish.
b. **The Celery worker SIGKILLed** (its whole process group, as a lost machine) during an
   import (page upload: a zip of PNG images and a captions CSV), an export and a report; a
   new worker is started. Each job must finish once with no duplicated rows (images and
   captions counted, export rows against the judgments, one report), or fail with a reason.
c. **PostgreSQL restarted** during the load: ``pg_ctl stop -m fast`` (open connections are
   cut), ``--pg-down-seconds`` down, then started again.
d. **The export folder full** during an export (a tmpfs filled with a ballast file while the
   job runs): the job must fail saying "The disk is full", leave no file, offer no
   download; once the ballast is gone the next export succeeds. Skipped when no tmpfs can
   be mounted (not root).
e. **The object store down** (``--store-down-seconds``) during the load: a new gunicorn
   and worker run with ``STORAGES`` on an s3rver of the run's own on a free loopback port
   (``tests/factories/object_store.py``); an export is running when the store is stopped,
   then the researcher uploads an import through the page and downloads an earlier export.
   The upload and the download must be refused with 503, ``Retry-After`` and "The file
   store did not answer"; the export must fail saying so and offer no download; no job
   may be left queued or running, no import job made; once the store is started again (same
   folder and port) no object of the failed upload or export may be in it, and the next
   export must finish and download (through its presigned link) with all its rows. The
   players' pages do not touch files: they must see no failed request.

Printed for each fault: failed requests by status, seconds to recover (from the end of the
fault to the first request answered 2xx/3xx), acknowledged judgments lost (acknowledged but
not stored: must be 0), duplicates (two judgments of one lease part, or of one pair by one
player: must be 0), judgments stored for a submission whose answer was an error (allowed: the
commit happened, the answer did not arrive), and whether every item's counters equal its
rows. Writes JSON to ``bench/results/faults-*.json``; exits 1 if anything was lost or
duplicated or a counter is off.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _harness as harness
import _store
import vicr_game
from assign import CSRF_INPUT, FORM_ACTION, VETERAN_RATINGS

REPO = harness.REPO
DATABASE = "capeval_faults"
RESEARCHER = ("faults-researcher", "faults-researcher-password")
JOB_TIMEOUT = 120
#: Rows per slice and sleep per slice of an export (the test-only slowing hook); from the
#: worker-kill fault on, slices are sized so that an export takes about EXPORT_SECONDS.
EXPORT_SLICE_ROWS, EXPORT_SLICE_SLEEP, EXPORT_SECONDS = 25, 0.05, 2.0
#: A killed worker's unacknowledged task goes back to the queue after this many seconds.
#: A job still running after it would be handed to a second worker (production keeps the
#: visibility above the jobs' hard time limits), so the bench's jobs stay well below it.
VISIBILITY_TIMEOUT = 15
TMPFS_BYTES = 64 << 20


# ---------------------------------------------------------------------------------------
# Private services


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary folder on a free loopback port."""

    def __init__(self, root: Path):
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        initdb = str(found[-1]) if found else shutil.which("initdb")
        if initdb is None:
            raise SystemExit("PostgreSQL's initdb/pg_ctl are needed (apt install postgresql)")
        self.bin = Path(initdb).parent
        self.folder = root / "postgres"
        self.folder.mkdir()
        self.port = harness.free_port()
        self.prefix: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to postgres
            owner = pwd.getpwnam("postgres")
            os.chown(root, owner.pw_uid, owner.pw_gid)
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, str(self.bin / tool), *args], capture_output=True, text=True
        )
        if done.returncode:
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=100"
        )
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def server(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}"

    def remove(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
             "-w", "stop"],
            capture_output=True,
        )  # fmt: skip


class PrivateRedis:
    """redis-server on a free loopback port with an append-only file, restartable."""

    def __init__(self, root: Path):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise SystemExit("redis-server is needed (apt install redis-server)")
        self.folder = root / "redis"
        self.folder.mkdir()
        self.port = harness.free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.folder / "redis.log").open("a")
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, 20, "redis-server")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


class Worker:
    """``celery worker`` (prefork, concurrency 1) in its own process group."""

    count = 0

    def __init__(self, env: dict[str, str], folder: Path):
        Worker.count += 1
        self.log_path = folder / f"worker-{Worker.count}.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "capeval.celery_app", "worker",
                 "--pool=prefork", "--concurrency=1", "--loglevel=info", "--without-gossip",
                 "--without-mingle", "--without-heartbeat", "-n", f"faults-{Worker.count}@%h"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while "ready." not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Celery worker did not start:\n{self.log()[-3000:]}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the worker and its pool at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def received(self) -> int:
        return len(re.findall(r"Task annotation\.tasks\.run_job\[[^\]]+\] received", self.log()))


def wait_for_port(port: int, timeout: float, what: str) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not listen on port {port}") from None
            time.sleep(0.1)


SETTINGS_MODULE = """\
import os
from pathlib import Path
from capeval.settings import *  # noqa: F403

VAR_DIR = Path({var!r})
MEDIA_ROOT = VAR_DIR / "media"
CAPEVAL_EXPORT_DIR = Path({exports!r})
# Read when a process starts: the bench sizes the slices to the judgments of the moment.
CAPEVAL_EXPORT_CHUNK_SIZE = int(os.environ.get("FAULTS_EXPORT_SLICE_ROWS", "{rows}"))
CAPEVAL_EXPORT_CHUNK_DELAY_S = {sleep}
CELERY_BROKER_TRANSPORT_OPTIONS = {{
    **CELERY_BROKER_TRANSPORT_OPTIONS,
    "visibility_timeout": {visibility},
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}}
# Fault e's web node and worker: media and exports on the run's s3rver.
if os.environ.get("FAULTS_STORAGES"):
    import json

    STORAGES = json.loads(os.environ["FAULTS_STORAGES"])
"""


def mount_tmpfs(folder: Path) -> bool:
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0777", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


# ---------------------------------------------------------------------------------------
# The load: VICR players who retry what was not acknowledged


@dataclass
class Played:
    requests: list[tuple[float, float, str, Any]] = field(default_factory=list)
    acked: list[tuple[str, str, int]] = field(default_factory=list)
    failed_answers: set[tuple[str, str, int]] = field(default_factory=set)
    retry_after: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


class Crowd:
    """Players keep their browser (session) from one load to the next."""

    def __init__(self, base: str, link: str):
        self.base, self.link = base, link
        self.sessions: dict[int, Any] = {}
        self.pending: dict[int, tuple[str, str, int, str] | None] = {}

    def moved(self, base: str) -> Crowd:
        """The same players (browsers, pending answers) on another web server: arriving
        again through the crowd link in a new browser would be refused."""
        crowd = Crowd(base, self.link)
        crowd.sessions = {
            k: (session, base + next_url[len(self.base) :])
            for k, (session, next_url) in self.sessions.items()
        }
        crowd.pending = dict(self.pending)
        return crowd

    def arrive(self, k: int) -> Any:
        import requests

        if k not in self.sessions:
            session = requests.Session()
            entry = session.get(
                f"{self.base}{self.link}?PROLIFIC_PID=bench-{k}", timeout=harness.REQUEST_TIMEOUT
            )
            entry.raise_for_status()
            self.sessions[k] = (session, entry.url.rstrip("/") + "/next/")
            self.pending[k] = None
        return self.sessions[k]

    def play(self, k: int, arrived: Any, deadline: float) -> Played:
        import requests

        session, next_url = arrived
        rng = random.Random(k * 7919 + int(time.time()))
        played = Played()
        pid = f"bench-{k}"

        def call(kind: str, method: str, url: str, **kwargs) -> Any:
            began = time.monotonic()
            try:
                answer = session.request(method, url, timeout=harness.REQUEST_TIMEOUT, **kwargs)
            except requests.RequestException as exc:
                played.requests.append((began, time.monotonic(), kind, type(exc).__name__))
                return None
            played.requests.append((began, time.monotonic(), kind, answer.status_code))
            if answer.status_code == 503:
                played.retry_after[answer.headers.get("Retry-After", "missing")] += 1
            return answer

        def pause(answer: Any) -> None:
            wait = 0.5
            if answer is not None and answer.headers.get("Retry-After", "").isdigit():
                wait = min(wait, int(answer.headers["Retry-After"]))
            time.sleep(wait)

        while time.monotonic() < deadline:
            pending = self.pending[k]
            if pending is None:
                page = call("next", "GET", next_url)
                if page is None or page.status_code != 200:
                    pause(page)
                    continue
                action = FORM_ACTION.search(page.text)
                if action is None:
                    if "Thank you" not in page.text:
                        played.errors.append(f"{pid}: no form: {page.text[:200]!r}")
                    break
                token = action.group(1).rstrip("/").rsplit("/", 1)[-1]
                csrf = CSRF_INPUT.search(page.text).group(1)
                pending = (action.group(1), token, rng.randint(1, 5), csrf)
                self.pending[k] = pending
            action, token, rating, csrf = pending
            answer = call(
                "submit",
                "POST",
                self.base + action,
                data={"csrfmiddlewaretoken": csrf, "rating": str(rating), "part": "0"},
                headers={"Referer": next_url},
            )
            if answer is not None and answer.status_code < 400 and 'id="vicr-next"' in answer.text:
                played.acked.append((pid, token, rating))
                self.pending[k] = None
                continue
            played.failed_answers.add((pid, token, rating))
            if answer is not None and answer.status_code < 500:
                # Refused for good (e.g. the lease expired): take a new item.
                played.errors.append(f"{pid}: POST {answer.status_code} {answer.text[:160]!r}")
                self.pending[k] = None
            pause(answer)
        return played


def run_load(crowd: Crowd, players: int, seconds: float, during) -> tuple[list[Played], dict]:
    """Run the players for ``seconds`` while ``during(started)`` injects a fault in a thread;
    return what each player did and what the fault recorded."""
    fault: dict[str, Any] = {}

    def inject() -> None:
        while not started:
            time.sleep(0.05)
        try:
            fault.update(during(started[0], seconds))
        except Exception as exc:  # reported, never raised in the thread
            fault["error"] = repr(exc)

    started: list[float] = []
    injector = threading.Thread(target=inject, daemon=True)
    injector.start()

    def arrive(k: int) -> Any:
        return crowd.arrive(k)

    def play(k: int, arrived: Any, deadline: float) -> Played:
        if not started:
            started.append(time.monotonic())
        return crowd.play(k, arrived, deadline)

    ran = harness.run_crowd(players, arrive=arrive, play=play, seconds=seconds)
    injector.join(timeout=120)
    if ran.errors:
        fault.setdefault("crowd_errors", ran.errors[:10])
    return ran.results, fault


def request_costs(results: list[Played], fault_start: float, fault_end: float) -> dict:
    """Failed requests by status from the fault's start, and the recovery time."""
    calls = sorted(call for played in results for call in played.requests)
    failed = Counter(
        str(status)
        for _began, ended, _kind, status in calls
        if ended >= fault_start and not (isinstance(status, int) and status < 400)
    )
    recovered = [
        ended
        for began, ended, _kind, status in calls
        if began >= fault_end and isinstance(status, int) and status < 400
    ]
    failed_before = Counter(
        str(status)
        for _began, ended, _kind, status in calls
        if ended < fault_start and not (isinstance(status, int) and status < 400)
    )
    retry_after: Counter = Counter()
    for played in results:
        retry_after.update(played.retry_after)
    return {
        "requests": len(calls),
        "failed_requests_by_status": dict(failed),
        "failed_requests_before_the_fault": dict(failed_before),
        "retry_after_of_503s": dict(retry_after),
        "seconds_to_recover": round(min(recovered) - fault_end, 2) if recovered else None,
    }


# ---------------------------------------------------------------------------------------
# Integrity of the judgments


def integrity(study, results: list[Played]) -> dict:
    """Every acknowledged submission stored once; no duplicates; counters exact."""
    from django.db import connection
    from django.db.models import Count, Q

    from annotation.models import Assignment, Item, Judgment

    connection.close()  # the database may have restarted under this connection
    acked = Counter(row for played in results for row in played.acked)
    failed = set().union(*(played.failed_answers for played in results)) if results else set()
    stored = Counter(
        Judgment.objects.filter(study=study).values_list(
            "participant__external_id", "assignment__token", "payload__rating"
        )
    )
    extra = stored - acked
    per_part = Judgment.objects.filter(study=study).values("assignment_id", "part")
    items = list(
        Item.objects.filter(study=study, kind="game")
        .annotate(
            stored=Count("judgments", distinct=True),
            open_leases=Count(
                "assignments", filter=Q(assignments__status=Assignment.Status.OPEN), distinct=True
            ),
        )
        .values_list("target", "judgment_count", "open_lease_count", "stored", "open_leases")
    )
    check = {
        "acknowledged": sum(acked.values()),
        "stored": sum(stored.values()),
        "lost": sum((acked - stored).values()),
        "duplicates": per_part.annotate(n=Count("id")).filter(n__gt=1).count()
        + Judgment.objects.filter(study=study)
        .values("participant_id", "item_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count(),
        "stored_after_an_error_answer": sum(n for row, n in extra.items() if row in failed),
        "stored_but_never_sent": sum(n for row, n in extra.items() if row not in failed),
        "items_with_wrong_counters": sum(
            1 for _t, count, leases, real, real_leases in items
            if count != real or leases != real_leases
        ),
        "items_over_target": sum(1 for target, _c, _l, real, _r in items if real > target),
    }  # fmt: skip
    check["ok"] = not (
        check["lost"]
        or check["duplicates"]
        or check["stored_but_never_sent"]
        or check["items_with_wrong_counters"]
        or check["items_over_target"]
    )
    return check


# ---------------------------------------------------------------------------------------
# The researcher: asks for jobs through the API and the pages


class Researcher:
    def __init__(self, base: str):
        import requests

        self.base = base
        self.session = requests.Session()
        login = self.session.get(f"{base}/accounts/login/", timeout=30)
        csrf = CSRF_INPUT.search(login.text).group(1)
        done = self.session.post(
            f"{base}/accounts/login/",
            data={
                "username": RESEARCHER[0],
                "password": RESEARCHER[1],
                "csrfmiddlewaretoken": csrf,
            },
            timeout=30,
        )
        if "/accounts/login/" in done.url:
            raise SystemExit("the researcher could not log in")

    def api(self, method: str, path: str, **kwargs) -> Any:
        """An API call with HTTP Basic auth and no cookies (a session cookie would make DRF
        ask for a CSRF token)."""
        import requests

        return requests.request(method, self.base + path, auth=RESEARCHER, timeout=60, **kwargs)

    def _csrf(self, path: str) -> str:
        page = self.session.get(self.base + path, timeout=60)
        found = CSRF_INPUT.search(page.text)
        return found.group(1) if found else self.session.cookies.get("csrftoken", "")

    def export(self, study_id: int, export_format: str = "csv") -> dict:
        """POST the API (HTTP Basic); what came back, and how long it took."""
        began = time.monotonic()
        try:
            answer = self.api(
                "POST", f"/api/studies/{study_id}/exports/", json={"format": export_format}
            )
        except Exception as exc:
            return {"status": type(exc).__name__, "seconds": round(time.monotonic() - began, 2)}
        body = answer.json() if "json" in answer.headers.get("Content-Type", "") else {}
        return {
            "status": answer.status_code,
            "seconds": round(time.monotonic() - began, 2),
            "job": body.get("id"),
            "detail": body.get("detail") or (None if answer.ok else answer.text[:200]),
        }

    def report(self, study_id: int) -> dict:
        path = f"/studies/{study_id}/report/"
        csrf = self._csrf(path)
        began = time.monotonic()
        try:
            answer = self.session.post(
                self.base + path,
                data={"csrfmiddlewaretoken": csrf},
                headers={"Referer": self.base + path},
                timeout=60,
                allow_redirects=False,
            )
        except Exception as exc:
            return {"status": type(exc).__name__, "seconds": round(time.monotonic() - began, 2)}
        return {
            "status": answer.status_code,
            "seconds": round(time.monotonic() - began, 2),
            "says": _page_message(answer.text) if answer.status_code >= 400 else None,
        }

    def _post_upload(self, study_id: int, images: bytes, captions: bytes):
        """POST the import page (a zip of images and a captions CSV), not following; the
        answer and the POST's own seconds (the form's GET for its token not counted)."""
        path = f"/studies/{study_id}/import/"
        csrf = self._csrf(path)
        began = time.monotonic()
        answer = self.session.post(
            self.base + path,
            data={"csrfmiddlewaretoken": csrf, "purpose": "study"},
            files={
                "images_zip": ("images.zip", images, "application/zip"),
                "captions": ("captions.csv", captions, "text/csv"),
            },
            headers={"Referer": self.base + path},
            timeout=120,
            allow_redirects=False,
        )
        return answer, time.monotonic() - began

    def upload(self, study_id: int, images: bytes, captions: bytes) -> dict:
        answer, _seconds = self._post_upload(study_id, images, captions)
        if answer.status_code != 302:
            raise RuntimeError(f"the upload was refused: {answer.status_code} {answer.text[:800]}")
        return {"status": answer.status_code}

    def upload_refused(self, study_id: int, images: bytes, captions: bytes) -> dict:
        """POST the import page expecting a refusal: its status, Retry-After and message."""
        answer, seconds = self._post_upload(study_id, images, captions)
        return {
            "status": answer.status_code,
            "seconds": round(seconds, 2),
            "retry_after": answer.headers.get("Retry-After"),
            "says": _page_message(answer.text) if answer.status_code >= 400 else None,
        }

    def download(self, job_id: int) -> dict:
        """GET the job page's download (a presigned link is followed): status and bytes."""
        answer = self.session.get(
            f"{self.base}/jobs/{job_id}/download/", timeout=60, allow_redirects=False
        )
        outcome: dict[str, Any] = {"status": answer.status_code, "data": answer.content}
        if answer.status_code >= 400:
            outcome["says"] = _page_message(answer.text)
            outcome["retry_after"] = answer.headers.get("Retry-After")
        elif answer.status_code == 302:
            fetched = self.session.get(answer.headers["Location"], timeout=60)
            outcome.update(status_of_link=fetched.status_code, data=fetched.content)
        return outcome


def _page_message(text: str) -> str:
    found = re.search(r'role="alert">\s*(?:<p>)?([^<]+)', text)
    return found.group(1).strip()[:300] if found else text[:200]


def latest_job(study_id: int, kind: str):
    from django.db import connection

    from annotation.models import Job

    connection.close()
    return Job.objects.filter(study_id=study_id, kind=kind).order_by("-id").first()


def wait_job(job_id: int, timeout: float = JOB_TIMEOUT):
    from django.db import connection

    from annotation.models import Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.is_finished:
            return job
        time.sleep(0.1)
    connection.close()
    return Job.objects.get(pk=job_id)


def wait_running(job_id: int, timeout: float = 60, progress: int = 0):
    from annotation.models import Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.is_finished or (job.status == Job.Status.RUNNING and job.progress >= progress):
            return job
        time.sleep(0.01)
    return Job.objects.get(pk=job_id)


def job_summary(job) -> dict:
    return {
        "id": job.pk,
        "status": job.status,
        "error": job.error[:300] or None,
        "message": job.message[:200] or None,
    }


def export_rows(job, study) -> dict:
    """The export file's judgment ids against the study's judgments."""
    from django.conf import settings

    from annotation.models import Judgment

    path = Path(settings.CAPEVAL_EXPORT_DIR) / job.result_file
    with path.open(newline="", encoding="utf-8") as data:
        ids = [int(row["judgment_id"]) for row in csv.DictReader(data)]
    expected = set(Judgment.objects.filter(study=study).values_list("id", flat=True))
    return {
        "rows": len(ids),
        "duplicated_rows": len(ids) - len(set(ids)),
        "judgments": len(expected),
        "missing": len(expected - set(ids)),
    }


def files_of_job(job_id: int) -> list[str]:
    """Files in the export folder written for this job, under any name (.part included)."""
    from django.conf import settings

    root = Path(settings.CAPEVAL_EXPORT_DIR)
    return sorted(p.name for p in root.iterdir() if f"-export-{job_id}." in p.name)


# ---------------------------------------------------------------------------------------
# The faults


def fault_redis(redis: PrivateRedis, researcher: Researcher, study, hold: float):
    def during(started: float, seconds: float) -> dict:
        time.sleep(seconds * 0.25)
        began = time.monotonic()
        redis.stop()
        asked = {"export": researcher.export(study.pk), "report": researcher.report(study.pk)}
        time.sleep(max(0.0, hold - (time.monotonic() - began)))
        redis.start()
        ended = time.monotonic()
        return {"start": began, "end": ended, "asked_while_down": asked}

    return during


def fault_postgres(postgres: PrivatePostgres, hold: float):
    def during(started: float, seconds: float) -> dict:
        time.sleep(seconds * 0.3)
        began = time.monotonic()
        postgres.stop("fast")
        time.sleep(hold)
        postgres.start()
        return {"start": began, "end": time.monotonic()}

    return during


def after_redis(fault: dict, researcher: Researcher, study) -> dict:
    """What became of the jobs asked for while Redis was down, and a new export."""
    outcome: dict[str, Any] = {}
    asked = fault.get("asked_while_down", {})
    job_id = asked.get("export", {}).get("job")
    if job_id:
        outcome["export_asked_while_down"] = job_summary(wait_job(job_id, timeout=40))
    began = time.monotonic()
    again = researcher.export(study.pk)
    outcome["export_asked_after"] = again
    if again.get("job"):
        job = wait_job(again["job"])
        outcome["export_asked_after"]["job"] = job_summary(job)
        outcome["seconds_to_a_finished_export"] = round(time.monotonic() - began, 2)
    return outcome


def kill_during(kind: str, start_job, env: dict, folder: Path, worker: Worker, check):
    """Start a job, SIGKILL the worker while it runs, start another; report the outcome."""
    from annotation.models import Job

    job_id = start_job()
    running = wait_running(job_id, progress=5 if kind == "export" else 0)
    time.sleep(0.2 if kind == "import" else 0.0)
    running.refresh_from_db()
    was = {"status": running.status, "progress": running.progress}
    worker.kill()
    killed_at = time.monotonic()
    after_kill = Job.objects.get(pk=job_id)
    replacement = Worker(env, folder)
    job = wait_job(job_id)
    outcome = {
        "at_the_kill": was,
        "killed_mid_task": was["status"] == Job.Status.RUNNING
        and after_kill.status == Job.Status.RUNNING,
        "final": job_summary(job),
        "seconds_from_kill_to_end": round(time.monotonic() - killed_at, 2)
        if job.is_finished
        else None,
        "deliveries_to_the_new_worker": replacement.received(),
    }
    outcome.update(check(job))
    return outcome, replacement


def import_material(count: int) -> tuple[bytes, bytes]:
    """A zip of ``count`` distinct 96x96 PNGs and a captions CSV naming each once."""
    from PIL import Image

    rng = random.Random(11)
    archive = io.BytesIO()
    rows = ["image,system,caption"]
    with zipfile.ZipFile(archive, "w") as out:
        for n in range(count):
            picture = Image.frombytes("RGB", (96, 96), rng.randbytes(96 * 96 * 3))
            data = io.BytesIO()
            picture.save(data, "PNG")
            out.writestr(f"img-{n:04d}.png", data.getvalue())
            rows.append(f"img-{n:04d}.png,Bench,a noisy picture number {n}")
    return archive.getvalue(), ("\n".join(rows) + "\n").encode()


def fault_full_disk(researcher: Researcher, study) -> dict:
    from django.conf import settings

    from annotation.models import Job

    root = Path(settings.CAPEVAL_EXPORT_DIR)
    asked = researcher.export(study.pk)
    job = wait_running(asked["job"], progress=5)
    ballast = root / "ballast"
    began = time.monotonic()
    with ballast.open("wb", buffering=0) as out:  # fill it: write until the disk refuses
        try:
            while out.write(b"\0" * (1 << 20)):
                pass
        except OSError:
            pass
    filled_at_progress = Job.objects.get(pk=job.pk).progress
    job = wait_job(job.pk)
    polled = researcher.api("GET", f"/api/jobs/{job.pk}/").json()
    download = researcher.session.get(f"{researcher.base}/jobs/{job.pk}/download/", timeout=30)
    outcome = {
        "job": job_summary(job),
        "filled_at_progress": filled_at_progress,
        "failed_saying_the_disk_is_full": job.status == Job.Status.FAILED
        and job.error.startswith("The disk is full"),
        "files_left": files_of_job(job.pk),
        "download_url": polled.get("download_url"),
        "download_status": download.status_code,
    }
    ballast.unlink()
    again = researcher.export(study.pk)
    finished = wait_job(again["job"])
    outcome["export_after_freeing_space"] = job_summary(finished)
    outcome["seconds_to_recover"] = round(time.monotonic() - began, 2)
    outcome["ok"] = (
        outcome["failed_saying_the_disk_is_full"]
        and not outcome["files_left"]
        and outcome["download_url"] is None
        and outcome["download_status"] == 404
        and finished.status == Job.Status.DONE
    )
    return outcome


STORE_SAYS = "The file store did not answer"


def store_outage(server, researcher: Researcher, study, draft, material, hold: float):
    """During the load: an export finished, another running when the store stops; then an
    upload and a download of the finished one while it is down; the store started again."""

    def during(started: float, seconds: float) -> dict:
        from django.db import connection

        try:
            time.sleep(seconds * 0.2)
            finished = wait_job(researcher.export(study.pk)["job"])
            running = wait_running(researcher.export(study.pk)["job"], progress=5)
            began = time.monotonic()
            server.stop()
            asked = {
                "export_running_at": {"status": running.status, "progress": running.progress},
                "upload": researcher.upload_refused(draft.pk, *material),
                "download": researcher.download(finished.pk),
            }
            asked["download"].pop("data")
            failed = wait_job(running.pk, timeout=60)
            asked["export"] = job_summary(failed)
            asked["failed_export_download"] = researcher.download(failed.pk)["status"]
            time.sleep(max(0.0, hold - (time.monotonic() - began)))
            server.start()
            return {"start": began, "end": time.monotonic(), "failed_export": failed.pk, **asked}
        finally:
            connection.close()  # this thread's

    return during


def store_leftovers(store, failed_export: int | None) -> dict:
    """Objects of the failed upload and export still in the store."""
    names = store.objects()
    return {
        "uploads": sorted(n for n in names if n.startswith("uploads/")),
        "failed_export": sorted(n for n in names if f"-export-{failed_export}." in n),
    }


def fault_store_down(args, seconds, env, root, folder, workers, study, crowd, loads) -> dict:
    """Fault e: its own gunicorn and worker with the files in an s3rver the run stops."""
    import json

    from annotation.models import Job, Judgment, User
    from annotation.services.studies import study_create
    from tests.factories.object_store import StoppableObjectStore, s3_storages

    for worker in workers:  # one that writes to the local folders must not take these jobs
        worker.kill()
    server = StoppableObjectStore(root / "s3")
    store = server.start()
    # Sized for the judgments the load may have added by then (a player stores a few a
    # second), so an export takes at most about EXPORT_SECONDS.
    judgments = Judgment.objects.filter(study=study).count() + 5 * args.players * seconds
    s3env = {
        **env,
        "LOG_LEVEL": "CRITICAL",
        "FAULTS_STORAGES": json.dumps(s3_storages(store)),
        # An export slow enough for the store to be stopped midway.
        "FAULTS_EXPORT_SLICE_ROWS": str(
            max(1, round(judgments * EXPORT_SLICE_SLEEP / EXPORT_SECONDS))
        ),
    }
    try:
        workers.append(Worker(s3env, folder))
        draft = study_create(
            owner=User.objects.get(username=RESEARCHER[0]),
            name="Faults store import",
            mode="vicr",
            settings={},
        )
        material = import_material(5)
        with harness.gunicorn(s3env, workers=args.workers) as web:
            researcher = Researcher(web.base)
            during = store_outage(
                server, researcher, study, draft, material, args.store_down_seconds
            )
            played, fault = run_load(crowd.moved(web.base), args.players, seconds, during)
            loads += played
            entry: dict[str, Any] = {"store_down_seconds": None}
            if "end" not in fault:  # the fault did not run to its end: say why
                entry["fault_error"] = fault.get("error") or fault.get("crowd_errors")
                entry["ok"] = False
                return entry
            entry["store_down_seconds"] = round(fault["end"] - fault["start"], 2)
            entry.update(request_costs(played, fault["start"], fault["end"]))
            entry.update({k: fault[k] for k in ("export_running_at", "upload", "download")})
            entry["export"] = fault["export"]
            entry["failed_export_download"] = fault["failed_export_download"]
            entry["left_after_the_restart"] = store_leftovers(store, fault["failed_export"])
            began = time.monotonic()
            again = wait_job(researcher.export(study.pk)["job"])
            fetched = researcher.download(again.pk) if again.status == Job.Status.DONE else {}
            text = fetched.get("data", b"").decode("utf-8", "replace")
            rows = len(list(csv.reader(io.StringIO(text)))) - 1
            entry["next_export"] = {
                **job_summary(again),
                "seconds": round(time.monotonic() - began, 2),
                "download": fetched.get("status_of_link", fetched.get("status")),
                "rows_downloaded": rows,
                "rows_exported": (again.result or {}).get("rows"),
            }
            entry["left_after_the_next_export"] = store_leftovers(store, fault["failed_export"])
        unfinished = Job.objects.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING])
        entry["jobs_unfinished"] = unfinished.count()
        entry["import_jobs_made"] = Job.objects.filter(study=draft).count()
        entry["integrity"] = integrity(study, loads)
    finally:
        server.stop()
    upload, download, export = entry["upload"], entry["download"], entry["export"]
    entry["ok"] = (
        upload["status"] == 503
        and bool(upload["retry_after"])
        and (upload["says"] or "").startswith(STORE_SAYS)
        and download["status"] == 503
        and (download.get("says") or "").startswith(STORE_SAYS)
        and export["status"] == Job.Status.FAILED
        and (export["error"] or "").startswith(STORE_SAYS)
        and entry["failed_export_download"] == 404
        and entry["jobs_unfinished"] == 0
        and entry["import_jobs_made"] == 0
        and not any(entry["left_after_the_restart"].values())
        and not any(entry["left_after_the_next_export"].values())
        and entry["next_export"]["status"] == Job.Status.DONE
        and entry["next_export"]["download"] == 200
        and entry["next_export"]["rows_downloaded"] == entry["next_export"]["rows_exported"]
        and not entry["failed_requests_by_status"]
        and entry["integrity"]["ok"]
    )
    return entry


# ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20, help="each load (at most 60)")
    parser.add_argument("--players", type=int, default=12)
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--pg-down-seconds", type=float, default=3)
    parser.add_argument("--redis-down-seconds", type=float, default=4)
    parser.add_argument("--images", type=int, default=150, help="images of the import")
    parser.add_argument("--store-down-seconds", type=float, default=3)
    parser.add_argument(
        "--faults", default="abcde", help="the faults to run, by letter (e.g. e, or ae)"
    )
    args = parser.parse_args()
    args.faults = set(args.faults.lower())
    if not args.faults <= set("abcde"):
        parser.error("--faults takes letters among a, b, c, d and e")
    seconds = harness.bounded_seconds(args.seconds)
    root = Path(tempfile.mkdtemp(prefix="capeval-faults-"))
    os.chmod(root, 0o755)
    postgres = PrivatePostgres(root)
    redis = PrivateRedis(root)
    exports = root / "exports"
    exports.mkdir()
    tmpfs = "d" in args.faults and mount_tmpfs(exports)
    workers: list[Worker] = []
    try:
        postgres.start()
        redis.start()
        env = prepare(postgres, redis, root, exports)
        result = run(args, seconds, env, postgres, redis, root, tmpfs, workers)
    finally:
        for worker in workers:
            worker.kill()
        redis.stop()
        postgres.remove()
        if tmpfs:
            subprocess.run(["umount", str(exports)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    harness.write_result("faults", result)
    if not result["ok"]:
        sys.exit(1)


def prepare(postgres: PrivatePostgres, redis: PrivateRedis, root: Path, exports: Path) -> dict:
    """Create and migrate the database, write the run's settings, set Django up."""
    import psycopg

    with psycopg.connect(f"{postgres.server}/postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{DATABASE}"')
    settings_folder = root / "settings"
    settings_folder.mkdir()
    (settings_folder / "capeval_faults_settings.py").write_text(
        SETTINGS_MODULE.format(
            var=str(root / "var"),
            exports=str(exports),
            rows=EXPORT_SLICE_ROWS,
            sleep=EXPORT_SLICE_SLEEP,
            visibility=VISIBILITY_TIMEOUT,
        )
    )
    env = {
        **os.environ,
        "DATABASE_URL": f"{postgres.server}/{DATABASE}",
        "REDIS_URL": redis.url,
        "DJANGO_SETTINGS_MODULE": "capeval_faults_settings",
        "PYTHONPATH": os.pathsep.join([str(settings_folder), str(REPO), str(REPO / "platform")]),
        "ALLOWED_HOSTS": "127.0.0.1",
        "CAPEVAL_DB_CONN_MAX_AGE": "60",
        "DEBUG": "false",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
    )
    os.environ.update(env)
    for path in (str(settings_folder), str(REPO / "platform"), str(REPO)):
        if path not in sys.path:
            sys.path.insert(0, path)
    import django

    django.setup()
    return env


def run(args, seconds, env, postgres, redis, root, tmpfs, workers) -> dict:
    from annotation.models import Caption, Image, Job, Judgment, Study, User
    from annotation.services.studies import study_create

    User.objects.create_user(RESEARCHER[0], password=RESEARCHER[1], is_researcher=True)
    study, link = vicr_game.build_study(
        args.players, args.pairs, name="Faults benchmark", game_ratings=VETERAN_RATINGS
    )
    Study.objects.filter(pk=study.pk).update(owner=User.objects.get(username=RESEARCHER[0]))
    result: dict[str, Any] = {
        "when": harness.now_iso(),
        "players": args.players,
        "pairs": args.pairs,
        "seconds_per_load": seconds,
        "gunicorn_workers": args.workers,
        "visibility_timeout_seconds": VISIBILITY_TIMEOUT,
        "faults": {},
    }
    folder = root / "logs"
    folder.mkdir()
    workers.append(Worker(env, folder))
    ok = True
    # The 503s are counted below; gunicorn's log of each would drown the report.
    quiet = {**env, "LOG_LEVEL": "CRITICAL"}
    with harness.gunicorn(quiet, workers=args.workers) as server:
        crowd = Crowd(server.base, link)
        researcher = Researcher(server.base)
        print(f"gunicorn on {server.base}; {args.players} players; {seconds:.0f} s per load")
        loads: list[Played] = []

        if "a" in args.faults:
            # a. Redis down during the load and while jobs are asked for
            print("a. Redis stopped during the load ...", flush=True)
            played, fault = run_load(
                crowd,
                args.players,
                seconds,
                fault_redis(redis, researcher, study, args.redis_down_seconds),
            )
            loads += played
            entry = {"redis_down_seconds": round(fault["end"] - fault["start"], 2)}
            entry.update(request_costs(played, fault["start"], fault["end"]))
            entry["asked_while_down"] = fault.get("asked_while_down")
            entry.update(after_redis(fault, researcher, study))
            entry["worker_survived"] = workers[-1].process.poll() is None
            entry["integrity"] = integrity(study, loads)
            ok = ok and entry["integrity"]["ok"]
            result["faults"]["redis_down"] = entry
            show("redis_down", entry)

        if "c" in args.faults:
            # c. PostgreSQL restarted during the load
            print("c. PostgreSQL restarted during the load ...", flush=True)
            played, fault = run_load(
                crowd, args.players, seconds, fault_postgres(postgres, args.pg_down_seconds)
            )
            loads += played
            entry = {"postgres_down_seconds": round(fault["end"] - fault["start"], 2)}
            entry.update(request_costs(played, fault["start"], fault["end"]))
            if "error" in fault:
                entry["fault_error"] = fault["error"]
            entry["integrity"] = integrity(study, loads)
            ok = ok and entry["integrity"]["ok"]
            result["faults"]["postgres_restart"] = entry
            show("postgres_restart", entry)

        if "b" in args.faults:
            # b. The worker SIGKILLed during an import, an export and a report
            print(
                "b. The Celery worker killed during an import, an export, a report ...", flush=True
            )
            killed: dict[str, Any] = {}
            judgments = Judgment.objects.filter(study=study).count()
            slice_rows = max(1, round(judgments * EXPORT_SLICE_SLEEP / EXPORT_SECONDS))
            env["FAULTS_EXPORT_SLICE_ROWS"] = str(slice_rows)
            result["export_slice_rows_from_the_worker_kill_on"] = slice_rows
            draft = study_create(
                owner=User.objects.get(username=RESEARCHER[0]),
                name="Faults import",
                mode="vicr",
                settings={},
            )
            images, captions = import_material(args.images)

            def start_import() -> int:
                researcher.upload(draft.pk, images, captions)
                return latest_job(draft.pk, Job.Kind.IMPORT).pk

            def check_import(job) -> dict:
                stored_images = Image.objects.filter(study=draft).count()
                stored_captions = Caption.objects.filter(study=draft).count()
                return {
                    "images": stored_images,
                    "captions": stored_captions,
                    "duplicated_rows": max(0, stored_images - args.images)
                    + max(0, stored_captions - args.images),
                    "complete": stored_images == stored_captions == args.images,
                }

            def start_export() -> int:
                return researcher.export(study.pk)["job"]

            def check_export(job) -> dict:
                if job.status != Job.Status.DONE:
                    return {"duplicated_rows": 0}
                return export_rows(job, study)

            def start_report() -> int:
                researcher.report(study.pk)
                return latest_job(study.pk, Job.Kind.REPORT).pk

            def check_report(job) -> dict:
                # The result lives on the one job row; a second row would be a duplicate.
                later = Job.objects.filter(study=study, kind=Job.Kind.REPORT, pk__gt=job.pk)
                return {"duplicated_rows": later.count(), "has_result": bool(job.result)}

            for kind, start, check in (
                ("import", start_import, check_import),
                ("export", start_export, check_export),
                ("report", start_report, check_report),
            ):
                outcome, replacement = kill_during(kind, start, env, folder, workers[-1], check)
                workers.append(replacement)
                killed[kind] = outcome
                finished_once = outcome["final"]["status"] in (Job.Status.DONE, Job.Status.FAILED)
                ok = ok and finished_once and not outcome.get("duplicated_rows")
            result["faults"]["worker_killed"] = killed
            show("worker_killed", killed)

        if "d" in args.faults:
            # d. The export folder fills up during an export
            if tmpfs:
                print("d. The export folder fills up during an export ...", flush=True)
                entry = fault_full_disk(researcher, study)
                ok = ok and entry["ok"]
            else:
                entry = {"skipped": "no tmpfs could be mounted (run as root to include this fault)"}
            result["faults"]["export_disk_full"] = entry
            show("export_disk_full", entry)

    if "e" in args.faults:
        # e. The object store down during an export, an upload and a download
        missing = _store.missing()
        if missing:
            entry = {"skipped": missing}
        else:
            print("e. The object store stopped during the load and an export ...", flush=True)
            entry = fault_store_down(args, seconds, env, root, folder, workers, study, crowd, loads)
            ok = ok and entry["ok"]
        result["faults"]["object_store_down"] = entry
        show("object_store_down", {k: v for k, v in entry.items() if k != "integrity"})

    result["integrity_at_the_end"] = integrity(study, loads)
    result["ok"] = ok and result["integrity_at_the_end"]["ok"]
    headline(result)
    return result


def headline(result: dict) -> None:
    """One line per fault: what it cost and what was lost."""
    faults = result["faults"]
    print("\n=== what each fault cost", flush=True)
    for name in ("redis_down", "postgres_restart"):
        entry = faults.get(name)
        if entry is None:
            continue
        check = entry["integrity"]
        print(
            f"{name:18} failed requests {entry['failed_requests_by_status'] or 0}, "
            f"recovered in {entry['seconds_to_recover']} s, lost {check['lost']}, "
            f"duplicates {check['duplicates']}, counters exact "
            f"{check['items_with_wrong_counters'] == 0}"
        )
    if "redis_down" in faults:
        redis = faults["redis_down"]
        asked = redis.get("asked_while_down") or {}
        print(
            f"{'':18} jobs asked while Redis was down: export "
            f"{asked.get('export', {}).get('status')}, report "
            f"{asked.get('report', {}).get('status')}; a new export finished "
            f"{redis.get('seconds_to_a_finished_export')} s after Redis came back"
        )
    for kind, entry in faults.get("worker_killed", {}).items():
        print(
            f"worker killed: {kind:6} killed mid-task {entry['killed_mid_task']} at "
            f"{entry['at_the_kill']['progress']}%, ended {entry['final']['status']} "
            f"{entry['seconds_from_kill_to_end']} s after the kill, duplicated rows "
            f"{entry.get('duplicated_rows')}"
        )
    disk = faults.get("export_disk_full")
    if disk is None:
        pass
    elif "skipped" in disk:
        print(f"export disk full:  skipped ({disk['skipped']})")
    else:
        print(
            f"export disk full:  job {disk['job']['status']} ({(disk['job']['error'] or '')[:40]}"
            f"...), files left {disk['files_left']}, download {disk['download_status']}, next "
            f"export {disk['export_after_freeing_space']['status']}"
        )
    store_line(faults.get("object_store_down"))
    end = result["integrity_at_the_end"]
    print(
        f"at the end: {end['acknowledged']} acknowledged, {end['stored']} stored, lost "
        f"{end['lost']}, duplicates {end['duplicates']}, ok {result['ok']}\n",
        flush=True,
    )


def store_line(store: dict | None) -> None:
    """Fault e's outcome in two lines."""
    if store is None:
        return
    if "skipped" in store or "fault_error" in store:
        print(f"object store down: {store.get('skipped') or store.get('fault_error')}")
        return
    upload, export, again = store["upload"], store["export"], store["next_export"]
    left = {k: len(v) for k, v in store["left_after_the_next_export"].items()}
    check = store["integrity"]
    print(
        f"{'object store down':18} for {store['store_down_seconds']} s: failed requests "
        f"{store['failed_requests_by_status'] or 0}, lost {check['lost']}, duplicates "
        f"{check['duplicates']}, counters exact {check['items_with_wrong_counters'] == 0}"
    )
    print(
        f"{'':18} upload {upload['status']} (Retry-After {upload['retry_after']}, "
        f"{upload['seconds']} s), download {store['download']['status']}, export stopped at "
        f"{store['export_running_at']['progress']}% ended {export['status']} "
        f"({(export['error'] or '')[:40]}...), its download {store['failed_export_download']}"
    )
    print(
        f"{'':18} objects left {left}, jobs unfinished {store['jobs_unfinished']}, import "
        f"jobs made {store['import_jobs_made']}; next export {again['status']} in "
        f"{again['seconds']} s, downloaded {again['download']} with {again['rows_downloaded']}"
        f" of {again['rows_exported']} rows; ok {store['ok']}"
    )


def show(name: str, entry: dict) -> None:
    import json

    print(f"--- {name}", json.dumps(entry, indent=1, default=str)[:4000], flush=True)


if __name__ == "__main__":
    main()
