"""bench/_count_wsgi.py: the counting pass's statement counts are what Django ran (issue 48).

The load benchmarks' queries per request come from this wrapper's header, so it is checked
against ``CaptureQueriesContext`` on the same requests, in process (no gunicorn).
"""

import sys
from io import BytesIO
from pathlib import Path

import pytest
from django.core.signals import request_started
from django.db import close_old_connections, connection
from django.test.utils import CaptureQueriesContext

# Appended, not first: the bench folder holds modules named like packages (stats, metrics).
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _count_wsgi  # noqa: E402 (the bench folder is not a package)

pytestmark = pytest.mark.django_db


def _call(path: str) -> tuple[str, dict[str, str], bytes]:
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "wsgi.url_scheme": "http",
        "wsgi.input": BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    answered = {}

    def start_response(status, headers, exc_info=None):
        answered["status"] = status
        answered["headers"] = dict(headers)

    # As Django's test client does: the request's start must not close the test's
    # connection, whose transaction holds the test's rows.
    request_started.disconnect(close_old_connections)
    try:
        body = b"".join(_count_wsgi.application(environ, start_response))
    finally:
        request_started.connect(close_old_connections)
    return answered["status"], answered["headers"], body


def test_ping_counts_no_statement():
    status, headers, body = _call("/ping")
    assert status.startswith("200") and body == b"pong\n"
    assert headers[_count_wsgi.HEADER] == "0,0,0"


def test_the_count_equals_the_statements_django_ran():
    with CaptureQueriesContext(connection) as captured:
        status, headers, _body = _call("/healthz")  # SELECT 1 on Django's cursor
    assert status.startswith("200")
    ran = [q["sql"] for q in captured.captured_queries]
    assert ran == ["SELECT 1"]
    assert headers[_count_wsgi.HEADER] == "1,0,0"
