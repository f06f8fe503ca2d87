"""The compose file's services as it starts them: production settings, its environment, its
commands and its healthchecks, on this machine; and its shape (replicas, one published
port, no shared files volume, migrations once) and its reverse proxy.

``docker-compose.yml`` is read with PyYAML (``${VAR:-default}`` filled in from test values)
and the Dockerfile's ``ENV`` lines give what the image adds (``/app`` is the repository
here). The migrate service's command, then the web service's own (gunicorn), run with the
port changed to a free loopback one and ``DATABASE_URL`` pointing at the test database
(PostgreSQL, or a SQLite file); then the web healthcheck's own command must pass. The
worker's command runs against a private redis-server on a free port, and its healthcheck
must pass too, and fail once the worker is gone. The proxy's nginx configuration runs in a
real nginx in front of two loopback servers that echo what reaches them. ``.ci/run``
validates the file itself with ``docker-compose config``; ``test_deploy_kubernetes.py``
compares the Kubernetes manifests with it.
"""

import http.server
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
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
OPERATOR_ENV = {
    "SECRET_KEY": "t" * 64,
    "POSTGRES_PASSWORD": "test-password",
    "MINIO_ROOT_USER": "store-admin",
    "MINIO_ROOT_PASSWORD": "store-admin-password",
    "AWS_ACCESS_KEY_ID": "capeval-app",
    "AWS_SECRET_ACCESS_KEY": "capeval-app-secret",
}
#: The host the compose file's defaults serve the site (and its bucket) on.
SITE_HOST = "capeval.localhost"
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


def compose_services() -> dict[str, dict]:
    """docker-compose.yml's services as written (anchors merged, variables not filled in)."""
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]


def compose_service(name: str, env: dict[str, str]) -> dict:
    """One service of docker-compose.yml, anchors merged and variables filled in."""
    services = compose_services()

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


