"""The rows of a table as Arrow record batches: ``COPY ... TO STDOUT`` parsed by pyarrow on
PostgreSQL, a cursor's chunks on SQLite (the SQL dialect differences live in
``modes.base.ExportSql``).

How the COPY's rows reach pyarrow (issue 27). libpq hands over one row at a time, so a
Python loop touches every row; it runs in a thread of its own and only joins rows into
chunks of about ``COPY_CHUNK_BYTES``, always ending on a row's end, which a bounded queue
hands to the caller. The caller parses each chunk with ``pyarrow.csv.read_csv`` on an
in-memory buffer, which needs no Python and releases the GIL. The export used to stream a
pipe into pyarrow's CSV reader instead: its read-ahead thread read the pipe through a
Python file object, so whenever the caller held the GIL (numpy, the writers' Python file)
the pipe (64 KiB) filled, the COPY thread blocked, and PostgreSQL waited; the database's
work and ours ran one after the other.
"""

from __future__ import annotations

import queue
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
from django.conf import settings
from django.db import connection

from annotation.services.exports.common import COPY_CHUNK_BYTES, DEFAULT_CHUNK_SIZE, EXPORT_POOL

# Chunks the COPY thread may hold ready for the caller: with COPY_CHUNK_BYTES, 2 MiB at
# most, so PostgreSQL keeps going while the caller writes a chunk or records progress.
COPY_QUEUE_CHUNKS = 8

# ---------------------------------------------------------------------------------------
# Reading rows from the database


@contextmanager
def _sql_batches(
    sql: str, params: list[Any], schema: pa.Schema
) -> Iterator[Iterator[pa.RecordBatch]]:
    """The query's rows as record batches of ``schema`` (see the module docstring)."""
    if connection.vendor != "postgresql":
        yield _cursor_batches(sql, params, schema)
        return
    connection.ensure_connection()
    # COPY takes no parameters: the client binds them (psycopg quotes each literal).
    with psycopg.ClientCursor(connection.connection) as cursor:
        copy_sql = f"COPY ({cursor.mogrify(sql, params)}) TO STDOUT WITH (FORMAT csv)"
    if connection.in_atomic_block:
        # A second connection cannot see the caller's uncommitted rows: COPY on this one,
        # into a temporary file first (the caller may query while it writes the batches).
        with tempfile.TemporaryFile() as spool:
            sizes = []
            with connection.connection.cursor() as cursor:
                for chunk in _copy_chunks(cursor, copy_sql):
                    spool.write(chunk)
                    sizes.append(len(chunk))
            spool.seek(0)
            yield (_parse(spool.read(size), schema) for size in sizes)
        return
    with _CopyThread(copy_sql) as chunks:
        yield (_parse(chunk, schema) for chunk in chunks)


def _copy_chunks(cursor: Any, copy_sql: str) -> Iterator[bytearray]:
    """The COPY's output in chunks of whole rows (libpq returns one row at a time)."""
    # One bytearray grown in place: a list of the rows joined at the end cost twice the
    # CPU of the COPY itself (1 us a row), holding thousands of libpq buffers alive.
    chunk = bytearray()
    with cursor.copy(copy_sql) as copy:
        for row in copy:
            chunk += row
            if len(chunk) >= COPY_CHUNK_BYTES:
                yield chunk
                chunk = bytearray()
    if chunk:
        yield chunk


def _parse(chunk: bytearray, schema: pa.Schema) -> pa.RecordBatch:
    """One chunk of COPY's CSV as one record batch of ``schema``."""
    table = pa_csv.read_csv(
        pa.py_buffer(chunk),
        # One thread: PostgreSQL and the COPY thread have the other core. One block: the
        # chunk holds whole rows, and a row must not straddle two blocks.
        read_options=pa_csv.ReadOptions(
            column_names=schema.names, block_size=len(chunk) + 1, use_threads=False
        ),
        parse_options=pa_csv.ParseOptions(newlines_in_values=True),
        convert_options=pa_csv.ConvertOptions(
            column_types=schema,
            # COPY writes NULL unquoted and an empty text as "": keep them apart.
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            true_values=["t"],
            false_values=["f"],
        ),
        memory_pool=EXPORT_POOL,
    )
    # Same types; the schema adds the column descriptions (zero-copy).
    columns = [
        column.chunk(0) if column.num_chunks == 1 else column.combine_chunks(EXPORT_POOL)
        for column in table.columns
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class _Stopped(Exception):
    """The caller left before the COPY ended: the COPY thread stops (psycopg ends the COPY
    when an exception leaves its block)."""


class _CopyThread:
    """COPY ... TO STDOUT on a connection of its own, in a thread, handing over chunks."""

    _END = object()

    def __init__(self, copy_sql: str):
        self.copy_sql = copy_sql
        self.chunks: queue.Queue[Any] = queue.Queue(maxsize=COPY_QUEUE_CHUNKS)
        self.stop = threading.Event()

    def __enter__(self) -> Iterator[bytearray]:
        # Opened here, so a connection error is raised in the caller's thread.
        self.conn = connection.get_new_connection(connection.get_connection_params())
        self.thread = threading.Thread(target=self._copy, name="capeval-export-copy", daemon=True)
        self.thread.start()
        return self._received()

    def _copy(self) -> None:
        outcome: Any = self._END
        try:
            with self.conn.cursor() as cursor:
                cursor.execute("SET TIME ZONE 'UTC'")
                chunks = _copy_chunks(cursor, self.copy_sql)
                try:
                    for chunk in chunks:
                        self._hand_over(chunk)
                finally:
                    chunks.close()  # ends the COPY now if it was stopped
        except _Stopped:
            outcome = None
        except BaseException as exc:  # re-raised in the caller's thread
            outcome = exc
        try:
            self.conn.close()
        finally:
            if outcome is not None:
                self._hand_over(outcome, final=True)

    def _hand_over(self, item: Any, final: bool = False) -> None:
        while not self.stop.is_set():
            try:
                self.chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        if not final:
            raise _Stopped

    def _received(self) -> Iterator[bytearray]:
        while (item := self.chunks.get()) is not self._END:
            if isinstance(item, BaseException):
                raise item
            yield item

    def __exit__(self, *exc_info: Any) -> None:
        # A caller that failed (or stopped early) stops a COPY still running.
        self.stop.set()
        self.thread.join()


def _cursor_batches(sql: str, params: list[Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    size = int(getattr(settings, "CAPEVAL_EXPORT_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(size):
            columns = list(zip(*rows, strict=True))
            yield pa.RecordBatch.from_arrays(
                [_array(values, f.type) for values, f in zip(columns, schema, strict=True)],
                schema=schema,
            )


def _array(values: tuple[Any, ...], kind: pa.DataType) -> pa.Array:
    """One column of SQLite values as ``kind`` (booleans come as 0/1; timestamps as naive
    UTC datetimes, Django's converters, or as text)."""
    if pa.types.is_timestamp(kind):
        naive = pa.timestamp("us")
        try:
            return pa.array(values, naive).cast(kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            return pa.array(values, pa.string()).cast(naive).cast(kind)
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array(values).cast(kind)
