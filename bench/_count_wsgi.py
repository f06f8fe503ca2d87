"""Bench only: the project's WSGI application, telling each request's SQL statement count.

Served by a counting pass's own gunicorn (``_harness.gunicorn(count_queries=True)``), never
in a timed run: the wrapper costs CPU, so the CPU per request and the ratios come from the
plain application, and the query counts from this pass on the same study and requests.

Every statement Django executes for the request (``connection.execute_wrapper``, the hook
``django.test.utils.CaptureQueriesContext`` builds on) is counted, from the first middleware
to the session's save in the last response phase; the answer carries the counts in a
header, ``X-Bench-Queries: <all>,<session>,<transaction>``: all statements, those on
``django_session`` (the session middleware's own, which any request with a session pays),
and transaction statements (savepoints; ``BEGIN`` and ``COMMIT`` are psycopg's and not
seen). Not seen either: ``conn_health_checks``' ``SELECT 1`` on a reused connection, which
psycopg runs outside Django's cursor (once per request that touches the database, for the
old code and the new alike). Sync gunicorn workers serve one request at a time on one
thread, so the thread's connection is the request's.
"""

from __future__ import annotations

from django.db import connection

from capeval.wsgi import application as django_application

HEADER = "X-Bench-Queries"
TRANSACTION = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT", "BEGIN", "COMMIT")


def application(environ, start_response):
    counts = [0, 0, 0]

    def count(execute, sql, params, many, context):
        counts[0] += 1
        if "django_session" in sql:
            counts[1] += 1
        elif sql.lstrip().upper().startswith(TRANSACTION):
            counts[2] += 1
        return execute(sql, params, many, context)

    def start_with_counts(status, headers, exc_info=None):
        # Django calls this once the response is built: every middleware has run.
        return start_response(status, [*headers, (HEADER, ",".join(map(str, counts)))], exc_info)

    with connection.execute_wrapper(count):
        return django_application(environ, start_with_counts)
