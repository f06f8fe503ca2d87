"""Exports: a study's data as tidy tables a researcher can publish.

Tables.

- ``judgments``: the mode's own table (``mode.export.columns`` and ``mode.export.query``):
  THumB one row per caption per stage, VICR one per rating, HUMANr one per trial; typed
  columns, each described in the datasheet.
- ``participants``: one row per participant: pseudonym, source, status, when they joined
  and completed (``Participant.completed_at``), judgments, integrity flags (count and
  kinds) and, only when the study's owner asks for raw ids, the Prolific/MTurk worker and
  submission ids (what approving or rejecting a crowd submission needs).

Formats. ``csv`` (UTF-8, header row, RFC 4180 quoting; booleans ``true``/``false``, null as
an empty cell, timestamps ISO 8601 UTC; a text cell starting with ``= + - @``, tab or CR is
prefixed with ``'`` (OWASP CSV injection guidance), numbers never are); ``jsonl`` (one
object per line, values in their JSON types; U+0085, U+2028 and U+2029 are written as
``\\u`` escapes, so readers that split lines with ``str.splitlines()`` see one object per
line); ``parquet`` (typed columns, descriptions in the field metadata); ``dataset`` (a zip:
``data/judgments.parquet``, ``data/participants.parquet``, a README dataset card written from
the datasheet, the datasheet, optionally the display images under ``images/``; it loads
with the Hugging Face ``datasets`` Parquet loader). Every format but ``dataset`` gets a
``<stem>.datasheet.json`` beside the data file.

Privacy. Participants appear by pseudonym; user names never; crowd ids only in the
participants table and only on the owner's request; client addresses, browser ids and the
study's completion code never (settings are redacted in the datasheet).

How rows flow (the Saleor model: the database selects, a library writes). The mode's SQL
computes every cell; no model instance is built per row. On PostgreSQL the rows leave as
``COPY (<the mode's query>) TO STDOUT (FORMAT csv)`` and pyarrow's streaming CSV reader
turns them into typed record batches; a worker (autocommit) runs the COPY on a connection
of its own in a thread writing to a pipe, so PostgreSQL and the parsing overlap, and
inside a caller's transaction (tests) the COPY goes to a temporary file first on the
caller's connection. On SQLite a cursor's chunks become Arrow arrays. Writers: pyarrow's
CSV writer (after vectorised neutralisation) and Parquet writer; JSONL through ``json``.
The datasheet's counts come from the written batches.

Memory (the export process stays below 200 MB on 1M rows; Django and pyarrow take about
120 MB before the first row). What it is bounded by: the CSV reader's read-ahead (32
blocks of ``COPY_BLOCK_BYTES``), one Parquet row group (``_ParquetSink.ROW_GROUP_ROWS``),
the distinct ids and names the datasheet counts. What made it grow before, and is avoided:
2 MiB blocks (64 MB of read-ahead), the default mimalloc pool keeping freed pages
(``EXPORT_POOL``), ``np.unique`` temporaries and Python sets of ids, and ``pa.array()`` or
``to_pylist()`` of timestamps, which import pandas when it is installed (about 50 MB), as
does the first pyarrow.compute call (40-60 MB).

Files are written as hidden ``.part`` files in the export folder itself, flushed to disk
(``fsync``) and renamed with ``os.replace`` when complete (datasheet first, data file last,
then the folder is synced so the renames survive a crash); a failed run removes them, so no
partial file ever has a name the download offers. A full disk (``ENOSPC``, or a quota's
``EDQUOT``) is a ``ServiceError`` saying so, which fails the job with that reason.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import platform
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import django
import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

import capeval
from annotation.errors import ServiceError
from annotation.models import Image, Job, Judgment, Participant, Study, User
from annotation.modes import get_mode
from annotation.modes.base import ExportColumn, ExportSql
from annotation.selectors import study_counts
from annotation.services.jobs import job_create
from annotation.zipnames import safe_member_names

logger = logging.getLogger(__name__)

EXPORT_FORMATS = ("csv", "jsonl", "parquet", "dataset")
EXPORT_TABLES = ("judgments", "participants")
FILE_SUFFIX = {"csv": "csv", "jsonl": "jsonl", "parquet": "parquet", "dataset": "zip"}
DEFAULT_CHUNK_SIZE = 50_000
# Bytes pyarrow parses at a time from PostgreSQL's COPY stream (about 1,000 rows). Kept
# small because pyarrow's streaming CSV reader reads up to 32 blocks ahead on its I/O
# thread (Arrow's background generator; the depth is not an option, ARROW-12090), outside
# its memory pool: with 2 MiB blocks that read-ahead alone took 90-110 MB of the export
# process's 200 MB budget, with 256 KiB blocks it takes about 10 MB. Parsing is as fast.
COPY_BLOCK_BYTES = 256 << 10
DEFAULT_KEEP_DAYS = 7
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# A cell's first byte -> whether it starts a formula (a table lookup is cheaper than np.isin).
_FORMULA_FIRST = np.zeros(256, dtype=bool)
_FORMULA_FIRST[np.frombuffer("".join(FORMULA_PREFIXES).encode(), dtype=np.uint8)] = True
# str.splitlines() also splits on these; json.dumps(ensure_ascii=False) leaves them as is.
_LINE_SEPARATORS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
REDACTED = "[redacted]"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
GENERIC_EXCLUSION_RULE = "Rows with excluded=true are kept and flagged; exclusion_reason says why."
# The memory pool of the export's readers and writers. pyarrow's default pool (mimalloc in
# the Linux wheels) kept 35-50 MB of freed pages resident during a 1M-row Parquet export
# whose live allocations never exceeded 10 MB; jemalloc, which pyarrow also ships, gives
# them back (measured with bench/export.py). Passed explicitly, so nothing else in the
# process changes allocator.
EXPORT_POOL = (
    pa.jemalloc_memory_pool()
    if "jemalloc" in pa.supported_memory_backends()
    else pa.default_memory_pool()
)
ARROW_TYPES = {
    "int": pa.int64(),
    "float": pa.float64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}

Progress = Callable[..., None]


# ---------------------------------------------------------------------------------------
# Requests and cleanup


def export_request(
    *,
    study: Study,
    user: User,
    export_format: str,
    table: str = "judgments",
    raw_ids: bool = False,
    images: bool = False,
) -> Job:
    """Queue an export job; ServiceError for an unknown format or table, and (403) when
    someone other than the study's owner asks for raw crowd ids."""
    _check_options(export_format, table)
    if raw_ids and study.owner_id != user.pk:
        raise ServiceError(
            "Only the study's owner may export raw Prolific/MTurk ids.", field="raw_ids", status=403
        )
    params: dict[str, Any] = {"format": export_format}
    if table != "judgments":
        params["table"] = table
    if raw_ids:
        params["raw_ids"] = True
    if images:
        params["images"] = True
    return job_create(kind=Job.Kind.EXPORT, study=study, created_by=user, params=params)