def migrate(tmp_path: Path, operator: dict[str, str]) -> None:
    """The migrate service's command, as compose runs it once before the web replicas."""
    service = compose_service("migrate", {**OPERATOR_ENV, **operator})
    migrated = subprocess.run(
        shlex.split(service["command"]), cwd=REPO, env=service_env(service, tmp_path),
        capture_output=True, text=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr


def web_command(service: dict, port: int) -> list[str]:
    """The web service's command with gunicorn bound to ``port`` on the loopback."""
    command = shlex.split(service["command"])
    bind = command.index("--bind") + 1
    assert command[bind] == "0.0.0.0:8000", command
    command[bind] = f"127.0.0.1:{port}"
    return command


@contextmanager
def web_server(tmp_path: Path, **operator: str) -> Iterator[tuple[str, dict, dict]]:
    """The migrate service's command, then the web service's on a free loopback port, with
    ``operator`` variables set as in an .env file beside the compose file; yields (base URL,
    service, environment)."""
    migrate(tmp_path, operator)
    service = compose_service("web", {**OPERATOR_ENV, **operator})
    env = service_env(service, tmp_path)
    port = free_port()
    command = web_command(service, port)
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


def api_as(base: str, **headers: str) -> requests.Response:
    return requests.get(
        f"{base}/api/studies/",
        headers={"Host": SITE_HOST, **headers},
        timeout=REQUEST_TIMEOUT_S,
        allow_redirects=False,
    )


def test_x_forwarded_proto_is_believed_behind_the_compose_files_proxy(production_server):
    """The compose file's default: one proxy in front (deploy/nginx), whose header counts;
    the proxy test below shows that it replaces whatever a client sent."""
    base, _service, env = production_server
    assert env["CAPEVAL_TRUSTED_PROXIES"] == "1"

    proxied = api_as(base, **{"X-Forwarded-Proto": "https"})
    plain = api_as(base)

    assert proxied.status_code == 403, "served as HTTPS: the API asks for credentials"
    assert "Strict-Transport-Security" in proxied.headers
    assert plain.status_code == 301
    assert plain.headers["Location"] == f"https://{SITE_HOST}/api/studies/"


def test_x_forwarded_proto_from_a_client_does_not_make_a_request_secure_without_a_proxy(
    django_db_setup, tmp_path
):
    with web_server(tmp_path, CAPEVAL_TRUSTED_PROXIES="0") as (base, _service, env):
        assert env["CAPEVAL_TRUSTED_PROXIES"] == "0"
        plain = api_as(base)
        forged = api_as(base, **{"X-Forwarded-Proto": "https"})

    assert plain.status_code == 301
    assert plain.headers["Location"] == f"https://{SITE_HOST}/api/studies/"
    assert forged.status_code == 301, "the forged header passed for HTTPS"
    assert forged.headers["Location"] == f"https://{SITE_HOST}/api/studies/"


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


def without_broker(service: dict, tmp_path: Path) -> dict[str, str]:
    env = service_env(service, tmp_path)
    del env["REDIS_URL"]
    env.pop("CAPEVAL_BROKER_DIR", None)
    return env


def test_the_migrate_and_web_commands_refuse_to_start_without_a_broker(django_db_setup, tmp_path):
    migrate_service = compose_service("migrate", OPERATOR_ENV)
    migrated = subprocess.run(
        shlex.split(migrate_service["command"]), cwd=REPO,
        env=without_broker(migrate_service, tmp_path), capture_output=True, text=True,
        timeout=START_TIMEOUT_S,
    )  # fmt: skip
    service = compose_service("web", OPERATOR_ENV)
    port = free_port()
    log = tmp_path / "web-without-broker.log"
    with running(web_command(service, port), without_broker(service, tmp_path), log) as process:
        deadline = time.monotonic() + START_TIMEOUT_S
        # gunicorn's master listens before a worker imports the app: an answer, not an
        # open port, is what must never happen.
        while process.poll() is None:
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            except requests.RequestException:
                assert time.monotonic() < deadline, "neither refused nor started"
                time.sleep(0.2)
                continue
            pytest.fail("gunicorn served under production settings without a broker")

    # migrate runs first in compose: its last line is the refusal itself, naming what to
    # set (not a connection error from the first job, nor a traceback deep in Celery).
    assert migrated.returncode != 0
    last = migrated.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), last
    assert "REDIS_URL" in last
    # gunicorn's workers refuse the same way, and gunicorn gives up instead of serving.
    assert process.returncode != 0
    refused = [line for line in log.read_text().splitlines() if "ImproperlyConfigured: " in line]
    assert refused and "REDIS_URL" in refused[-1], log.read_text()[-3000:]


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


# ------------------------------------------------------------------ the deployment that scales
# Issue 41: N web and M worker replicas behind one proxy, files in an object store.


def test_web_and_workers_run_two_replicas_by_default_and_beat_exactly_one():
    def replicas(name: str, **operator: str) -> int:
        return int(compose_service(name, {**OPERATOR_ENV, **operator})["deploy"]["replicas"])

    assert replicas("web") >= 2
    assert replicas("worker") >= 2
    assert replicas("web", CAPEVAL_WEB_REPLICAS="5") == 5
    assert replicas("worker", CAPEVAL_WORKER_REPLICAS="7") == 7
    assert replicas("beat") == 1, "two beats send every periodic task twice"


def test_only_the_proxy_publishes_a_port_on_loopback_unless_the_operator_says_otherwise():
    services = {name: compose_service(name, OPERATOR_ENV) for name in compose_services()}
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}, "a replica's own port cannot be published N times"
    assert services["proxy"]["ports"] == ["127.0.0.1:8000:8000"]
    opened = compose_service("proxy", {**OPERATOR_ENV, "CAPEVAL_WEB_PUBLISH": "0.0.0.0:80"})
    assert opened["ports"] == ["0.0.0.0:80:8000"]


