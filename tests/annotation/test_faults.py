"""Faults with the real components that need no server restart: a full disk during an export,
and PostgreSQL going down under a participant's submission.

- Full disk: the export folder is a small tmpfs mounted for the test (root or CAP_SYS_ADMIN
  needed; elsewhere the tests skip, and fail under ``CAPEVAL_REQUIRE_SERVICES=1``), filled
  with a ballast file until only a few pages are free. The export job runs as on the site
  and must fail with "The disk is full", leave no file (no ``.part``, nothing under the
  final names), offer no download; once space is freed the same export succeeds.
- PostgreSQL down: a private PostgreSQL cluster (``initdb`` in a temporary folder, a free
  loopback port, run as the ``postgres`` user when we are root) is migrated once for the
  module; a test points Django's default connection at it, drives the real pages with the
  test client, stops the cluster (``pg_ctl stop -m fast``, as a restart does: open
  connections are cut with admin_shutdown, new ones refused) and starts it again. The test
  database and the machine's own PostgreSQL are never touched.

``bench/faults.py`` runs the faults that need a restart (Redis, the Celery worker,
PostgreSQL under load) against gunicorn.
"""

import logging
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper
from django.http import HttpResponse
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse
from django.utils import timezone

from annotation.middleware import DatabaseUnavailableMiddleware
from annotation.models import Assignment, Job, Judgment, Participant, User
from annotation.services.exports import export_request
from annotation.services.participants import crowd_link_token
from annotation.tasks import enqueue
from annotation.views import health
from tests.factories.core import assert_counts_exact, skip_or_fail, vehicle_study

REPO = Path(__file__).resolve().parents[2]
TMPFS_BYTES = 1 << 20
FREE_BYTES = 48 << 10  # what the ballast leaves: less than any of the exports below


# ---------------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(settings, tmp_path) -> Iterator[Path]:
    """A 1 MiB tmpfs as the export folder; unmounted afterwards."""
    folder = tmp_path / "exports-tmpfs"
    folder.mkdir()
    mount = shutil.which("mount")
    if mount is None:
        skip_or_fail("a full disk needs mount(8) to mount a small tmpfs")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        skip_or_fail(
            "a full disk needs a small tmpfs, and mounting one was refused (root or "
            f"CAP_SYS_ADMIN needed): {done.stderr.strip()}"
        )
    settings.CAPEVAL_EXPORT_DIR = folder
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path, *, leave: int) -> Path:
    """Write a ballast file until only about ``leave`` bytes are free; return it."""
    ballast = folder / "ballast"
    free = shutil.disk_usage(folder).free
    with ballast.open("wb") as out:
        out.write(b"\0" * (free - leave))
    assert shutil.disk_usage(folder).free <= leave + 4096
    return ballast


def judged(owner, *, judgments: int):
    """A live vehicle study with ``judgments`` stored judgments whose payloads carry
    random text, so that no format compresses the export below the free space."""
    study = vehicle_study(owner, captions=judgments // 20, target=20)
    items = list(study.items.order_by("id"))
    people = Participant.objects.bulk_create(
        Participant(study=study, source=Participant.Source.PROLIFIC, external_id=f"w{n}")
        for n in range(20)
    )
    now = timezone.now()
    leases = Assignment.objects.bulk_create(
        Assignment(
            participant=person,
            item=item,
            status=Assignment.Status.SUBMITTED,
            served_at=now,
            expires_at=now,
            submitted_at=now,
        )
        for item in items
        for person in people
    )
    Judgment.objects.bulk_create(
        Judgment(
            study=study,
            item_id=lease.item_id,
            participant_id=lease.participant_id,
            assignment=lease,
            payload={"rating": 3, "note": secrets.token_hex(32)},
            result={},
            dwell_ms=1000,
        )
        for lease in leases
    )
    study.items.update(judgment_count=20)
    return study


def export_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in ("ballast", "lost+found"))