def _check_options(export_format: str, table: str) -> None:
    if export_format not in EXPORT_FORMATS:
        raise ServiceError(
            f"Unknown export format {export_format!r}; choose one of {', '.join(EXPORT_FORMATS)}."
        )
    if table not in EXPORT_TABLES:
        raise ServiceError(f"Unknown table {table!r}; choose one of {', '.join(EXPORT_TABLES)}.")


def export_delete_old(*, days: int = DEFAULT_KEEP_DAYS, now: datetime | None = None) -> int:
    """Delete export files of jobs finished more than ``days`` ago; return files deleted.

    Job rows stay (their ``result_file`` is cleared, so the page offers no dead link);
    ``.part`` files left by killed workers are removed once they are as old.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    root = _export_dir()
    deleted = 0
    old_jobs = Job.objects.filter(kind=Job.Kind.EXPORT, finished_at__lt=cutoff).exclude(
        result_file=""
    )
    for job in old_jobs.only("pk", "result_file", "result"):
        names = [job.result_file]
        if isinstance(job.result, dict) and job.result.get("datasheet"):
            names.append(job.result["datasheet"])
        for name in names:
            path = _inside(root, name)
            if path is not None and path.is_file():
                path.unlink()
                deleted += 1
        Job.objects.filter(pk=job.pk).update(
            result_file="", message=f"File deleted after {days} days; export again."
        )
    if root.is_dir():
        for part in root.glob(".*.part"):
            if datetime.fromtimestamp(part.stat().st_mtime, tz=UTC) < cutoff:
                part.unlink(missing_ok=True)
                deleted += 1
    return deleted


def _export_dir() -> Path:
    return Path(settings.CAPEVAL_EXPORT_DIR)


def _inside(root: Path, name: str) -> Path | None:
    path = (root / name).resolve()
    return path if root.resolve() in path.parents else None


# ---------------------------------------------------------------------------------------
# Running


def export_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """Run an export job into the export folder; return what ``job_finish`` stores."""
    study = Study.objects.get(pk=job.study_id)
    params = job.params or {}
    export_format = params.get("format", "csv")
    table = params.get("table", "judgments")
    try:
        _check_options(export_format, table)
    except ValueError as exc:
        raise ServiceError(str(exc)) from exc
    root = _export_dir()
    root.mkdir(parents=True, exist_ok=True)
    name = f"study-{study.pk}-export-{job.pk}"
    if export_format != "dataset" and table != "judgments":
        name += f"-{table}"
    summary = export_file(
        study=study,
        path=root / f"{name}.{FILE_SUFFIX[export_format]}",
        export_format=export_format,
        table=table,
        raw_ids=bool(params.get("raw_ids")),
        images=bool(params.get("images")),
        progress=progress,
    )
    result = {
        "format": export_format,
        "table": "judgments+participants" if export_format == "dataset" else table,
        "rows": summary.rows,
        "judgments": summary.judgments,
    }
    if summary.datasheet:
        result["datasheet"] = summary.datasheet.name
    return {
        "result": result,
        "result_file": summary.path.name,
        "message": f"Exported {summary.rows:,} rows",
    }


@dataclass
class ExportSummary:
    path: Path
    datasheet: Path | None
    rows: int
    judgments: int


def export_file(
    *,
    study: Study,
    path: Path,
    export_format: str,
    table: str = "judgments",
    raw_ids: bool = False,
    images: bool = False,
    progress: Progress | None = None,
) -> ExportSummary:
    """Write one export of ``study`` to ``path`` (and its datasheet beside it, except for
    a dataset, which holds it); the job, the API and ``manage.py export_study`` all call
    this. Nothing appears under the final names unless the whole export succeeded."""
    _check_options(export_format, table)
    progress = progress or _no_progress
    path = Path(path)
    sheet = path.with_name(f"{path.stem}.datasheet.json") if export_format != "dataset" else None
    parts = [path.with_name(f".{path.name}.part")]
    if sheet:
        parts.append(sheet.with_name(f".{sheet.name}.part"))
    try:
        with parts[0].open("wb") as out:
            if export_format == "dataset":
                tallies, datasheet = _write_dataset(
                    study, out, raw_ids=raw_ids, images=images, progress=progress
                )
            else:
                sink = _SINKS[export_format](out)
                tallies = {
                    table: _write_table(study, table, sink, raw_ids=raw_ids, progress=progress)
                }
            _flush_to_disk(out)
        if sheet:
            datasheet = _datasheet(
                study,
                tallies,
                export_format=export_format,
                files={table: path.name},
                raw_ids=raw_ids,
            )
            with parts[1].open("wb") as out:
                out.write((json.dumps(datasheet, indent=2, ensure_ascii=False) + "\n").encode())
                _flush_to_disk(out)
            os.replace(parts[1], sheet)
        os.replace(parts[0], path)
        _sync_folder(path.parent)
    except BaseException as exc:
        for part in parts:
            part.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            logger.error("export of study %s to %s stopped: %s", study.pk, path.parent, exc)
            raise ServiceError(DISK_FULL_MESSAGE, status=507) from exc
        raise
    main = tallies.get("judgments") or tallies[table]
    return ExportSummary(path=path, datasheet=sheet, rows=main.rows, judgments=main.judgments)


DISK_FULL_MESSAGE = (
    "The disk is full: the server's export folder ran out of space while writing this "
    "export, so it was stopped and its partial file deleted. Ask the administrator to free "
    "space (old export files are deleted after a few days), then export again."
)


def _flush_to_disk(out: BinaryIO) -> None:
    """Write the file's buffers to the disk: a disk that fills up (or fails) says so here,
    before the file gets the name a download would offer."""
    out.flush()
    os.fsync(out.fileno())


def _sync_folder(folder: Path) -> None:
    """Make the renames in ``folder`` durable (POSIX: fsync of the directory)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _no_progress(*args: Any) -> None:
    return None