def test_no_two_services_share_a_volume_and_web_and_workers_mount_none():
    """Files are in the bucket: a volume shared by replicas would not follow them to another
    machine. beat's schedule is in beat's own volume."""
    services = compose_services()
    users: dict[str, list[str]] = {}
    for name, service in services.items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if not source.startswith("."):  # a file of this repository, read-only
                users.setdefault(source, []).append(name)
    assert {volume: names for volume, names in users.items() if len(names) > 1} == {}
    for name in ("migrate", "web", "worker"):
        assert "volumes" not in services[name], name
    env = compose_service("web", OPERATOR_ENV)["environment"]
    assert env["CAPEVAL_S3_BUCKET"], "without a bucket the files would be on one replica's disk"


def test_migrations_run_once_before_the_replicas_start():
    services = compose_services()
    migrate_service = services["migrate"]
    assert shlex.split(migrate_service["command"])[:3] == ["python", "manage.py", "migrate"]
    assert migrate_service["restart"] == "no" and "deploy" not in migrate_service
    for name in ("web", "worker"):
        assert "migrate" not in services[name]["command"], f"{name} migrates per replica"
        waits = services[name]["depends_on"]["migrate"]["condition"]
        assert waits == "service_completed_successfully", name
        assert services[name]["depends_on"]["storage-init"]["condition"] == waits


def test_presigned_links_name_the_sites_own_host_which_the_proxy_serves():
    """Signature V4 signs the host of CAPEVAL_S3_ENDPOINT_URL: a browser must reach it (the
    published proxy), and the pages' img-src 'self' must admit it (the site's own host);
    inside the network the same name must reach the proxy (its alias)."""
    env = compose_service("web", OPERATOR_ENV)["environment"]
    proxy = compose_service("proxy", OPERATOR_ENV)
    endpoint = requests.utils.urlparse(env["CAPEVAL_S3_ENDPOINT_URL"])

    assert endpoint.hostname == SITE_HOST
    assert env["ALLOWED_HOSTS"].split(",") == [SITE_HOST]
    assert SITE_HOST in proxy["networks"]["default"]["aliases"]
    assert endpoint.port == int(proxy["ports"][0].rsplit(":", 1)[1])
    assert proxy["environment"]["CAPEVAL_S3_BUCKET"] == env["CAPEVAL_S3_BUCKET"]
    assert proxy["environment"]["CAPEVAL_MAX_UPLOAD_MB"] == env["CAPEVAL_MAX_UPLOAD_MB"] == "100"
    init = compose_service("storage-init", OPERATOR_ENV)
    assert init["environment"]["CAPEVAL_S3_BUCKET"] == env["CAPEVAL_S3_BUCKET"]
    assert init["environment"]["AWS_ACCESS_KEY_ID"] == env["AWS_ACCESS_KEY_ID"]
    script = "\n".join(init["command"])
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0, "a shell syntax error"


class Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with what reached it: path, headers, and its own name."""

    def do_GET(self):
        body = json.dumps({"server": self.server.name, "path": self.path,
                           "headers": dict(self.headers)}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_GET

    def log_message(self, *args):
        pass


@contextmanager
def echo_server(name: str) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    server.name = name
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory) -> Iterator[str]:
    """deploy/nginx's configuration as the proxy service renders it, in a real nginx whose
    upstreams "web" and "minio" are echo servers; yields its base URL."""
    binary = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if binary is None:
        skip_or_fail("the proxy test needs nginx (Debian's package)")
    tmp = tmp_path_factory.mktemp("nginx")
    service = compose_service("proxy", OPERATOR_ENV)
    template = (REPO / "deploy/nginx/templates/default.conf.template").read_text()
    for name, value in service["environment"].items():  # the image's envsubst, filtered
        if re.match(service["environment"]["NGINX_ENVSUBST_FILTER"], name):
            template = template.replace(f"${{{name}}}", str(value))
    assert "${" not in template, "a variable the proxy service does not set"
    port = free_port()
    with echo_server("web") as web_port, echo_server("store") as store_port:
        for old, new in [("http://web:8000", f"http://127.0.0.1:{web_port}"),
                         ("http://minio:9000", f"http://127.0.0.1:{store_port}"),
                         ("listen 8000 ", f"listen 127.0.0.1:{port} ")]:  # fmt: skip
            assert template.count(old) == 1, old
            template = template.replace(old, new)
        (tmp / "site.conf").write_text(template)
        (tmp / "nginx.conf").write_text(
            f"pid {tmp}/nginx.pid; error_log {tmp}/error.log; events {{}}\n"
            f"http {{ access_log off; client_body_temp_path {tmp}/body; "
            f"proxy_temp_path {tmp}/proxy; include {tmp}/site.conf; }}\n"
        )
        command = [binary, "-p", f"{tmp}", "-c", f"{tmp}/nginx.conf", "-e", f"{tmp}/error.log"]
        with running([*command, "-g", "daemon off;"], dict(os.environ), tmp / "nginx.log") as nginx:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert nginx.poll() is None, (tmp / "error.log").read_text()
                    assert time.monotonic() < deadline, "nginx did not listen"
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"


def through(proxy: str, target: str, **headers: str) -> dict:
    answer = requests.get(f"{proxy}{target}", headers={"Host": f"{SITE_HOST}:8000", **headers},
                          timeout=REQUEST_TIMEOUT_S)  # fmt: skip
    assert answer.status_code == 200, answer.text
    return {**answer.json(), "response": answer.headers}


def test_the_proxy_forwards_the_clients_address_and_its_own_scheme_to_the_web_replicas(proxy):
    seen = through(proxy, "/api/studies/", **{"X-Forwarded-For": "203.0.113.9",
                                              "X-Forwarded-Proto": "https"})  # fmt: skip

    assert seen["server"] == "web"
    assert seen["headers"]["Host"] == f"{SITE_HOST}:8000"
    # Appended: with CAPEVAL_TRUSTED_PROXIES=1 the app takes the last one, the real peer.
    assert seen["headers"]["X-Forwarded-For"] == "203.0.113.9, 127.0.0.1"
    assert seen["headers"]["X-Forwarded-Proto"] == "http", "a client's scheme passed through"


def test_the_proxy_passes_the_bucket_to_the_store_as_signed(proxy):
    bucket = compose_service("web", OPERATOR_ENV)["environment"]["CAPEVAL_S3_BUCKET"]
    target = f"/{bucket}/images/a%20b%2Bc.jpg?X-Amz-Credential=k%2F1&X-Amz-Signature=00ff"

    seen = through(proxy, target, Cookie="sessionid=secret")
    listing = through(proxy, f"/{bucket}?list-type=2")
    lookalike = through(proxy, f"/{bucket}x/images/a.jpg")

    assert seen["server"] == "store"
    # Signature V4 covers the host, the path and the query exactly as the app signed them.
    assert (seen["headers"]["Host"], seen["path"]) == (f"{SITE_HOST}:8000", target)
    assert "Cookie" not in seen["headers"]
    assert "sandbox" in seen["response"]["Content-Security-Policy"]
    assert seen["response"]["X-Content-Type-Options"] == "nosniff"
    assert (listing["server"], listing["path"]) == ("store", f"/{bucket}?list-type=2")
    assert lookalike["server"] == "web"


def test_the_proxy_refuses_a_body_above_the_apps_upload_limit(proxy):
    limit = int(compose_service("proxy", OPERATOR_ENV)["environment"]["CAPEVAL_MAX_UPLOAD_MB"])
    port = int(proxy.rsplit(":", 1)[1])

    def status(length: int) -> int:
        with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as sock:
            sock.sendall(f"POST /studies/ HTTP/1.1\r\nHost: {SITE_HOST}\r\nContent-Length: "
                         f"{length}\r\nConnection: close\r\n\r\n".encode())  # fmt: skip
            if length <= 1024:
                sock.sendall(b"x" * length)
            return int(sock.recv(64).split()[1])

    assert status(limit * 1024 * 1024 + 1) == 413
    assert status(10) == 200
