"""Model instances from the rows of hand-written statements (issue 48).

The hot path's reads are written out as SQL where building and compiling them through the
ORM cost the web worker more than the database its work (``services/assignment_sql.py``,
``judgment_sql.py``, ``participant_sql.py``, and a mode's per-answer reads). Their rows
must still become the instances the ORM would have given: ``instance`` converts each
column with the ORM's own converters (JSON, timestamps, UUIDs, decimals per database) and
builds the instance with ``from_db``, so it is saved, compared and related like any other.
``by_pk`` is the commonest such read, ``objects.select_related(...).get(pk=...)``, as one
statement worked out once per model and relation. ``cursor`` is the cursor they all run on:
on PostgreSQL it lets the server keep each statement's plan.
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Model

#: After how many runs on one connection a fixed statement is prepared (psycopg's default).
PREPARE_AFTER = 5


def cursor():
    """A cursor for the hot path's fixed statements (``by_pk``, the services' ``*_sql``
    modules, a mode's written-out reads), used as ``connection.cursor()`` is.

    On PostgreSQL it binds parameters on the server, so psycopg prepares a statement once it
    has run ``PREPARE_AFTER`` times on the connection, and the server plans it no more (or
    keeps a generic plan once custom plans buy nothing). Django's own cursors bind on the
    client, where nothing is ever prepared: planning these statements took the server 0.3-0.8
    ms each against 0.03-0.2 ms running them (``EXPLAIN ANALYZE`` on the spans benchmark's
    database, issue 48), most of its CPU per request. Only a persistent connection
    (``CAPEVAL_DB_CONN_MAX_AGE``) runs a statement that often. Behind PgBouncer in
    transaction mode (``DISABLE_SERVER_SIDE_CURSORS``, set by
    ``CAPEVAL_DB_TRANSACTION_POOLING``) the next transaction may reach another server
    connection, which never saw the statement prepared: there, and on SQLite, this is
    Django's cursor. Either way the cursor is Django's wrapper, so query counts, logging and
    execute wrappers see its statements as any other.
    """
    # The connection itself, not ``django.db.connection``: each attribute read through
    # that proxy looks the thread's connection up again (about a microsecond each, a
    # hundred per answer in the hot path's helpers here, issue 48).
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql" or db.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        return db.cursor()
    db.close_if_health_check_failed()
    db.ensure_connection()
    raw = db.connection
    # Django connects with prepared statements off (for poolers); its client-binding
    # cursors never prepare whatever this says, so turning it on affects these only.
    if raw.prepare_threshold != PREPARE_AFTER:
        raw.prepare_threshold = PREPARE_AFTER
    with db.wrap_database_errors:
        bound = psycopg.Cursor(raw)
    db.validate_thread_sharing()
    if db.queries_logged:
        return _Logged(bound, db)
    return db.make_cursor(bound)


class _Logged(CursorDebugWrapper):
    """Django's debug wrapper (``DEBUG``, ``CaptureQueriesContext``), logging a server-bound
    statement as it logs its own, with the values in: Django would ask psycopg for the text
    it ran, which is ``$1`` for the values and nothing at all for a prepared statement."""

    def execute(self, sql, params=None):
        shown = self.db.ops.compose_sql(sql, params) if params is not None else sql
        with self.debug_sql(shown):
            return CursorWrapper.execute(self, sql, params)


def columns(alias: str, model: type[Model], names: tuple[str, ...]) -> str:
    """``alias."column", ...`` of ``names`` (field names or attnames) of ``model``."""
    return ", ".join(f'{alias}."{model._meta.get_field(name).column}"' for name in names)


def instance(model: type[Model], names: tuple[str, ...], values) -> Model:
    """A ``model`` instance from raw column values of ``names`` (attnames), converted as the
    ORM converts them."""
    db = connections[DEFAULT_DB_ALIAS]  # once, not per converter (``cursor``)
    ordered, order, converters = _conversion(model, names, db.vendor)
    values = _converted(db, converters, values)
    return model.from_db(db.alias, ordered, [values[i] for i in order])


def converted(model: type[Model], names: tuple[str, ...], values) -> list:
    """Raw column values of ``names`` (attnames of ``model``) as the ORM gives them."""
    db = connections[DEFAULT_DB_ALIAS]
    return _converted(db, _conversion(model, names, db.vendor)[2], values)


def _converted(db, converters, values) -> list:
    values = list(values)
    for index, col, convert in converters:
        values[index] = convert(values[index], col, db)
    return values


@functools.cache
def _conversion(model: type[Model], names: tuple[str, ...], vendor: str):
    """What ``instance`` does to a row of ``names``, worked out once per model, columns and
    database vendor (looking the converters up was a fifth of the instance building): the
    attnames in model order (``from_db`` takes a subset in that order), the row index of
    each, and the ORM's converters as (row index, column, converter)."""
    converters = []
    for index, name in enumerate(names):
        col = model._meta.get_field(name).get_col(model._meta.db_table)
        for convert in connection.ops.get_db_converters(col) + col.get_db_converters(connection):
            converters.append((index, col, convert))
    ordered = [f.attname for f in model._meta.concrete_fields if f.attname in names]
    return ordered, [names.index(name) for name in ordered], converters


