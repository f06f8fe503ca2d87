"""``rows.cursor``: the hot path's fixed statements prepared on PostgreSQL (issue 48).

On PostgreSQL a statement run ``PREPARE_AFTER`` times on a connection through this cursor
is prepared there (the server plans it no more), and Django still logs and counts it with
its values in, as it logs its own; behind PgBouncer in transaction mode and on SQLite the
cursor is Django's own and nothing is prepared.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Participant, rows
from tests.factories.arena import arena_study, worker

pytestmark = pytest.mark.django_db

#: A statement no other code runs, so its prepared copy is told apart by its text.
PROBE = "SELECT CAST(%s AS BIGINT) + 1, CAST(%s AS TEXT) AS rows_cursor_probe"


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [text for (text,) in cursor.fetchall() if "rows_cursor_probe" in text]


def _run(times: int) -> list[tuple]:
    found = []
    for n in range(times):
        with rows.cursor() as cursor:
            cursor.execute(PROBE, [n, "it's"])
            found.append(cursor.fetchone())
    return found


def test_the_answers_are_the_statements_whatever_the_database():
    assert _run(rows.PREPARE_AFTER + 2) == [(n + 1, "it's") for n in range(rows.PREPARE_AFTER + 2)]


def test_each_run_is_logged_with_its_values_prepared_or_not():
    with CaptureQueriesContext(connection) as captured:
        _run(rows.PREPARE_AFTER + 2)
    logged = [query["sql"] for query in captured.captured_queries]
    assert logged == [
        f"SELECT CAST({n} AS BIGINT) + 1, CAST('it''s' AS TEXT) AS rows_cursor_probe"
        for n in range(rows.PREPARE_AFTER + 2)
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements")
def test_postgresql_prepares_a_statement_once_it_has_run_often():
    _run(rows.PREPARE_AFTER)
    assert _prepared() == []
    _run(1)
    assert _prepared() == ["SELECT CAST($1 AS BIGINT) + 1, CAST($2 AS TEXT) AS rows_cursor_probe"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements")
def test_behind_a_transaction_pooler_nothing_is_prepared(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)
    _run(rows.PREPARE_AFTER + 2)
    assert _prepared() == []


def test_a_fixed_read_through_it_gives_the_orm_row_again_and_again(researcher):
    # by_pk runs on this cursor: past the prepare threshold the row is still the ORM's.
    study = arena_study(researcher)
    participant = worker(study, "w-cursor")
    expected = Participant.objects.get(pk=participant.pk)
    for _ in range(rows.PREPARE_AFTER + 2):
        got = rows.by_pk(Participant, participant.pk)
        assert (got.pk, got.pseudonym, got.state, got.created_at) == (
            expected.pk,
            expected.pseudonym,
            expected.state,
            expected.created_at,
        )