@pytest.mark.django_db
@pytest.mark.parametrize("export_format", ["csv", "jsonl", "parquet", "dataset"])
def test_an_export_on_a_full_disk_fails_cleanly_and_offers_no_file(
    export_format, small_disk, client, researcher, django_capture_on_commit_callbacks
):
    study = judged(researcher, judgments=2000)
    ballast = fill(small_disk, leave=FREE_BYTES)
    client.force_login(researcher)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("api_study_exports", args=[study.pk]),
            {"format": export_format},
            content_type="application/json",
        )

    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("The disk is full"), job.error
    assert job.result_file == ""
    assert export_files(small_disk) == [], "no partial file, under any name"
    polled = client.get(reverse("api_job", args=[job.pk])).json()
    assert (polled["status"], polled["download_url"]) == ("failed", None)
    assert "The disk is full" in polled["error"]
    assert client.get(reverse("job_download", args=[job.pk])).status_code == 404
    page = client.get(reverse("job_status", args=[job.pk]))
    assert b"The disk is full" in page.content and b"/download/" not in page.content

    ballast.unlink()
    with django_capture_on_commit_callbacks(execute=True):
        again = enqueue(export_request(study=study, user=researcher, export_format=export_format))
    again.refresh_from_db()
    assert again.status == Job.Status.DONE, again.error
    assert again.result["judgments"] == Judgment.objects.filter(study=study).count() == 2000
    download = client.get(reverse("job_download", args=[again.pk]))
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == (small_disk / again.result_file).read_bytes()


@pytest.mark.django_db
def test_a_finished_export_whose_file_is_gone_is_not_offered(
    client, researcher, django_capture_on_commit_callbacks
):
    study = judged(researcher, judgments=40)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(export_request(study=study, user=researcher, export_format="csv"))
    job.refresh_from_db()
    url = reverse("api_job", args=[job.pk])
    assert client.get(url).json()["download_url"].endswith(f"/api/jobs/{job.pk}/file/")

    (Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file).unlink()

    assert client.get(url).json()["download_url"] is None
    assert client.get(reverse("job_download", args=[job.pk])).status_code == 404
    assert client.get(reverse("api_job_file", args=[job.pk])).status_code == 404


# ---------------------------------------------------------------------- PostgreSQL down


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """A throw-away PostgreSQL cluster on a loopback port, ours to stop and start."""

    def __init__(self):
        folders = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        initdb = str(folders[-1]) if folders else shutil.which("initdb")
        if initdb is None:
            skip_or_fail("a private PostgreSQL cluster needs initdb and pg_ctl on this machine")
        self.bin = Path(initdb).parent
        self.folder = Path(tempfile.mkdtemp(prefix="capeval-faults-pg-"))
        self.port = free_port()
        # initdb refuses to run as root: the cluster belongs to the postgres user then.
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                skip_or_fail("running as root, and there is no postgres user to own a cluster")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, str(self.bin / tool), *args], capture_output=True, text=True
        )
        if done.returncode:
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off"
        )
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def remove(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
             "stop"],
            capture_output=True,
        )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    """A private cluster with a migrated database ``capeval_faults``."""
    cluster = PrivatePostgres()
    try:
        cluster.start()
        subprocess.run(
            [*cluster.prefix, str(cluster.bin / "createdb"), "-h", "127.0.0.1", "-p",
             str(cluster.port), "-U", "postgres", "capeval_faults"],
            check=True,
        )  # fmt: skip
        env = {**os.environ, "DATABASE_URL": cluster.url("capeval_faults")}
        env["DJANGO_SETTINGS_MODULE"] = "capeval.settings"
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
        )
        yield cluster
    finally:
        cluster.remove()


@contextmanager
def on_database(cluster: PrivatePostgres, django_db_blocker) -> Iterator[None]:
    """Django's default connection (this thread's, which the test client uses) goes to the
    private cluster until the block ends; the test database's connection is put back."""
    saved = connections["default"]
    settings_dict = {
        **saved.settings_dict,
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "capeval_faults",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": "127.0.0.1",
        "PORT": str(cluster.port),
        "OPTIONS": {},
        "CONN_HEALTH_CHECKS": True,
    }
    private = DatabaseWrapper(settings_dict, "default")
    connections["default"] = private
    try:
        with django_db_blocker.unblock():
            yield
    finally:
        private.close()
        connections["default"] = saved


def crowd_browser(study) -> tuple[Client, str]:
    """A crowd worker's browser that arrived through the link and holds a lease."""
    browser = Client(REMOTE_ADDR="198.51.100.7", raise_request_exception=False)
    link = reverse("crowd_entry", args=[crowd_link_token(study)])
    assert browser.get(link, {"PROLIFIC_PID": "worker-1"}).status_code == 302
    page = browser.get(reverse("participate_next", args=[study.public_id]))
    assert page.status_code == 200
    return browser, page.context["assignment"].token