def table_columns(study: Study, table: str, *, raw_ids: bool = False) -> list[ExportColumn]:
    """The columns of one table of the study's export, in file order."""
    if table == "participants":
        return participant_columns(raw_ids=raw_ids)
    return list(get_mode(study.mode).export.columns())


def _write_table(study: Study, table: str, sink, *, raw_ids: bool, progress: Progress) -> _Tally:
    columns = table_columns(study, table, raw_ids=raw_ids)
    schema = _schema(columns)
    tally = _Tally(columns)
    sink.open(schema)
    if table == "participants":
        batches = _participant_batches(study, schema, raw_ids=raw_ids)
        for batch in batches:
            tally.observe(batch)
            sink.write(batch)
        sink.close()
        return tally
    total = Judgment.objects.filter(study_id=study.pk).count()
    progress(0, f"Exporting {total:,} judgments")
    mode = get_mode(study.mode)
    sql, params = mode.export.query(study, ExportSql(connection.vendor))
    shown = 0
    with _sql_batches(sql, params, schema) as batches:
        for batch in _slowed_for_tests(batches):
            tally.observe(batch)
            sink.write(batch)
            percent = min(99, tally.judgments * 100 // max(total, 1))
            if percent != shown:
                shown = percent
                progress(percent, f"Exported {tally.judgments:,} of {total:,} judgments")
    sink.close()
    return tally


def _slowed_for_tests(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches as they come, unless ``CAPEVAL_EXPORT_CHUNK_DELAY_S`` is set.

    A test-only hook (default 0): the worker-kill tests need an export slow enough to stop
    midway, so it is cut into ``CAPEVAL_EXPORT_CHUNK_SIZE``-row slices with a sleep after each.
    """
    delay = float(getattr(settings, "CAPEVAL_EXPORT_CHUNK_DELAY_S", 0) or 0)
    if not delay:
        yield from batches
        return
    size = int(getattr(settings, "CAPEVAL_EXPORT_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))
    for batch in batches:
        for start in range(0, batch.num_rows, size):
            yield batch.slice(start, size)
            time.sleep(delay)


def _schema(columns: list[ExportColumn]) -> pa.Schema:
    return pa.schema(
        [
            pa.field(c.name, ARROW_TYPES[c.type], metadata={"description": c.description})
            for c in columns
        ]
    )


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


# ---------------------------------------------------------------------------------------
# The participants table


def participant_columns(*, raw_ids: bool = False) -> list[ExportColumn]:
    columns = [
        ExportColumn(
            "participant", "str", "Pseudonym (as in the judgments table).", "participants"
        ),
        ExportColumn("source", "str", "account (registered), prolific or mturk."),
        ExportColumn("status", "str", "Status or phase, defined by the mode."),
        ExportColumn("joined_at", "timestamp", "When the participant first arrived (UTC)."),
        ExportColumn(
            "completed_at",
            "timestamp",
            "Crowd workers: when they earned the completion code (UTC); empty: not (yet).",
        ),
        ExportColumn("completed", "bool", "Whether they earned the completion code."),
        ExportColumn("judgments", "int", "Judgments stored for them."),
        ExportColumn("flag_count", "int", "Integrity events recorded (rate limit, browser...)."),
        ExportColumn("flag_kinds", "str", "Kinds of those events, sorted, ';'-separated."),
    ]
    if raw_ids:
        columns += [
            ExportColumn(
                "worker_id", "str", "Prolific PID or MTurk WorkerId (owner's request only)."
            ),
            ExportColumn(
                "submission_id",
                "str",
                "Prolific SESSION_ID or MTurk assignmentId, to approve or reject.",
            ),
        ]
    return columns


def _participant_batches(
    study: Study, schema: pa.Schema, *, raw_ids: bool
) -> Iterator[pa.RecordBatch]:
    """One query (participants are thousands, not millions); raw ids only on request.
    The rows go through pyarrow's JSON reader, typed by the schema (see below why not
    ``pa.array``)."""
    crowd = {Participant.Source.PROLIFIC, Participant.Source.MTURK}
    fields = ["pseudonym", "source", "status", "created_at", "completed_at", "flags", "n"]
    if raw_ids:
        fields += ["external_id", "external_meta"]
    rows = (
        Participant.objects.filter(study_id=study.pk)
        .annotate(n=Count("judgments"))
        .order_by("id")
        .values_list(*fields)
    )
    lines: list[str] = []
    for row in rows:
        record = dict(zip(fields, row, strict=True))
        flags = [f for f in record["flags"] or [] if isinstance(f, dict)]
        values = {
            "participant": record["pseudonym"],
            "source": record["source"],
            "status": record["status"],
            "joined_at": record["created_at"],
            "completed_at": record["completed_at"],
            "completed": record["completed_at"] is not None,
            "judgments": record["n"],
            "flag_count": len(flags),
            "flag_kinds": ";".join(sorted({str(f.get("kind", "")) for f in flags})),
        }
        if raw_ids:
            is_crowd = record["source"] in crowd
            meta = record["external_meta"] or {}
            values["worker_id"] = record["external_id"] if is_crowd else None
            values["submission_id"] = (
                (meta.get("SESSION_ID") or meta.get("assignmentId")) if is_crowd else None
            )
        lines.append(json.dumps(values, default=_iso) + "\n")
    # pyarrow's JSON reader types the rows by the schema; pa.array() would make pyarrow
    # import pandas when it is installed (about 50 MB, a quarter of the memory budget).
    if not lines:
        yield pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        return
    table = pa_json.read_json(
        io.BytesIO("".join(lines).encode()),
        parse_options=pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="error"
        ),
        memory_pool=EXPORT_POOL,
    )
    for batch in table.to_batches():
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)


# ---------------------------------------------------------------------------------------
# Writers (one per format; each takes record batches of the table's schema)


def neutralise(text: str) -> str:
    """Prefix a text that a spreadsheet would run as a formula with a single quote."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _neutralised(column: pa.Array) -> pa.Array:
    """``neutralise`` on every value of a string array, on its buffers with numpy.

    Why not pyarrow.compute: its first call loads the compute registry, 40-60 MB of
    resident memory, a third of the export process's budget. The common case (no cell
    starts like a formula) returns the array untouched.
    """
    if not len(column) or column.null_count == len(column):
        return column
    validity, offsets_buffer, data_buffer = column.buffers()
    if data_buffer is None:
        return column
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[
        column.offset : column.offset + len(column) + 1
    ]
    data = np.frombuffer(data_buffer, dtype=np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    nonempty = ends > starts
    first = np.zeros(len(column), dtype=np.uint8)
    first[nonempty] = data[starts[nonempty]]
    formula = nonempty & _FORMULA_FIRST[first]
    if not formula.any():
        return column
    if validity is not None and column.offset:
        return pa.array([v if v is None else neutralise(v) for v in column.to_pylist()])
    base = int(offsets[0])
    # One quote byte before each formula cell's first byte; later cells shift along.
    text = np.insert(data[base : int(offsets[-1])], starts[formula] - base, ord("'"))
    shift = np.concatenate(([0], np.cumsum(formula)))
    moved = (offsets - base + shift).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(),
        len(column),
        [validity, pa.py_buffer(moved), pa.py_buffer(text)],
        null_count=column.null_count,
    )


class _CsvSink:
    def __init__(self, out: BinaryIO):
        self.out = out

    def open(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.writer = pa_csv.CSVWriter(
            self.out,
            schema,
            write_options=pa_csv.WriteOptions(quoting_style="needed"),
            memory_pool=EXPORT_POOL,
        )

    def write(self, batch: pa.RecordBatch) -> None:
        columns = [
            _neutralised(col) if pa.types.is_string(col.type) else col for col in batch.columns
        ]
        self.writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self.schema))

    def close(self) -> None:
        self.writer.close()


