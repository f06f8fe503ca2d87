"""The health probe, and how a request is answered while the database is unreachable.

- ``healthz``: ``GET /healthz`` answers 200 ``ok`` after a ``SELECT 1``, 503 when the
  database cannot answer. The compose file's healthcheck calls it from inside the container
  as ``http://127.0.0.1:8000/healthz``: ``HealthCheckMiddleware`` answers that exact path
  before ``CommonMiddleware`` validates the Host header (127.0.0.1 is not in a production
  ALLOWED_HOSTS), and production exempts it from the HTTPS redirect (the probe speaks plain
  HTTP to gunicorn).
- ``ping``: ``GET /ping`` answers 200 ``pong`` and touches nothing: no database, session or
  template. It goes through the whole middleware stack like any page, which the health
  probe does not (its middleware answers first), so the load benchmarks use it as their
  baseline: the cost of a request that does no work (bench/README.md, issue 48).
- ``database_unreachable``: whether an exception means "the database is down or restarting"
  (the connection failed or was cut), as opposed to a wrong query, which stays a 500.
- ``unavailable_response``: the 503 with ``Retry-After`` (HTML for pages, JSON under
  ``/api/``) that ``DatabaseUnavailableMiddleware`` gives for such an exception raised by a
  view, and ``server_error`` (the project's ``handler500``) for one raised anywhere else,
  e.g. by the session middleware saving a session.

Nothing is lost by answering 503: every write is one transaction, so a request that failed
on the database either committed before the failure (a repeat of a submission then returns
the stored result) or stored nothing, and the client may send it again.
"""

import logging
import sys

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from django.views.defaults import server_error as django_server_error

logger = logging.getLogger(__name__)

#: Seconds a client is asked to wait: a PostgreSQL restart or fail-over takes a few.
RETRY_AFTER_SECONDS = 5
UNAVAILABLE_MESSAGE = (
    "The database is unavailable for a moment (restarting or unreachable). Try again in "
    f"{RETRY_AFTER_SECONDS} seconds: an answer not stored yet is stored then, and none twice."
)
#: SQLSTATEs of a server that is going away or cannot take the connection, besides class
#: 08 (connection exception): admin_shutdown (``pg_ctl stop/restart -m fast``),
#: crash_shutdown, cannot_connect_now (starting up or shutting down), too_many_connections.
UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is Django's wrapper of a failed or cut database connection.

    Only connection-class failures count: a syntax error, a missing table or a constraint
    violation is a bug or a refusal and must stay a 500 (or whatever handles it). On SQLite
    nothing counts (its OperationalError is "no such table" or "database is locked").
    """
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    cause = exc.__cause__
    if not isinstance(cause, psycopg.Error):
        return False
    if cause.sqlstate is not None:
        return cause.sqlstate.startswith("08") or cause.sqlstate in UNAVAILABLE_SQLSTATES
    # libpq's own errors carry no SQLSTATE: "connection refused", "server closed the
    # connection unexpectedly", "the connection is closed", but also misuse such as "the
    # cursor is closed". Only a connection that is gone (never opened, closed or broken)
    # makes them an outage.
    raw = connection.connection
    return raw is None or raw.closed or raw.broken


def unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: ``{"detail": ...}`` under /api/, else the error page.

    The page is rendered without the request, so no context processor asks the database
    for the user.
    """
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"}
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": UNAVAILABLE_MESSAGE}, status=503, headers=headers)
    body = render_to_string(
        "error.html", {"title": "Temporarily unavailable", "message": UNAVAILABLE_MESSAGE}
    )
    return HttpResponse(body, status=503, headers=headers)


def log_unavailable(request: HttpRequest, exc: BaseException) -> None:
    logger.warning(
        "database unreachable, answering %s %s with 503: %s",
        request.method,
        request.path,
        str(exc).strip() or repr(exc),
    )


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: Django calls it inside the ``except`` of an uncaught exception, so
    the exception is at hand; a database outage answers 503, anything else Django's 500."""
    exc = sys.exception()
    if exc is not None and database_unreachable(exc):
        log_unavailable(request, exc)
        return unavailable_response(request)
    return django_server_error(request)


@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """200 ``ok`` when the database answers ``SELECT 1``, else 503 (plain text)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("health check: the database does not answer: %s", exc)
        return HttpResponse(
            "database unavailable\n",
            status=503,
            content_type="text/plain",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return HttpResponse("ok\n", content_type="text/plain")


@never_cache
@require_safe
def ping(request: HttpRequest) -> HttpResponse:
    """200 ``pong``: the least a request through the full middleware can cost.

    Reads no session, user, database row or template on purpose: it is the baseline that
    bench/assign.py and bench/arena_load.py divide a mode's CPU per request by.
    """
    return HttpResponse("pong\n", content_type="text/plain")
