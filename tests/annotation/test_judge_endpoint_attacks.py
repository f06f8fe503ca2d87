"""Attacks on a study's judge endpoint (issue 45, rows 2, 3 and 9), through the real views.

Row 2: an endpoint that echoes the API key (in an error body, in a reply, URL-encoded or
base64-encoded, at every offset across the 200-character excerpt's cut) must not get any
8 characters of it onto the judges page, the runs API, the job API, a log line or any
table. Row 3: an endpoint is where the server connects on a researcher's word, so
loopback, private, link-local and reserved addresses (literal, spelt oddly, or behind a
DNS name) are refused unless the deployment lists them in
``CAPEVAL_JUDGE_ALLOWED_HOSTS``; an allowed endpoint that is not a chat-completions server
shows no body excerpt, and a closed port reads the same as a filtered one. Row 9: a reply
has a total deadline per attempt and a size cap.

The servers are real HTTP servers on 127.0.0.1 (``tests/factories/judge_server.py`` and
the small raw ones below), allowed by the test through the setting, as a deployment with a
local vLLM would; the attacks on addresses run with the setting empty, as deployed.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from urllib.parse import quote, quote_plus

import pytest
from django.db import connection
from django.test import TestCase
from django.urls import reverse

from annotation.models import Job, JudgeFailure
from tests.annotation.test_judge_runs import write_images
from tests.factories.judge_server import KEY, fake_judge, judge_on_loopback  # noqa: F401
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

#: A key whose URL-encoded form differs from it (``+``, ``/``, ``=``, ``&``, ``%``).
ODD_KEY = "sk-live_Ab+cD/eF=gH&iJ%kL0123456789wxyz"


def _form(url: str, key: str = "", **numbers: str) -> dict[str, str]:
    values = {"concurrency": "8", "timeout": "5", "max_retries": "0", "repeats": "1"}
    values.update(numbers)
    return {
        "name": "toy-vlm",
        "base_url": url,
        "model": "judge-7b",
        "api_key": key,
        "temperature": "0",
        "price_prompt_per_1k": "0",
        "price_completion_per_1k": "0",
        **values,
    }


def _save_and_run(client, study, form):
    """Save the settings through the page and press "Run the judge"; the settings answer
    and the run's job (None when the settings were refused)."""
    saved = client.post(reverse("study_judge_settings", args=[study.pk]), form)
    if saved.status_code != 302:
        return saved, None
    with TestCase.captureOnCommitCallbacks(execute=True):
        client.post(reverse("study_judge_run", args=[study.pk]))
    job = Job.objects.filter(study=study, kind=Job.Kind.JUDGE).order_by("-pk").first()
    return saved, job


def _shown(client, study, job) -> dict[str, str]:
    """Everything a study member is shown about the run: the judges page, the run's
    progress fragment, the runs API and the job API."""
    urls = {
        "judges page": reverse("study_judges", args=[study.pk]),
        "run fragment": reverse("study_judge_job", args=[study.pk, job.pk]),
        "runs API": reverse("api_study_judge_runs", args=[study.pk]),
        "job API": reverse("job_status", args=[job.pk]),
    }
    out = {}
    for name, url in urls.items():
        response = client.get(url)
        assert response.status_code == 200, name
        out[name] = response.content.decode()
    return out