class _JsonlSink:
    # Rows become Python dicts here; slices keep that memory small.
    SLICE_ROWS = 2000

    def __init__(self, out: BinaryIO):
        self.out = out

    def open(self, schema: pa.Schema) -> None:
        self.names = schema.names
        self.times = [n for n, f in enumerate(schema) if pa.types.is_timestamp(f.type)]

    def write(self, batch: pa.RecordBatch) -> None:
        names = self.names
        for start in range(0, batch.num_rows, self.SLICE_ROWS):
            # Timestamps from their int64 values: to_pylist() of a timestamp column makes
            # pyarrow import pandas (about 50 MB) when it is installed.
            columns = [
                _iso_column(col) if n in self.times else col.to_pylist()
                for n, col in enumerate(batch.slice(start, self.SLICE_ROWS).columns)
            ]
            text = "".join(
                json.dumps(dict(zip(names, row, strict=True)), ensure_ascii=False) + "\n"
                for row in zip(*columns, strict=True)
            )
            self.out.write(text.translate(_LINE_SEPARATORS).encode())

    def close(self) -> None:
        return None


class _ParquetSink:
    # ParquetWriter makes a row group of every write, so the reader's small batches (about
    # 1,000 rows) are gathered into row groups of this many rows: 61 row groups for 1M rows,
    # and the gathered batches hold about 5 MB for THumB (65,536 rows: 20 MB live, 30 MB
    # more peak memory, and a file no smaller).
    ROW_GROUP_ROWS = 16_384

    def __init__(self, out: BinaryIO):
        self.out = out

    def open(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.writer = pq.ParquetWriter(self.out, schema, memory_pool=EXPORT_POOL)
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.ROW_GROUP_ROWS:
            self._write_row_group()

    def _write_row_group(self) -> None:
        if self.pending:
            # One row group of the gathered batches (chunked columns, nothing copied).
            self.writer.write_table(pa.Table.from_batches(self.pending, schema=self.schema))
        self.pending = []
        self.pending_rows = 0

    def close(self) -> None:
        self._write_row_group()
        self.writer.close()


_SINKS = {"csv": _CsvSink, "jsonl": _JsonlSink, "parquet": _ParquetSink}


def _write_dataset(
    study: Study, out: BinaryIO, *, raw_ids: bool, images: bool, progress: Progress
) -> tuple[dict[str, _Tally], dict[str, Any]]:
    """The dataset folder as a zip: Parquet tables, README card, datasheet, images."""
    files = {table: f"data/{table}.parquet" for table in EXPORT_TABLES}
    tallies: dict[str, _Tally] = {}
    # Parquet is compressed already; storing keeps the zip as fast as the files.
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for table in EXPORT_TABLES:
            with archive.open(files[table], "w", force_zip64=True) as out:
                tallies[table] = _write_table(
                    study, table, _ParquetSink(out), raw_ids=raw_ids, progress=progress
                )
        image_names: list[str] = []
        renamed: dict[str, str] = {}
        if images:
            image_names, renamed = _add_images(study, archive)
        datasheet = _datasheet(
            study, tallies, export_format="dataset", files=files, raw_ids=raw_ids
        )
        if image_names:
            datasheet["images_folder"] = {
                "folder": "images/",
                "files": len(image_names),
                "note": (
                    "Display renditions (longest side <= 1024 px), named like the image; "
                    "names unsafe on some operating system are changed as listed in "
                    "renamed (the tables keep the original name)."
                ),
                "renamed": renamed,
            }
        archive.writestr("datasheet.json", json.dumps(datasheet, indent=2, ensure_ascii=False))
        archive.writestr("README.md", dataset_card(datasheet))
    return tallies, datasheet


def _add_images(study: Study, archive: zipfile.ZipFile) -> tuple[list[str], dict[str, str]]:
    """Write the display images under ``images/``; return the members written and the
    names that had to change (original name -> member name, ``annotation.zipnames``)."""
    root = Path(settings.MEDIA_ROOT)
    rows = [
        (name, root / display)
        for name, display in Image.objects.filter(study_id=study.pk).values_list("name", "display")
        if display and (root / display).is_file()
    ]
    # The member names (not what "/" becomes) are what must unpack on Windows: reserved
    # device names, forbidden characters, trailing dots and names equal but for case.
    members = safe_member_names(name.replace("/", "_").replace("\\", "_") for name, _ in rows)
    written, renamed = [], {}
    for name, source in rows:
        member = members[name.replace("/", "_").replace("\\", "_")]
        archive.write(source, "images/" + member)
        written.append("images/" + member)
        if member != name:
            renamed[name] = member
    return written, renamed


# ---------------------------------------------------------------------------------------
# Counting what was written (for the datasheet)


@dataclass
class _Tally:
    columns: list[ExportColumn]
    rows: int = 0
    judgments: int = 0
    excluded: int = 0
    distinct: dict[str, set[Any]] = field(default_factory=dict)
    ids: dict[str, list[np.ndarray]] = field(default_factory=dict)
    first: Any = None
    last: Any = None
    _last_id: Any = None

    def observe(self, batch: pa.RecordBatch) -> None:
        """Count from the batch's buffers (numpy views; see ``_neutralised`` for why not
        pyarrow.compute)."""
        self.rows += batch.num_rows
        if not batch.num_rows:
            return
        names = batch.schema.names
        if "judgment_id" in names:
            # Rows come in judgment-id order: a new judgment wherever the id changes.
            ids = _values(batch.column("judgment_id"), np.int64)
            changes = int(np.count_nonzero(ids[1:] != ids[:-1])) + 1
            self.judgments += changes - int(ids[0] == self._last_id)
            self._last_id = ids[-1]
            if "excluded" in names:
                flags = batch.column("excluded")
                self.excluded += int(np.count_nonzero(_bits(flags, 1) & _bits(flags, 0)))
        if "created_at" in names:
            times = batch.column("created_at")
            if times.null_count == 0:
                stamps = _values(times, np.int64)
                low, high = int(stamps.min()), int(stamps.max())
                self.first = low if self.first is None else min(self.first, low)
                self.last = high if self.last is None else max(self.last, high)
        for column in self.columns:
            if column.counts:
                values = batch.column(column.name)
                if pa.types.is_integer(values.type):
                    if values.null_count == len(values):
                        continue
                    # Distinct ids in numpy, 8 bytes an id (a Python set of THumB's 500,000
                    # caption ids costs 30-40 MB): each batch's, merged into the first
                    # array whenever they outgrow it, so at most about twice the distinct
                    # ids are held and each id is sorted a few times.
                    found = self.ids.setdefault(column.counts, [])
                    found.append(np.unique(_values(values, np.int64)[_bits(values, 0)]))
                    if sum(len(ids) for ids in found[1:]) > len(found[0]):
                        found[:] = [_distinct(np.concatenate(found))]
                else:
                    self.distinct.setdefault(column.counts, set()).update(values.to_pylist())

    def counts(self) -> dict[str, int]:
        counts = {"rows": self.rows}
        if any(c.name == "judgment_id" for c in self.columns):
            counts["judgments"] = self.judgments
            counts["excluded_rows"] = self.excluded
        for what in ("participants", "images", "captions"):
            if any(c.counts == what for c in self.columns):
                if what in self.ids:
                    counts[what] = len(_distinct(np.concatenate(self.ids[what])))
                else:
                    counts[what] = len(self.distinct.get(what, set()) - {None})
        return counts


# ---------------------------------------------------------------------------------------
# Datasheet and dataset card


def public_settings(settings_: dict[str, Any] | None) -> dict[str, Any]:
    """Study settings without secrets: the completion code, also inside a Prolific URL."""
    public = dict(settings_ or {})
    if "completion_code" in public:
        public["completion_code"] = REDACTED
    url = public.get("prolific_completion_url")
    if isinstance(url, str) and url:
        parts = urlsplit(url)
        query = [(k, REDACTED if k.lower() == "cc" else v) for k, v in parse_qsl(parts.query)]
        public["prolific_completion_url"] = urlunsplit(parts._replace(query=urlencode(query)))
    return public


def _datasheet(
    study: Study,
    tallies: dict[str, _Tally],
    *,
    export_format: str,
    files: dict[str, str],
    raw_ids: bool,
) -> dict[str, Any]:
    mode = get_mode(study.mode)
    rules = mode.export.exclusion_rules or ""
    rules_list = [rules] if isinstance(rules, str) else list(rules)
    main = tallies.get("judgments")
    tables = {}
    for table, tally in tallies.items():
        tables[table] = {
            "file": files[table],
            "row": mode.export.row_unit if table == "judgments" else "participant",
            "counts": tally.counts(),
            "columns": [
                {"name": c.name, "type": c.type, "description": c.description}
                for c in tally.columns
            ],
        }
    return {
        "title": f"{study.name} ({mode.label or study.mode})",
        "format": export_format,
        "format_notes": _FORMAT_NOTES[export_format],
        "exported_at": timezone.now().astimezone(UTC).isoformat(),
        "motivation": study.description or "",
        "study": {
            "id": study.pk,
            "name": study.name,
            "mode": study.mode,
            "protocol": mode.label or study.mode,
            "status": study.status,
            "settings": public_settings(study.settings),
            "created_at": _iso(study.created_at),
        },
        "seeds": {"study": study.seed},
        "collection": {
            "first_judgment_at": _iso(_from_micros(main.first)) if main else None,
            "last_judgment_at": _iso(_from_micros(main.last)) if main else None,
        },
        "tables": tables,
        "counts_notes": (
            "rows: lines of the table's file. judgments: distinct judgments in it (THumB "
            "gives one row per caption, so rows > judgments). excluded_rows: rows flagged "
            "excluded. participants, images and captions: distinct values appearing in the "
            "file. study_totals: the whole study when exported."
        ),
        "study_totals": study_counts(study),
        "exclusion_rules": [*[r for r in rules_list if r], GENERIC_EXCLUSION_RULE],
        "agreement": _agreement_summary(study),
        "privacy": (
            "Participants appear by pseudonym only; no user names, client addresses or "
            "browser ids. "
            + (
                "The participants table holds raw Prolific/MTurk ids (the owner asked for "
                "them): remove them before publishing."
                if raw_ids
                else "No crowd worker ids."
            )
        ),
        "licence": {
            "data_licence": "TODO: the licence of this dataset (e.g. CC BY 4.0)",
            "image_licence": "TODO: the licence terms of the images",
            "citation": "TODO: how to cite this dataset",
        },
        "software": {
            "capeval": capeval.__version__,
            "django": django.get_version(),
            "python": platform.python_version(),
            "pyarrow": pa.__version__,
            "numpy": _version("numpy"),
            "database": connection.vendor,
            "platform": sys.platform,
        },
    }


_FORMAT_NOTES = {
    "csv": (
        "CSV: UTF-8, header row, fields quoted when needed (RFC 4180); booleans true/false, "
        "null as an empty cell, timestamps ISO 8601 UTC; text cells starting with = + - @ "
        "tab or CR are prefixed with ' (CSV injection), numbers never are."
    ),
    "jsonl": (
        "JSONL: one JSON object per line, UTF-8, values in their JSON types, timestamps as "
        "ISO 8601 UTC text; U+0085, U+2028 and U+2029 are written as \\u escapes."
    ),
    "parquet": "Parquet: typed columns; each field's description is in its metadata.",
    "dataset": (
        "A dataset folder (zip): data/*.parquet (typed columns), README.md (the dataset "
        "card), datasheet.json; load it with datasets.load_dataset('<folder>')."
    ),
}

# Report keys that summarise agreement, per mode (never the whole stored report: HUMANr's
# holds the completion code).
_AGREEMENT_KEYS = {
    "thumb": ("stage_agreement", "third_check", "developmental"),
    "vicr": ("agreement", "agreement_error", "included"),
    "humanr": ("humanr",),
}


def _agreement_summary(study: Study) -> dict[str, Any]:
    job = (
        Job.objects.filter(study_id=study.pk, kind=Job.Kind.REPORT, status=Job.Status.DONE)
        .order_by("-finished_at", "-id")
        .only("result", "finished_at")
        .first()
    )
    if job is None or not isinstance(job.result, dict):
        return {"note": "No report computed yet: compute the report, then export again."}
    summary: dict[str, Any] = {"report_computed_at": _iso(job.finished_at)}
    for key in _AGREEMENT_KEYS.get(study.mode, ()):
        value = job.result.get(key)
        if key == "humanr" and isinstance(value, dict):
            value = {
                k: v
                for k, v in value.items()
                if k in ("n_kept", "attention_checks", "baseline", "systems", "half_splits")
            }
        if value is not None:
            summary[key] = value
    return summary


def dataset_card(datasheet: dict[str, Any]) -> str:
    """The README of a dataset folder: Hugging Face YAML header, then the datasheet."""
    tables = datasheet["tables"]
    study = datasheet["study"]
    lines = [
        "---",
        "configs:",
    ]
    for n, (table, info) in enumerate(tables.items()):
        lines += [f"- config_name: {table}", f"  data_files: {info['file']}"]
        if n == 0:
            lines.append("  default: true")
    lines += [
        "license: unknown  # TODO: fill in the dataset's licence",
        "---",
        "",
        f"# {datasheet['title']}",
        "",
        "## Motivation",
        "",
        datasheet["motivation"] or "TODO: why this dataset was collected, and by whom.",
        "",
        "## Composition",
        "",
    ]
    for table, info in tables.items():
        counts = ", ".join(f"{k}: {v:,}" for k, v in info["counts"].items())
        lines += [f"### `{info['file']}` ({table}; one row per {info['row']})", "", counts, ""]
        lines += ["| column | type | description |", "| --- | --- | --- |"]
        lines += [
            f"| `{c['name']}` | {c['type']} | {c['description'].replace('|', '/')} |"
            for c in info["columns"]
        ]
        lines.append("")
    collection = datasheet["collection"]
    lines += [
        "## Protocol",
        "",
        f"{study['protocol']} (`{study['mode']}`), study seed {datasheet['seeds']['study']}. "
        "Settings (secrets redacted):",
        "",
        "```json",
        json.dumps(study["settings"], indent=2, ensure_ascii=False),
        "```",
        "",
        "## Collection",
        "",
        f"Judgments from {collection['first_judgment_at']} to "
        f"{collection['last_judgment_at']} (UTC); exported {datasheet['exported_at']}.",
        "",
        "## Exclusion rules",
        "",
        *[f"- {rule}" for rule in datasheet["exclusion_rules"]],
        "",
        "## Agreement",
        "",
        "```json",
        json.dumps(datasheet["agreement"], indent=2, ensure_ascii=False, default=str),
        "```",
        "",
        "## Privacy",
        "",
        datasheet["privacy"],
        "",
        "## Licence and citation",
        "",
        *[f"- {k.replace('_', ' ')}: {v}" for k, v in datasheet["licence"].items()],
        "",
    ]
    return "\n".join(lines)


def _values(column: pa.Array, dtype: Any) -> np.ndarray:
    """The values of a fixed-width array without nulls, as a numpy view of its buffer."""
    return np.frombuffer(column.buffers()[1], dtype=dtype)[
        column.offset : column.offset + len(column)
    ]


def _bits(column: pa.Array, buffer: int) -> np.ndarray:
    """A bitmap of an array as booleans: buffer 0 is validity (all true when absent), buffer
    1 of a boolean array its values."""
    bitmap = column.buffers()[buffer]
    if bitmap is None:
        return np.ones(len(column), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[column.offset : column.offset + len(column)].astype(bool)


def _distinct(ids: np.ndarray) -> np.ndarray:
    """The distinct values of a fresh array, sorted in place (np.unique's hash table and
    copies cost several times the array)."""
    ids.sort()
    return ids[np.concatenate(([True], ids[1:] != ids[:-1]))] if len(ids) else ids


def _iso_column(column: pa.Array) -> list[str | None]:
    """A timestamp[us, UTC] array as ISO 8601 texts (``_iso``), None for nulls."""
    micros = _values(column, np.int64).tolist()
    valid = _bits(column, 0).tolist()
    return [_iso(_from_micros(v)) if ok else None for v, ok in zip(micros, valid, strict=True)]


def _from_micros(value: int | None) -> datetime | None:
    return None if value is None else EPOCH + timedelta(microseconds=value)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
