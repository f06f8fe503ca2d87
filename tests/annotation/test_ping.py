"""``GET /ping``: the load benchmarks' baseline request (issue 48, ``views/health.py``).

It must go through the whole middleware stack (so the ratio of a mode's request to it
counts only the mode's work) and do nothing else: no query, no session written, no cookie.
"""

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_ping_answers_pong_without_a_query(client):
    assert reverse("ping") == "/ping"
    with CaptureQueriesContext(connection) as queries:
        answer = client.get("/ping")
    assert answer.status_code == 200
    assert answer.content == b"pong\n"
    assert answer["Content-Type"].startswith("text/plain")
    assert queries.captured_queries == []
    assert not answer.cookies  # no session or CSRF cookie is set


def test_ping_goes_through_the_middleware_stack(client):
    answer = client.get("/ping")
    # Headers set by middleware from the top of the stack to its end: security headers
    # (CSP, Permissions-Policy), clickjacking (X-Frame-Options, after the view), and
    # never_cache on the view itself.
    assert "Content-Security-Policy" in answer
    assert "Permissions-Policy" in answer
    assert answer["X-Frame-Options"] == "DENY"
    assert "no-cache" in answer["Cache-Control"]
    assert "axes.middleware.AxesMiddleware" in settings.MIDDLEWARE  # the last one ran too


def test_ping_takes_no_post(client):
    assert client.post("/ping").status_code == 405


def test_ping_with_a_session_cookie_reads_no_session(client, django_user_model):
    user = django_user_model.objects.create_user("pinger", password="x")
    client.force_login(user)
    with CaptureQueriesContext(connection) as queries:
        answer = client.get("/ping")
    assert answer.status_code == 200 and queries.captured_queries == []
