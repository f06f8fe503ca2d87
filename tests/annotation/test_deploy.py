"""The compose file's services as it starts them: production settings, its environment, its
commands and its healthchecks, on this machine.

``docker-compose.yml`` is read with PyYAML (``${VAR:-default}`` filled in from test values)
and the Dockerfile's ``ENV`` lines give what the image adds (``/app`` is the repository
here). The web service's own command (migrate, then gunicorn) runs with the port changed to
a free loopback one and ``DATABASE_URL`` pointing at the test database (PostgreSQL, or a
SQLite file); then the web healthcheck's own command must pass. The worker's command runs
against a private redis-server on a free port, and its healthcheck must pass too, and fail
once the worker is gone. ``.ci/run`` validates the file itself with ``docker-compose config``.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
import yaml
from django.db import connection

from tests.factories.core import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
#: What an operator would put in .env: secrets of the right shape, nothing else.
OPERATOR_ENV = {"SECRET_KEY": "t" * 64, "POSTGRES_PASSWORD": "test-password"}
#: A hang guard, not a speed limit: migrate and three gunicorn workers importing the app
#: take about 10 s of CPU when idle, and well over 90 s of wall time under the parallel
#: suite on two busy cores (CI's SQLite pass timed out at 90 s twice in one run).
START_TIMEOUT_S = 300
#: Generous: under the parallel suite a worker's first request competes for the CPU.
REQUEST_TIMEOUT_S = 60


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable syntax: ``$$``, ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``."""

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name, operator, word = match.group(1), match.group(2), match.group(3) or ""
        value = env.get(name, "")
        if operator == ":-" and not value:
            return word
        if operator == ":?" and not value:
            raise AssertionError(f"compose would refuse to start: {word}")
        return value

    return re.sub(r"\$\$|\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, text)


def compose_service(name: str, env: dict[str, str]) -> dict:
    """One service of docker-compose.yml, anchors merged and variables filled in."""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]

    def fill(value):
        if isinstance(value, str):
            return interpolate(value, env)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    return fill(services[name])


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV instructions, with the image's /app as this repository."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                found[key] = value.replace("/app", str(REPO))
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for_server() -> str:
    """The test database for the server when it is PostgreSQL's (the fixtures below depend
    on ``django_db_setup``, which creates it), else "" (the server then migrates a file)."""
    if connection.vendor == "postgresql":
        s = connection.settings_dict
        auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    return ""


def service_env(service: dict, tmp_path: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in {"HOME", "LANG", "TMPDIR"}}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"
    env.update(image_env())
    env.update({k: str(v) for k, v in service["environment"].items()})
    env["CAPEVAL_VAR_DIR"] = str(tmp_path / "var")
    env["DATABASE_URL"] = database_url_for_server() or f"sqlite:///{tmp_path / 'capeval.sqlite3'}"
    env.update(overrides)
    return env


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@contextmanager
def web_server(tmp_path: Path, **operator: str) -> Iterator[tuple[str, dict, dict]]:
    """The web service's command on a free loopback port, with ``operator`` variables set as
    in an .env file beside the compose file; yields (base URL, service, environment)."""
    service = compose_service("web", {**OPERATOR_ENV, **operator})
    env = service_env(service, tmp_path)
    port = free_port()
    command = shlex.split(service["command"])
    assert "0.0.0.0:8000" in command[-1], command
    command[-1] = command[-1].replace("0.0.0.0:8000", f"127.0.0.1:{port}")
    log = tmp_path / f"web-{port}.log"
    with running(command, env, log) as process:
        deadline = time.monotonic() + START_TIMEOUT_S
        # gunicorn's master listens before its workers have imported the app, so an open
        # port is not a ready server: wait for /healthz to answer, as Docker's retries do.
        base = f"http://127.0.0.1:{port}"
        while True:
            if process.poll() is not None:
                pytest.fail(f"the web command exited with {process.returncode}:\n{log.read_text()}")
            try:
                if requests.get(f"{base}/healthz", timeout=10).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not answer /healthz within {START_TIMEOUT_S} s")
            time.sleep(0.2)
        yield base, service, env


def healthcheck(service: dict, env: dict[str, str], port: int | None = None):
    """Run the service's healthcheck command as Docker would (CMD or CMD-SHELL)."""
    test = list(service["healthcheck"]["test"])
    if port is not None:
        test = [part.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for part in test]
    if test[0] == "CMD-SHELL":
        argv = ["sh", "-c", test[1]]
    else:
        assert test[0] == "CMD", test
        argv = test[1:]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def production_server(django_db_setup, tmp_path_factory) -> Iterator[tuple[str, dict, dict]]:
    """The web service as the compose file starts it, with the operator's defaults."""
    with web_server(tmp_path_factory.mktemp("web")) as started:
        yield started


def test_the_web_healthcheck_passes_under_the_compose_files_production_settings(
    production_server,
):
    base, service, env = production_server
    assert env["DJANGO_SETTINGS_MODULE"] == "capeval.settings.production"
    port = int(base.rsplit(":", 1)[1])

    # Docker marks the service unhealthy only after `retries` failures in a row.
    for _ in range(service["healthcheck"]["retries"]):
        checked = healthcheck(service, env, port)
        if checked.returncode == 0:
            break

    assert checked.returncode == 0, checked.stdout + checked.stderr
    probe = requests.get(f"{base}/healthz", timeout=REQUEST_TIMEOUT_S, allow_redirects=False)
    assert (probe.status_code, probe.text) == (200, "ok\n")
    # Only that exact path skips the host check: anything else from 127.0.0.1 is refused.
    other = requests.get(f"{base}/healthz/", timeout=REQUEST_TIMEOUT_S, allow_redirects=False)
    assert other.status_code == 400