def _tables() -> str:
    """Every row of every table, as text."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(rows)


def _encoded_forms(secret: str) -> list[str]:
    """The key as a server may echo it: as is, URL-encoded, JSON-escaped, and base64 (on
    its own and inside ``user:key``, the Basic scheme's shape: another alignment), the
    base64 forms without their last group (which depends on what follows the key)."""
    raw = secret.encode()
    b64 = [
        base64.b64encode(raw).decode()[:-4],
        base64.urlsafe_b64encode(raw).decode()[:-4],
        base64.b64encode(b"user:" + raw).decode()[8:-4],
    ]
    return [secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1], *b64]


def _leaks(secret: str, text: str) -> list[str]:
    """Each 8-character piece of any form of ``secret`` that ``text`` holds."""
    pieces = {form[i : i + 8] for form in _encoded_forms(secret) for i in range(len(form) - 7)}
    return sorted(piece for piece in pieces if piece in text)


# ------------------------------------------------------------------ row 2: an echoed key


#: Padding before the echoed key: with the body's JSON around it, the key starts at every
#: offset from well before the 200-character excerpt's cut to past it, whether the
#: excerpt is cut from the body or from the error message inside it.
PADS = range(120, 201)


@pytest.mark.usefixtures("judge_on_loopback")
def test_a_key_echoed_at_every_offset_across_the_cut_never_shows(researcher, client, caplog):
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=9)  # 9 pairs x 9 repeats: one question per pad
    write_images(study)
    client.force_login(researcher)
    pads = iter(PADS)
    lock = threading.Lock()

    def echo(prompt, n):
        with lock:
            pad = next(pads)
        return (400, {"error": {"message": "x" * pad + KEY + " is not allowed here"}})

    with fake_judge(echo) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, KEY, repeats="9"))
        assert server.total == len(PADS)
    assert job.status == Job.Status.DONE, job.error
    assert JudgeFailure.objects.filter(job=job).count() == len(PADS)
    shown = _shown(client, study, job)
    assert "HTTP 400" in shown["judges page"]  # the failures are listed there
    for name, text in {**shown, "log": caplog.text, "tables": _tables()}.items():
        assert _leaks(KEY, text) == [], f"the {name} shows part of the key"


@pytest.mark.usefixtures("judge_on_loopback")
def test_a_key_echoed_in_replies_and_encoded_never_shows(researcher, client, caplog):
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=8)
    write_images(study)
    client.force_login(researcher)
    b64 = base64.b64encode(ODD_KEY.encode()).decode()
    basic = base64.b64encode(b"user:" + ODD_KEY.encode()).decode()
    replies = itertools.cycle(
        [
            '{"rating": 4, "note": "' + ODD_KEY + '"}',  # may parse: raw reply stored
            "4",  # a clean answer beside them
            "Your key is " + ODD_KEY,  # unusable: raw reply kept on the failure
            "key=" + quote(ODD_KEY, safe="") + " and " + quote_plus(ODD_KEY),
            "Authorization: Bearer " + b64 + " / Basic " + basic,
            "y" * 19_990 + ODD_KEY,  # straddles the 20,000 characters kept of a raw reply
            (400, {"error": {"message": "bad key " + b64}}),
            (422, {"detail": [{"msg": "x" * 150 + quote(ODD_KEY, safe="")}]}),
        ]
    )
    lock = threading.Lock()

    def echo(prompt, n):
        with lock:
            return next(replies)

    with fake_judge(echo, key=ODD_KEY) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, ODD_KEY))
        assert server.total == 8
    assert job.status == Job.Status.DONE, job.error
    assert job.result["answered"] >= 1 and job.result["failed"] >= 5
    shown = _shown(client, study, job)
    for name, text in {**shown, "log": caplog.text, "tables": _tables()}.items():
        assert _leaks(ODD_KEY, text) == [], f"the {name} shows part of the key"


# ------------------------------------------------------- raw servers for rows 3 and 9


class _Raw(BaseHTTPRequestHandler):
    """Answers any GET or POST with what the test's ``answer(handler)`` writes."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self):
        state = self.server.state
        with state.lock:
            state.requests += 1
        state.answer(self, state)


@contextlib.contextmanager
def _server(answer) -> Iterator[SimpleNamespace]:
    """A server on 127.0.0.1 (``.port``) counting ``requests`` and the bytes ``written``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Raw)
    httpd.daemon_threads = True
    httpd.state = state = SimpleNamespace(
        answer=answer, lock=threading.Lock(), requests=0, written=[], port=httpd.server_port
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


SECRET = "SECRET-METADATA-7f3a9c"


def _plain(status: int, body: bytes, content_type: str = "application/json"):
    def answer(handler, state):
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def _stream(total: int, chunk: bytes, every: float):
    """Headers promising ``total`` bytes, then ``chunk`` after ``chunk`` (``every`` seconds
    apart) until they are all sent or the client hangs up; the bytes sent are counted."""

    def answer(handler, state):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(total))
        handler.end_headers()
        sent = 0
        try:
            while sent < total:
                handler.wfile.write(chunk)
                handler.wfile.flush()
                sent += len(chunk)
                time.sleep(every)
        except OSError:
            pass  # the client hung up
        with state.lock:
            state.written.append(sent)

    return answer


# ------------------------------------------------ row 3: endpoints that reach inside

#: Ways to name the inside of the server's network (``{port}``: the internal service).
INSIDE = [
    "http://127.0.0.1:{port}/v1",
    "http://0.0.0.0:{port}/v1",
    "http://2130706433:{port}/v1",  # 127.0.0.1 as one decimal number
    "http://0x7f.1:{port}/v1",  # and in hexadecimal, short form
    "http://api.openai.com@127.0.0.1:{port}/v1",  # user@host
    "http://localhost:{port}/v1",
    "http://[::1]:{port}/v1",
    "http://[::ffff:127.0.0.1]:{port}/v1",  # IPv4-mapped IPv6
    "http://169.254.169.254/v1",  # a cloud's metadata service (link-local)
    "http://10.0.0.8/v1",
    "http://192.168.1.20:8000/v1",
    "http://100.64.0.1/v1",  # shared address space (carrier NAT)
    "http://[fd00::1]/v1",  # IPv6 unique local
    "http://[fe80::1]/v1",  # IPv6 link-local
    "http://224.0.0.1/v1",  # multicast
    "http://240.0.0.1/v1",  # reserved
]


def _refused(saved, job) -> bool:
    """The endpoint was refused: by the settings form (under its base URL field), or by
    the run, with the setting that would allow it named."""
    if job is None:
        page = saved.content.decode()
        return saved.status_code == 400 and 'id="endpoint_base_url"' in page
    return job.status == Job.Status.FAILED and "CAPEVAL_JUDGE_ALLOWED_HOSTS" in job.error


@pytest.mark.parametrize("template", INSIDE)
def test_an_endpoint_inside_the_network_is_refused(template, settings, researcher, client):
    settings.CAPEVAL_JUDGE_ALLOWED_HOSTS = []  # as deployed: nothing listed
    study = vicr_study(researcher, game=2)
    write_images(study)
    client.force_login(researcher)
    with _server(_plain(200, SECRET.encode())) as inside:
        url = template.format(port=inside.port)
        saved, job = _save_and_run(client, study, _form(url, timeout="0.5"))
        assert inside.requests == 0, f"{url} reached the internal service"
    assert _refused(saved, job), (saved.status_code, job and (job.status, job.error))
    if job is not None:
        for name, text in _shown(client, study, job).items():
            assert SECRET not in text and "Traceback" not in text, name


@pytest.mark.parametrize(
    "answers",
    [["127.0.0.1"], ["127.0.0.1", "93.184.216.34"], ["::ffff:10.1.2.3"], ["169.254.169.254"]],
)
def test_a_name_that_resolves_inside_is_refused_when_connecting(
    answers, settings, monkeypatch, researcher, client
):
    """A DNS name passes the settings form (it is checked where it matters, when the
    connection is made, so a name that answers differently later cannot pass either); the
    run resolves it, finds an inside address among the answers and connects nowhere."""
    settings.CAPEVAL_JUDGE_ALLOWED_HOSTS = []
    study = vicr_study(researcher, game=2)
    write_images(study)
    client.force_login(researcher)
    real = socket.getaddrinfo
    with _server(_plain(200, SECRET.encode())) as inside:

        def resolve(host, port, *args, **kwargs):
            name = host.decode() if isinstance(host, bytes) else host  # anyio sends bytes
            if name != "judge.example.org":
                return real(host, port, *args, **kwargs)
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, inside.port, 0, 0) if ":" in a else (a, inside.port))
                for a in answers
            ]  # fmt: skip

        monkeypatch.setattr(socket, "getaddrinfo", resolve)
        url = f"http://judge.example.org:{inside.port}/v1"
        saved, job = _save_and_run(client, study, _form(url, timeout="0.5"))
        assert inside.requests == 0
    assert saved.status_code == 302 and job is not None
    assert job.status == Job.Status.FAILED and "CAPEVAL_JUDGE_ALLOWED_HOSTS" in job.error
    assert "judge.example.org" in job.error
    assert not any(a in job.error for a in answers)  # what the name resolves to is not told
    for name, text in _shown(client, study, job).items():
        assert SECRET not in text, name


@pytest.mark.parametrize(
    "status, body, content_type",
    [
        (404, f"<html><body>{SECRET}</body></html>".encode(), "text/html"),
        (200, json.dumps({"AccessKeyId": SECRET, "Code": "Success"}).encode(), "application/json"),
        (400, json.dumps({"Code": "Denied", "Message": SECRET}).encode(), "application/json"),
        (403, SECRET.encode(), "text/plain"),
        (500, SECRET.encode(), "text/plain"),
    ],
)
@pytest.mark.usefixtures("judge_on_loopback")
def test_a_reply_that_is_not_a_chat_server_s_shows_no_body(
    status, body, content_type, researcher, client, caplog
):
    """Even at an address the deployment allows: a service that is not a chat-completions
    server (its error has no ``error`` or ``detail`` message) shows none of its body."""
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=2)
    write_images(study)
    client.force_login(researcher)
    with _server(_plain(status, body, content_type)) as inside:
        _saved, job = _save_and_run(client, study, _form(f"http://127.0.0.1:{inside.port}/v1"))
        assert inside.requests >= 1
    assert job.status in (Job.Status.DONE, Job.Status.FAILED)
    shown = _shown(client, study, job)
    assert f"HTTP {status}" in shown["runs API"] or "malformed" in shown["runs API"]
    for name, text in {**shown, "log": caplog.text, "tables": _tables()}.items():
        assert SECRET not in text, name


@pytest.mark.usefixtures("judge_on_loopback")
def test_a_chat_servers_own_error_message_is_still_shown(researcher, client):
    study = vicr_study(researcher, game=2)
    write_images(study)
    client.force_login(researcher)
    error = {"error": {"message": "The model judge-7b does not exist", "type": "invalid"}}
    with fake_judge(lambda prompt, n: (404, error)) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, KEY))
    assert job.status == Job.Status.DONE, job.error
    errors = {f["error"] for f in job.result["failures"]}
    assert errors == {"HTTP 404, not retried: The model judge-7b does not exist"}


@pytest.mark.usefixtures("judge_on_loopback")
def test_a_closed_port_reads_the_same_as_a_filtered_one(researcher, client):
    """Which ports of an allowed host are open must not be told apart by their errors: a
    closed port (refused at once) and a filtered one (no answer until the timeout)."""
    study = vicr_study(researcher, game=1)
    write_images(study)
    client.force_login(researcher)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    # A listener that never accepts, its queue full: new connections get no answer.
    filtered = socket.socket()
    filtered.bind(("127.0.0.1", 0))
    filtered.listen(0)
    queued = socket.create_connection(filtered.getsockname())
    errors = []
    try:
        for port in (closed_port, filtered.getsockname()[1]):
            _saved, job = _save_and_run(
                client, study, _form(f"http://127.0.0.1:{port}/v1", timeout="0.5")
            )
            assert job.status == Job.Status.DONE, job.error
            errors.append([f["error"] for f in job.result["failures"]])
    finally:
        queued.close()
        filtered.close()
    assert errors[0] == errors[1] and len(errors[0]) == 1
    assert "connect" in errors[0][0]


# -------------------------------------------- row 9: a slow reply and a huge reply


@pytest.mark.usefixtures("judge_on_loopback")
def test_a_reply_dripping_one_byte_at_a_time_ends_at_the_deadline(researcher, client):
    """The timeout bounds each attempt as a whole, not each read: a server sending a byte
    every 0.1 s (40 promised) is cut off at 0.5 s, after about 5 bytes, not 4 s and 40."""
    study = vicr_study(researcher, game=2)
    write_images(study)
    client.force_login(researcher)
    with _server(_stream(40, b"x", 0.1)) as slow:
        _saved, job = _save_and_run(
            client, study, _form(f"http://127.0.0.1:{slow.port}/v1", timeout="0.5")
        )
        deadline = time.monotonic() + 5
        while len(slow.written) < slow.requests and time.monotonic() < deadline:
            time.sleep(0.05)  # the server notices the hang-up at its next write
    assert job.status == Job.Status.DONE, job.error
    assert slow.requests == 2 and len(slow.written) == 2
    assert max(slow.written) <= 10, slow.written  # 0.5 s / 0.1 s, and one write in flight
    errors = {f["error"] for f in job.result["failures"]}
    assert errors == {"timed out after 0.5 s (1 attempts)"}


@pytest.mark.usefixtures("judge_on_loopback")
def test_a_huge_reply_is_cut_at_the_size_cap(settings, researcher, client):
    settings.CAPEVAL_JUDGE_MAX_REPLY_BYTES = 64 * 1024
    study = vicr_study(researcher, game=1)
    write_images(study)
    client.force_login(researcher)
    total = 50 * 1024 * 1024
    with _server(_stream(total, b" " * 65536, 0)) as huge:
        _saved, job = _save_and_run(client, study, _form(f"http://127.0.0.1:{huge.port}/v1"))
        deadline = time.monotonic() + 5
        while not huge.written and time.monotonic() < deadline:
            time.sleep(0.05)
    assert job.status == Job.Status.DONE, job.error
    # What the kernel's buffers took before the client hung up, not the 50 MB promised.
    assert huge.written and huge.written[0] < 16 * 1024 * 1024, huge.written
    errors = {f["error"] for f in job.result["failures"]}
    assert errors == {"the reply is larger than 64 kB (CAPEVAL_JUDGE_MAX_REPLY_BYTES); not retried"}