def test_a_submission_while_postgresql_is_down_answers_503_and_is_accepted_after(
    private_postgres, django_db_blocker, caplog
):
    with on_database(private_postgres, django_db_blocker):
        owner = User.objects.create_user("rita-faults", password="pw", is_researcher=True)
        study = vehicle_study(owner, captions=2, target=1)
        browser, token = crowd_browser(study)
        submit_url = reverse("participate_submit", args=[study.public_id, token])
        api = Client(raise_request_exception=False)
        api.force_login(owner)

        private_postgres.stop()  # cuts the open connection (admin_shutdown), refuses new ones
        try:
            with caplog.at_level(logging.WARNING, logger="annotation.views.health"):
                cut = browser.post(submit_url, {"rating": "4", "part": "0"})
                # A server closes a failed connection at the end of the request; the test
                # client does not, so close it: the next request must connect anew.
                connection.close()
                refused = browser.post(submit_url, {"rating": "4", "part": "0"})
                listed = api.get(reverse("api_studies"))
        finally:
            private_postgres.start()

        for down in (cut, refused):
            assert down.status_code == 503, down.content[:500]
            assert down["Retry-After"] == str(health.RETRY_AFTER_SECONDS)
            assert "The database is unavailable" in down.content.decode()
        assert listed.status_code == 503
        assert listed["Retry-After"] == str(health.RETRY_AFTER_SECONDS)
        assert listed.json() == {"detail": health.UNAVAILABLE_MESSAGE}
        logged = [r.getMessage() for r in caplog.records if "answering" in r.getMessage()]
        assert len(logged) == 3 and "POST /s/" in logged[0], logged
        connection.close()
        assert not Judgment.objects.exists(), "a 503 stored nothing"

        retried = browser.post(submit_url, {"rating": "4", "part": "0"})

        assert retried.status_code in (200, 302), retried.content[:500]
        stored = Judgment.objects.get()
        assert (stored.assignment.token, stored.payload) == (token, {"rating": 4})
        assert_counts_exact(study)
        assert api.get(reverse("api_studies")).status_code == 200
        assert browser.get(reverse("healthz")).content == b"ok\n"


def test_the_health_probe_says_503_while_postgresql_is_down(private_postgres, django_db_blocker):
    with on_database(private_postgres, django_db_blocker):
        probe = Client(raise_request_exception=False)
        assert probe.get("/healthz").status_code == 200
        private_postgres.stop()
        try:
            down = probe.get("/healthz")
        finally:
            private_postgres.start()
        assert (down.status_code, down.content) == (503, b"database unavailable\n")
        assert down["Retry-After"] == str(health.RETRY_AFTER_SECONDS)
        connection.close()  # what a server does after a request whose connection failed
        assert probe.get("/healthz").content == b"ok\n", "a new connection after the restart"


class LoadsTheUserMiddleware:
    """A middleware that reads the database itself (as session or user loading can), so that
    the failure happens outside any view."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.user.is_authenticated  # noqa: B018 - evaluates the lazy user: a query
        return self.get_response(request)


def test_an_outage_inside_a_middleware_answers_503_too(private_postgres, django_db_blocker):
    middleware = [*django_settings.MIDDLEWARE, f"{__name__}.LoadsTheUserMiddleware"]
    with on_database(private_postgres, django_db_blocker), override_settings(MIDDLEWARE=middleware):
        owner = User.objects.create_user("rita-mw", password="pw", is_researcher=True)
        browser = Client(raise_request_exception=False)
        browser.force_login(owner)
        private_postgres.stop()
        try:
            page = browser.get(reverse("home"))
            api = browser.get(reverse("api_studies"))
        finally:
            private_postgres.start()
    assert (page.status_code, page["Retry-After"]) == (503, str(health.RETRY_AFTER_SECONDS))
    assert (api.status_code, api.json()) == (503, {"detail": health.UNAVAILABLE_MESSAGE})


def raised(private_postgres, django_db_blocker, sql: str) -> Exception:
    with on_database(private_postgres, django_db_blocker):
        with pytest.raises(Exception) as caught, connection.cursor() as cursor:
            cursor.execute(sql)
        return caught.value


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM no_such_table",  # ProgrammingError
        "SET statement_timeout = 1; SELECT pg_sleep(1)",  # OperationalError 57014
        "SELECT 1/0",  # DataError
    ],
)
def test_a_query_error_on_a_live_database_stays_a_500(private_postgres, django_db_blocker, sql):
    error = raised(private_postgres, django_db_blocker, sql)
    request = RequestFactory().get("/api/studies/")
    middleware = DatabaseUnavailableMiddleware(lambda request: HttpResponse())

    assert not health.database_unreachable(error)
    assert middleware.process_exception(request, error) is None


@pytest.mark.django_db
def test_sqlite_or_postgres_errors_of_the_test_database_are_not_outages():
    with pytest.raises(Exception) as caught, connection.cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table")
    assert not health.database_unreachable(caught.value)