def cache_name(model: type[Model], relation: str) -> str:
    """Where Django's prefetching keeps ``relation`` (a reverse relation of ``model``) on an
    instance: a hand-written read that also reads those rows leaves them there
    (``services.assignment_sql.with_answers``), so ``instance.<relation>.all()`` does not
    query."""
    return getattr(model, relation).field.remote_field.cache_name


def prefetched(instance: Model, relation: str) -> list | None:
    """The rows of ``relation`` read with ``instance`` (as ``cache_name`` keeps them), or
    None when they were not read with it."""
    kept = instance.__dict__.get("_prefetched_objects_cache", {})
    found = kept.get(cache_name(type(instance), relation))
    return None if found is None else list(found)


def by_pk(model: type[Model], pk: Any, *, related: str | None = None) -> Model:
    """``model.objects.select_related(related).get(pk=pk)`` as one fixed statement (``related``:
    one foreign key of ``model``, or None). Raises ``model.DoesNotExist`` as ``get`` does."""
    sql, _width, _target = _by_pk_statement(model, related, connection.vendor)
    with cursor() as reading:
        reading.execute(sql, [pk])
        row = reading.fetchone()
    if row is None:
        raise model.DoesNotExist(f"{model.__name__} matching query does not exist.")
    return by_pk_instance(model, row, related=related)


def by_pk_statement(model: type[Model], related: str | None = None) -> tuple[str, int]:
    """``by_pk``'s statement (one param: the pk) and how many columns its row has, for a
    caller that reads more in the same statement (a UNION with rows of its own)."""
    sql, width, target = _by_pk_statement(model, related, connection.vendor)
    return sql, width + (len(_attnames(target)) if target is not None else 0)


def by_pk_instance(model: type[Model], row, *, related: str | None = None) -> Model:
    """The instance ``by_pk`` gives for a row of ``by_pk_statement``."""
    _sql, width, target = _by_pk_statement(model, related, connection.vendor)
    found = instance(model, _attnames(model), row[:width])
    if related is not None:
        other = None
        if row[width] is not None:  # the related row's pk: NULL when the key is NULL
            other = instance(target, _attnames(target), row[width:])
        setattr(found, related, other)
    return found


def _attnames(model: type[Model]) -> tuple[str, ...]:
    """Every column's attname, the primary key's first."""
    pk = model._meta.pk.attname
    return (pk, *(f.attname for f in model._meta.concrete_fields if f.attname != pk))


@functools.cache
def _by_pk_statement(model: type[Model], related: str | None, vendor: str):
    table = model._meta.db_table
    select = columns("m", model, _attnames(model))
    join, target = "", None
    if related is not None:
        field = model._meta.get_field(related)
        target = field.related_model
        # The related pk first among its columns, so a missing row reads as NULL there.
        select += ", " + columns("r", target, _attnames(target))
        join = (
            f'LEFT JOIN "{target._meta.db_table}" r '
            f'ON r."{target._meta.pk.column}" = m."{field.column}"'
        )
    pk = model._meta.pk.column
    sql = f'SELECT {select} FROM "{table}" m {join} WHERE m."{pk}" = %s'
    return sql, len(_attnames(model)), target