def test_web_is_published_on_loopback_unless_the_operator_says_otherwise():
    ports = compose_service("web", OPERATOR_ENV)["ports"]
    assert ports == ["127.0.0.1:8000:8000"]
    opened = compose_service("web", {**OPERATOR_ENV, "CAPEVAL_WEB_PUBLISH": "0.0.0.0:8000"})
    assert opened["ports"] == ["0.0.0.0:8000:8000"]


def api_as(base: str, **headers: str) -> requests.Response:
    return requests.get(
        f"{base}/api/studies/",
        headers={"Host": "localhost", **headers},
        timeout=REQUEST_TIMEOUT_S,
        allow_redirects=False,
    )


def test_x_forwarded_proto_from_a_client_does_not_make_a_request_secure(production_server):
    base = production_server[0]

    plain = api_as(base)
    forged = api_as(base, **{"X-Forwarded-Proto": "https"})

    assert plain.status_code == 301
    assert plain.headers["Location"] == "https://localhost/api/studies/"
    assert forged.status_code == 301, "the forged header passed for HTTPS"
    assert forged.headers["Location"] == "https://localhost/api/studies/"


def test_x_forwarded_proto_is_believed_behind_a_configured_proxy(django_db_setup, tmp_path):
    with web_server(tmp_path, CAPEVAL_TRUSTED_PROXIES="1") as (base, _service, env):
        assert env["CAPEVAL_TRUSTED_PROXIES"] == "1"
        proxied = api_as(base, **{"X-Forwarded-Proto": "https"})
        plain = api_as(base)

    assert proxied.status_code == 403, "served as HTTPS: the API asks for credentials"
    assert "Strict-Transport-Security" in proxied.headers
    assert plain.status_code == 301


@pytest.fixture
def private_redis(tmp_path) -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        skip_or_fail("the worker healthcheck test needs redis-server (a private one is started)")
    port = free_port()
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(tmp_path)]  # fmt: skip
    with running(command, dict(os.environ), tmp_path / "redis.log"):
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("redis-server did not start")
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"


def test_the_worker_healthcheck_passes_while_the_worker_runs(
    django_db_setup, tmp_path, private_redis
):
    service = compose_service("worker", OPERATOR_ENV)
    env = service_env(service, tmp_path, REDIS_URL=private_redis)
    env["HOSTNAME"] = socket.gethostname()  # Docker sets it to the container's host name
    log = tmp_path / "worker.log"

    with running(shlex.split(service["command"]), env, log) as worker:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "ready." not in log.read_text():
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        alive = healthcheck(service, env)
    dead = healthcheck(service, env)

    assert alive.returncode == 0, alive.stdout + alive.stderr + log.read_text()[-3000:]
    assert "pong" in alive.stdout
    assert dead.returncode != 0, "a healthcheck that passes without a worker checks nothing"


# ---------------------------------------------------------------------- jobs need a worker
# Issue 45, row 13: without a broker, production ran a metrics job of 1,000 resamples inside
# the web request, past gunicorn's timeout (a 500). Production now refuses to start without
# one, and every kind of job carries a time limit to the worker.


def test_the_web_command_refuses_to_start_without_a_broker(django_db_setup, tmp_path):
    service = compose_service("web", OPERATOR_ENV)
    env = service_env(service, tmp_path)
    del env["REDIS_URL"]
    env.pop("CAPEVAL_BROKER_DIR", None)
    port = free_port()
    command = shlex.split(service["command"])
    command[-1] = command[-1].replace("0.0.0.0:8000", f"127.0.0.1:{port}")
    log = tmp_path / "web-without-broker.log"

    with running(command, env, log) as process:
        deadline = time.monotonic() + START_TIMEOUT_S
        while process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                assert time.monotonic() < deadline, "neither refused nor started"
                time.sleep(0.2)
                continue
            pytest.fail("gunicorn served under production settings without a broker")

    assert process.returncode != 0
    # The last line is the refusal itself, naming what to set (not a connection error from
    # the first job, nor a traceback from somewhere deep in Celery).
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), last
    assert "REDIS_URL" in last


def test_under_production_settings_every_kind_of_job_runs_on_a_worker_within_limits(tmp_path):
    """What the web service's settings say of jobs: never eager (inside the request), and a
    finite soft and hard time limit for every kind, below the broker's redelivery time."""
    from annotation.models import Job

    env = service_env(compose_service("web", OPERATOR_ENV), tmp_path)
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.CELERY_TASK_ALWAYS_EAGER, s.CAPEVAL_JOB_TIME_LIMITS, "
        "s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout']]))"
    )
    result = subprocess.run(
        [str(VENV_BIN / "python"), "-c", script], cwd=REPO, env={**env, "PYTHONPATH": str(
            REPO / "platform")}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    eager, limits, visibility = json.loads(result.stdout.strip().splitlines()[-1])

    assert eager is False
    assert set(limits) == set(Job.Kind.values), "a kind of job without a time limit"
    for kind, (soft, hard) in limits.items():
        assert 0 < soft < hard < visibility, kind
