"""The rows of a table as Arrow record batches: ``COPY ... TO STDOUT`` parsed by pyarrow on
PostgreSQL, a cursor's chunks on SQLite (the SQL dialect differences live in
``modes.base.ExportSql``)."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
from django.conf import settings
from django.db import connection

from annotation.services.exports.common import COPY_BLOCK_BYTES, DEFAULT_CHUNK_SIZE, EXPORT_POOL

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
        copy_sql = f"COPY ({cursor.mogrify(sql, params)}) TO STDOUT WITH (FORMAT csv, HEADER)"
    if connection.in_atomic_block:
        # A second connection cannot see the caller's uncommitted rows: COPY on this one.
        with tempfile.TemporaryFile() as spool:
            with connection.connection.cursor() as cursor, cursor.copy(copy_sql) as copy:
                for block in copy:
                    spool.write(block)
            spool.seek(0)
            yield _csv_batches(spool, schema)
        return
    with _CopyPipe(copy_sql) as stream:
        yield stream.checked(_csv_batches(stream.reader, schema))


def _csv_batches(stream: BinaryIO, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    reader = pa_csv.open_csv(
        stream,
        memory_pool=EXPORT_POOL,
        # One thread: PostgreSQL has the other core, and read-ahead blocks cost memory.
        read_options=pa_csv.ReadOptions(
            column_names=schema.names,
            skip_rows=1,
            block_size=COPY_BLOCK_BYTES,
            use_threads=False,
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
    )
    for batch in reader:
        # Same types; the schema adds the column descriptions (zero-copy).
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)


class _CopyPipe:
    """COPY ... TO STDOUT on a connection of its own, in a thread, into a pipe."""

    def __init__(self, copy_sql: str):
        self.copy_sql = copy_sql
        self.error: BaseException | None = None

    def __enter__(self) -> _CopyPipe:
        read_fd, write_fd = os.pipe()
        self.reader = os.fdopen(read_fd, "rb")
        writer = os.fdopen(write_fd, "wb")
        # Opened here, so a connection error is raised in the caller's thread.
        self.conn = connection.get_new_connection(connection.get_connection_params())
        self.thread = threading.Thread(
            target=self._copy, args=(writer,), name="capeval-export-copy", daemon=True
        )
        self.thread.start()
        return self

    def _copy(self, writer: BinaryIO) -> None:
        try:
            with writer, self.conn.cursor() as cursor:
                cursor.execute("SET TIME ZONE 'UTC'")
                with cursor.copy(self.copy_sql) as copy:
                    for block in copy:
                        writer.write(block)
        except BaseException as exc:  # re-raised in the caller's thread
            self.error = exc
        finally:
            self.conn.close()

    def checked(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from batches
        except pa.ArrowInvalid:
            self.thread.join()
            if self.error is not None:
                raise self.error from None
            raise
        self.thread.join()
        if self.error is not None:
            raise self.error

    def __exit__(self, *exc_info: Any) -> None:
        # Closing the read end stops a COPY still writing (broken pipe) when we failed.
        self.reader.close()
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
