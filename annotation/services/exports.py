"""Exports: a study's raw judgments as CSV or JSONL, with a datasheet beside the data file.

One row per judgment (or several, if the mode's ``export_rows`` says so: THumB gives one
per caption), in primary-key order, of the judgments that existed when the export started
(a live study keeps collecting; the datasheet names the snapshot's last id).

Columns are chosen once, at the start, and are the same in both formats:

- the common columns of ``COMMON_COLUMNS`` (study, judgment, item, image, the captions the
  item shows, participant pseudonym, phase, timestamps, dwell time, exclusion flag);
- ``payload.<key>`` and ``result.<key>`` for every top-level key found in the snapshot's
  payloads and results (a key a judgment lacks is empty/null);
- the mode's own columns (``Mode.export_columns()``), appended last.

Formats. JSONL: one JSON object per line, values in their JSON types (lists and objects
nested, null for missing). CSV (RFC 4180, UTF-8, header row): lists and objects as compact
JSON, booleans as ``true``/``false``, null as an empty cell; a text cell starting with
``= + - @``, tab or carriage return is prefixed with ``'`` (OWASP CSV injection guidance) so
a spreadsheet never runs a caption as a formula. Only text is neutralised: numbers the
export formats itself (``-0.5``) stay numbers.

Privacy: participants appear only by pseudonym, never by user name or crowd worker id.

Writing: one query streams the rows as plain tuples, in chunks of
``CAPEVAL_EXPORT_CHUNK_SIZE`` (default 5,000). On PostgreSQL a worker (autocommit) reads them
through a server-side cursor on a connection of its own, fetched by a thread one chunk
ahead, so the database works while Python formats; inside a caller's transaction the
cursor runs on the caller's connection (see ``_row_chunks``). Item, image, participant and
assignment columns come by join, JSON and timestamps as text formatted by the database;
the captions an item shows are looked up once per item and cached (up to 100,000 items),
and the CSV cells of short payload/result texts are remembered, since they repeat. CSV
lines are joined from these cached fragments (exactly as csv.writer would write them),
not cell by cell. The payload and result keys come from one scan before the rows; the
datasheet's counts come from the streamed rows. Memory stays bounded by the chunks and
these caches. Progress is reported after every chunk.
Rows go to a hidden ``.part`` file in ``CAPEVAL_EXPORT_DIR`` that is renamed with
``os.replace`` only when complete; the datasheet (``<stem>.datasheet.json``) is renamed
first, the data file last. A run that fails removes
its ``.part`` files; a run restarted after a killed worker starts from scratch and
overwrites them. The job's ``result_file`` is the data file; ``job.result["datasheet"]``
names the datasheet.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from importlib import metadata
from json.encoder import encode_basestring as encode_json_string
from operator import itemgetter
from pathlib import Path
from typing import Any, TextIO

import django
from django.conf import settings
from django.db import connection
from django.db.models import F, Func, Max, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

import capeval
from annotation.models import Caption, Item, Job, Judgment, Study, User
from annotation.modes import Mode, get_mode
from annotation.modes.base import ExportColumn
from annotation.selectors import study_counts
from annotation.services.jobs import job_create

EXPORT_FORMATS = ("csv", "jsonl")
DEFAULT_CHUNK_SIZE = 5000
# Items whose caption cells are kept between chunks (about 0.25 kB each in CSV, so at most
# ~25 MB); the cache is emptied when full, which bounds memory for studies with more items
# than this. Judgments cycle through the items, so a cache smaller than the study's items
# misses on every row: looking captions up again costs more than the rest of a CSV row.
ITEM_CACHE_SIZE = 100_000
# CSV lines are joined by the export itself (see _csv_lines), with the csv module's
# conventions: QUOTE_MINIMAL, "\r\n" line ends, quotes doubled.
CSV_LINE_END = "\r\n"
CSV_QUOTED_CHARS = re.compile('[,"\r\n]')
# Payload and result texts of at most JSON_CELL_CACHE_TEXT characters whose CSV cells are
# remembered (see _json_fragment), emptied when full.
JSON_CELL_CACHE_SIZE = 10_000
JSON_CELL_CACHE_TEXT = 200
# SQLite refuses more than 32,766 variables in one statement; stay far below it.
IN_BATCH = 900
DEFAULT_KEEP_DAYS = 7
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
GENERIC_EXCLUSION_RULE = (
    "Judgments with excluded=true are kept and flagged; exclusion_reason says why."
)

COMMON_COLUMNS: tuple[tuple[str, str], ...] = (
    ("study_id", "Id of the study."),
    ("study_name", "Name of the study."),
    ("study_mode", "Protocol of the study (thumb, vicr, humanr)."),
    (
        "judgment_id",
        "Id of the judgment; rows are in this order (a mode may give a "
        "judgment several rows, e.g. THumB one per caption).",
    ),
    ("item_id", "Id of the item judged (the unit the mode serves)."),
    ("item_kind", "Kind of item, defined by the mode (e.g. tutorial, game, comparison)."),
    ("item_position", "Position of the item in the study's item order."),
    ("image_name", "Name of the image as cited by the import file."),
    ("image_sha256", "SHA-256 of the original image file."),
    ("caption_ids", "Ids of the captions the item shows, as a list."),
    ("caption_systems", "System of each caption (Human for human captions), same order."),
    ("caption_texts", "Normalised text of each caption as shown, same order."),
    ("caption_raw_texts", "Raw text of each caption as imported, same order."),
    ("participant", "Pseudonym of the participant (never a user name or crowd worker id)."),
    ("phase", "Phase of the participant when judging, defined by the mode."),
    ("part", "Part of the assignment this judgment answers (0 for single-part items)."),
    ("created_at", "When the judgment was stored (ISO 8601, UTC)."),
    ("served_at", "When the item was served to the participant (ISO 8601, UTC)."),
    ("submitted_at", "When the whole assignment was submitted (ISO 8601, UTC)."),
    ("dwell_ms", "Server-measured time from serving to submission, in milliseconds."),
    ("excluded", "Whether the judgment is excluded from the scores (it is kept here)."),
    ("exclusion_reason", "Why the judgment is excluded, if it is."),
)
_PAYLOAD_AT = [name for name, _ in COMMON_COLUMNS].index("created_at")


Progress = Callable[..., None]


class ExportError(Exception):
    """An export that cannot run; the message is shown on the job."""

    def __init__(self, message: str):
        super().__init__(message)
        self.user_message = message


@dataclass(frozen=True)
class ExportColumnInfo:
    name: str
    description: str


# ---------------------------------------------------------------------------------------
# Requests and cleanup


def export_request(*, study: Study, user: User, export_format: str) -> Job:
    """Queue an export job of the study's judgments in ``export_format`` (csv or jsonl)."""
    if export_format not in EXPORT_FORMATS:
        raise ValueError(
            f"Unknown export format {export_format!r}; choose one of {', '.join(EXPORT_FORMATS)}."
        )
    return job_create(
        kind=Job.Kind.EXPORT, study=study, created_by=user, params={"format": export_format}
    )


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
    """Write the job's study export and its datasheet; return what ``job_finish`` stores."""
    study = Study.objects.get(pk=job.study_id)
    export_format = (job.params or {}).get("format", "csv")
    if export_format not in EXPORT_FORMATS:
        raise ExportError(f"Unknown export format {export_format!r}.")
    mode = get_mode(study.mode)
    mode_columns = list(mode.export_columns())

    judgments = Judgment.objects.filter(study_id=study.pk)
    max_id = judgments.aggregate(last=Max("id"))["last"] or 0
    total = judgments.filter(id__lte=max_id).count()
    payload_keys, result_keys = _json_keys(study.pk, max_id)
    columns = _columns(payload_keys, result_keys, mode_columns, study.mode)

    root = _export_dir()
    root.mkdir(parents=True, exist_ok=True)
    stem = f"study-{study.pk}-export-{job.pk}"
    data_name = f"{stem}.{export_format}"
    sheet_name = f"{stem}.datasheet.json"
    data_part = root / f".{data_name}.part"
    sheet_part = root / f".{sheet_name}.part"

    writer = _ExportWriter(
        study=study,
        export_format=export_format,
        payload_keys=payload_keys,
        result_keys=result_keys,
        mode=mode,
        mode_columns=mode_columns,
    )
    progress(0, f"Exporting {total:,} judgments")
    try:
        with data_part.open("w", encoding="utf-8", newline="") as out:
            writer.write_header(out, [c.name for c in columns])
            for done in writer.write_rows(out, max_id=max_id):
                percent = min(99, done * 100 // max(total, 1))
                progress(percent, f"Exported {done:,} of {total:,} judgments")
        datasheet = _datasheet(
            study=study,
            mode=mode,
            export_format=export_format,
            data_name=data_name,
            columns=columns,
            counts=writer.counts(),
            max_id=max_id,
        )
        sheet_part.write_text(json.dumps(datasheet, indent=2, ensure_ascii=False) + "\n")
        os.replace(sheet_part, root / sheet_name)
        os.replace(data_part, root / data_name)
    except BaseException:
        data_part.unlink(missing_ok=True)
        sheet_part.unlink(missing_ok=True)
        raise
    return {
        "result": {
            "datasheet": sheet_name,
            "format": export_format,
            "judgments": writer.judgments,
            "rows": writer.rows,
        },
        "result_file": data_name,
        "message": f"Exported {writer.judgments:,} judgments",
    }


def _json_keys(study_id: int, max_id: int) -> tuple[list[str], list[str]]:
    """Top-level keys of the snapshot's payloads and of its results, found by the database
    in one scan of the judgments (a scan per field doubled the export's start-up)."""
    table = Judgment._meta.db_table
    vendor = connection.vendor
    if vendor == "postgresql":
        # Each judgment gives its two documents as two rows, so one pass reads both.
        sql = (
            "SELECT DISTINCT d.field, jsonb_object_keys(d.doc) "
            f"FROM {table} AS j CROSS JOIN LATERAL "
            "(VALUES ('payload', j.payload), ('result', j.result)) AS d(field, doc) "
            "WHERE j.study_id = %s AND j.id <= %s AND jsonb_typeof(d.doc) = 'object'"
        )
    elif vendor == "sqlite":
        # The two documents as the elements 0 (payload) and 1 (result) of one array.
        sql = (
            "SELECT DISTINCT CASE d.key WHEN 0 THEN 'payload' ELSE 'result' END, e.key "
            f"FROM {table} AS j, json_each(json_array(json(j.payload), json(j.result))) AS d, "
            "json_each(d.value) AS e "
            "WHERE j.study_id = %s AND j.id <= %s AND d.type = 'object'"
        )
    else:  # pragma: no cover - only PostgreSQL and SQLite are configured
        found: dict[str, set[str]] = {"payload": set(), "result": set()}
        for payload, result in (
            Judgment.objects.filter(study_id=study_id, id__lte=max_id)
            .values_list("payload", "result")
            .iterator(chunk_size=DEFAULT_CHUNK_SIZE)
        ):
            for field, value in (("payload", payload), ("result", result)):
                if isinstance(value, dict):
                    found[field].update(value)
        return sorted(found["payload"]), sorted(found["result"])
    with connection.cursor() as cursor:
        cursor.execute(sql, [study_id, max_id])
        rows = cursor.fetchall()
    return (
        sorted(key for field, key in rows if field == "payload"),
        sorted(key for field, key in rows if field == "result"),
    )


def _columns(
    payload_keys: list[str], result_keys: list[str], mode_columns: list[ExportColumn], mode: str
) -> list[ExportColumnInfo]:
    common = [ExportColumnInfo(name, text) for name, text in COMMON_COLUMNS]
    columns = (
        common[:_PAYLOAD_AT]
        + [ExportColumnInfo(f"payload.{k}", f"Submitted value {k!r}.") for k in payload_keys]
        + [ExportColumnInfo(f"result.{k}", f"Server-computed value {k!r}.") for k in result_keys]
        + common[_PAYLOAD_AT:]
    )
    taken = {c.name for c in columns}
    for column in mode_columns:
        if column.name in taken:
            raise ExportError(
                f"The {mode} mode's export column {column.name!r} repeats a column name."
            )
        taken.add(column.name)
        description = column.description or f"Column of the {mode} mode."
        columns.append(ExportColumnInfo(column.name, description))
    return columns


def _chunk_delay() -> float:
    """Seconds to sleep between chunks: a test-only hook that makes an export slow enough
    to kill its worker mid-way (settings.CAPEVAL_EXPORT_CHUNK_DELAY_S, default 0)."""
    return float(getattr(settings, "CAPEVAL_EXPORT_CHUNK_DELAY_S", 0) or 0)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat()


def neutralise(text: str) -> str:
    """Prefix a text that a spreadsheet would run as a formula with a single quote."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _csv_text(text: str) -> str:
    """A CSV cell as csv.writer (QUOTE_MINIMAL) writes it: quoted only when it must be."""
    if CSV_QUOTED_CHARS.search(text) is None:
        return text
    return '"' + text.replace('"', '""') + '"'


def _csv_fragment(cells: Iterable[Any]) -> str:
    """The ``_csv_cell`` values ``cells`` as part of a CSV line, each preceded by a comma."""
    return "".join(["," + (_csv_text(c) if type(c) is str else str(c)) for c in cells])


def _csv_cell(value: Any) -> Any:
    """A JSON value as a CSV cell: text neutralised, numbers kept, the rest as compact JSON."""
    kind = type(value)
    if kind is str:
        return "'" + value if value.startswith(FORMULA_PREFIXES) else value
    if value is None:
        return ""
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is float:
        return value
    if isinstance(value, datetime):
        return _iso(value)
    return neutralise(_compact_json(value))


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


CAPTION_KEYS = ("caption_ids", "caption_id", "captions", "caption")
CAPTION_SUFFIXES = tuple("_" + name for name in CAPTION_KEYS)


def _spec_caption_ids(spec: Any) -> list[int]:
    """Caption ids an item's spec names, in order: ``caption_ids`` first, then any key
    ``caption``, ``caption_id``, ``captions`` or ending in ``_caption(s)``/``_caption_id(s)``
    holding an id or a list of ids (modes name them; this stays mode-agnostic)."""
    if not isinstance(spec, dict):
        return []
    keys = [
        key
        for key in spec
        if key != "caption_ids" and (key in CAPTION_KEYS or key.endswith(CAPTION_SUFFIXES))
    ]
    if "caption_ids" in spec:
        keys.insert(0, "caption_ids")
    ids: list[int] = []
    for key in keys:
        value = spec[key]
        for caption_id in value if isinstance(value, list) else (value,):
            if type(caption_id) is int and caption_id not in ids:
                ids.append(caption_id)
    return ids


def _batches(values: list[int], size: int = IN_BATCH) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class IsoUtc(Func):
    """A timestamp as ISO 8601 text in UTC, formatted by the database: converting a
    million datetimes row by row in Python costs more than the rest of the export."""

    output_field = TextField()
    template = "CAST(%(expressions)s AS TEXT)"

    def as_postgresql(self, compiler, connection, **extra):
        template = (
            "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
        )
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler, connection, **extra):
        # Django stores aware datetimes on SQLite as naive UTC text "YYYY-MM-DD HH:MM:SS[.f]".
        template = "(replace(%(expressions)s, ' ', 'T') || '+00:00')"
        return self.as_sql(compiler, connection, template=template, **extra)


# The columns of one chunk query; JSON and timestamps arrive as text (no per-value
# conversion by Django), item and image columns by join.
ROW_FIELDS = (
    "id",
    "item_id",
    "participant__pseudonym",
    "part",
    "phase",
    "dwell_ms",
    "excluded",
    "exclusion_reason",
    "item__kind",
    "item__position",
    "item__image__name",
    "item__image__sha256",
    "participant_id",
    "assignment_id",
)
ROW_EXPRESSIONS = {
    "payload_text": Cast("payload", TextField()),
    "result_text": Cast("result", TextField()),
    "spec_text": Cast("item__spec", TextField()),
    "created_iso": IsoUtc("created_at"),
    "served_iso": IsoUtc("assignment__served_at"),
    "submitted_iso": IsoUtc("assignment__submitted_at"),
    # Last, for the datasheet's image count (taken from the streamed rows, not a query).
    "image_id": F("item__image_id"),
}


def _row_query(study_id: int, max_id: int) -> QuerySet:
    """The one definition of the rows an export streams (both databases run it)."""
    return (
        Judgment.objects.filter(study_id=study_id, id__lte=max_id)
        .order_by("id")
        .annotate(**ROW_EXPRESSIONS)
        .values_list(*ROW_FIELDS, *ROW_EXPRESSIONS)
    )


@contextmanager
def _row_chunks(query: QuerySet, size: int) -> Iterator[Iterator[list[tuple[Any, ...]]]]:
    """The query's rows as plain tuples in lists of ``size``, skipping Django's per-row
    machinery (the columns need no conversion: JSON and timestamps come as text).

    On PostgreSQL, outside a transaction (a worker), the rows come through a server-side
    cursor on a connection of their own, inside its own transaction, fetched by a thread
    one chunk ahead: the database computes the next chunk while this process formats the
    current one, and nothing is materialised up front (a ``WITH HOLD`` cursor, which
    Django's ``iterator()`` opens in autocommit, computes every row before the first).
    Inside a caller's transaction (tests) a second connection cannot see its rows, so the
    cursor runs on the caller's connection, in the caller's thread.
    """
    sql, params = query.query.sql_with_params()
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            yield iter(partial(cursor.fetchmany, size), [])
        return
    if connection.in_atomic_block:
        connection.ensure_connection()
        with connection.connection.cursor(name=_CURSOR_NAME, scrollable=False) as cursor:
            cursor.execute(sql, params)
            yield iter(partial(cursor.fetchmany, size), [])
        return
    prefetch = _Prefetch(sql, params, size)
    try:
        yield prefetch.chunks()
    finally:
        prefetch.stop()


_CURSOR_NAME = "capeval_export"


class _Prefetch:
    """Fetch chunks on a dedicated PostgreSQL connection in a thread, one chunk ahead."""

    def __init__(self, sql: str, params: tuple[Any, ...], size: int):
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._stopping = threading.Event()
        # Opened here, so a connection error is raised in the caller's thread.
        self._connection = connection.get_new_connection(connection.get_connection_params())
        self._thread = threading.Thread(
            target=self._fetch, args=(sql, params, size), name="capeval-export-fetch", daemon=True
        )
        self._thread.start()

    def _fetch(self, sql: str, params: tuple[Any, ...], size: int) -> None:
        try:
            with (
                self._connection.transaction(),
                self._connection.cursor(name=_CURSOR_NAME, scrollable=False) as cursor,
            ):
                cursor.execute(sql, params)
                while not self._stopping.is_set():
                    rows = cursor.fetchmany(size)
                    self._put(rows)
                    if not rows:
                        break
        except BaseException as exc:  # re-raised in the caller's thread
            self._put(exc)
        finally:
            self._connection.close()

    def _put(self, item: Any) -> None:
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def chunks(self) -> Iterator[list[tuple[Any, ...]]]:
        while True:
            item = self._queue.get()
            if isinstance(item, BaseException):
                raise item
            if not item:
                return
            yield item

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()


class _ExportWriter:
    """Streams one study's judgments into a CSV or JSONL file, chunk by chunk."""

    def __init__(
        self,
        *,
        study: Study,
        export_format: str,
        payload_keys: list[str],
        result_keys: list[str],
        mode: Mode,
        mode_columns: list[ExportColumn],
    ):
        self.study = study
        self.mode = mode
        self.mode_names = [column.name for column in mode_columns]
        # The base export_rows gives one row of export_columns; skip it when there are none.
        self.per_judgment_rows = bool(mode_columns) or (
            type(mode).export_rows is not Mode.export_rows
        )
        self.is_csv = export_format == "csv"
        self.payload_keys = payload_keys
        self.result_keys = result_keys
        self.chunk_size = int(getattr(settings, "CAPEVAL_EXPORT_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))
        self.delay = _chunk_delay()
        self.cell = _csv_cell if self.is_csv else _identity
        self.study_cells = (study.pk, self.cell(study.name), self.cell(study.mode))
        # item id -> its item, image and caption cells (CSV: as one line fragment; JSONL:
        # the four caption lists); emptied when full (see ITEM_CACHE_SIZE).
        self.item_cells: dict[int, Any] = {}
        self.caption_ids: set[int] = set()
        # JSON text of a payload (result) -> its CSV line fragment, see _json_fragment.
        self.payload_cells: dict[str, str] = {}
        self.result_cells: dict[str, str] = {}
        # For the datasheet's counts, collected from the streamed rows.
        self.participant_ids: set[int] = set()
        self.item_ids: set[int] = set()
        self.image_ids: set[int | None] = set()
        self.judgments = 0
        self.rows = 0
        self.excluded = 0
        self._names: list[str] = []

    def write_header(self, out: TextIO, names: list[str]) -> None:
        self._names = names
        if self.is_csv:
            csv.writer(out, lineterminator=CSV_LINE_END).writerow(
                [neutralise(name) for name in names]
            )

    def write_rows(self, out: TextIO, *, max_id: int) -> Iterator[int]:
        """Write every judgment up to ``max_id``; yield the running count after each chunk."""
        with _row_chunks(_row_query(self.study.pk, max_id), self.chunk_size) as chunks:
            yield from self._write_chunks(out, chunks)

    def _write_chunks(self, out: TextIO, chunks: Iterable[list[tuple[Any, ...]]]) -> Iterator[int]:
        for chunk in chunks:
            self._load_items(chunk)
            self.participant_ids.update(map(itemgetter(12), chunk))
            self.item_ids.update(map(itemgetter(1), chunk))
            self.image_ids.update(map(itemgetter(20), chunk))
            if self.is_csv:
                lines = self._csv_lines(chunk)
                if self.per_judgment_rows:
                    lines = self._with_mode_csv(chunk, lines)
                out.write("".join(lines))
            else:
                lines = self._json_lines(chunk)
                if self.per_judgment_rows:
                    lines = self._with_mode_cells(chunk, lines)
                names = self._names
                out.writelines(
                    json.dumps(dict(zip(names, line, strict=True)), ensure_ascii=False) + "\n"
                    for line in lines
                )
            self.judgments += len(chunk)
            self.rows += len(lines)
            yield self.judgments
            if self.delay:
                time.sleep(self.delay)

    def _csv_lines(self, chunk: list[tuple[Any, ...]]) -> list[str]:
        """The chunk's CSV lines, without the mode's cells (added by ``_with_mode_csv``).

        The hot loop of a large export. Lines are joined here rather than by csv.writer,
        which costs ~0.25 us a cell: the cells of an item (with its captions), of a payload
        and of a result repeat, so they are encoded once and cached as line fragments;
        only the judgment's own texts are checked for quoting on every row.
        """
        prefixes = FORMULA_PREFIXES
        text = _csv_text
        payload_cells = self.payload_cells
        result_cells = self.result_cells
        payload_keys = self.payload_keys
        result_keys = self.result_keys
        items = self.item_cells
        study = _csv_fragment(self.study_cells)[1:]
        line_end = CSV_LINE_END
        lines = []
        excluded_count = 0
        for (
            judgment_id,
            item_id,
            pseudonym,
            part,
            phase,
            dwell_ms,
            excluded,
            reason,
            _kind,
            _position,
            _image_name,
            _image_sha,
            _participant_id,
            _assignment_id,
            payload_text,
            result_text,
            _spec_text,
            created_iso,
            served_iso,
            submitted_iso,
            _image_id,
        ) in chunk:
            payload = payload_cells.get(payload_text)
            if payload is None:
                payload = _json_fragment(payload_text, payload_keys, payload_cells)
            result = result_cells.get(result_text)
            if result is None:
                result = _json_fragment(result_text, result_keys, result_cells)
            if excluded:
                excluded_count += 1
            if phase.startswith(prefixes):
                phase = "'" + phase
            if reason.startswith(prefixes):
                reason = "'" + reason
            lines.append(
                f"{study},{judgment_id}{items[item_id]},{text(pseudonym)},{text(phase)},{part}"
                f"{payload}{result},{created_iso},{served_iso or ''},{submitted_iso or ''},"
                f"{'' if dwell_ms is None else dwell_ms},{'true' if excluded else 'false'},"
                f"{text(reason)}{line_end}"
            )
        self.excluded += excluded_count
        return lines

    def _json_lines(self, chunk: list[tuple[Any, ...]]) -> list[list[Any]]:
        captions = self.item_cells
        lines = []
        for row in chunk:
            (judgment_id, item_id, pseudonym, part, phase, dwell_ms, excluded, reason, kind,
             position, image_name, image_sha, _, _, payload_text, result_text, _,
             created_iso, served_iso, submitted_iso, _) = row  # fmt: skip
            payload = _as_dict(json.loads(payload_text))
            result = _as_dict(json.loads(result_text))
            excluded = bool(excluded)
            self.excluded += excluded
            lines.append(
                [
                    *self.study_cells,
                    judgment_id,
                    item_id,
                    kind,
                    position,
                    image_name,
                    image_sha,
                    *captions[item_id],
                    pseudonym,
                    phase,
                    part,
                    *[payload.get(key) for key in self.payload_keys],
                    *[result.get(key) for key in self.result_keys],
                    created_iso,
                    served_iso,
                    submitted_iso,
                    dwell_ms,
                    excluded,
                    reason,
                ]
            )
        return lines

    def _with_mode_cells(self, chunk: list[tuple[Any, ...]], lines: list[list[Any]]):
        """Append the mode's cells; a judgment gives as many rows as ``export_rows`` says
        (at least one: a judgment never silently disappears from the export)."""
        names = self.mode_names
        expanded = []
        for line, judgment in zip(lines, self._judgments(chunk), strict=True):
            for mode_row in self.mode.export_rows(judgment) or [{}]:
                expanded.append(line + [mode_row.get(name) for name in names])
        return expanded

    def _with_mode_csv(self, chunk: list[tuple[Any, ...]], lines: list[str]) -> list[str]:
        """``_with_mode_cells`` for CSV lines (which end with CSV_LINE_END)."""
        names = self.mode_names
        end = len(CSV_LINE_END)
        expanded = []
        for line, judgment in zip(lines, self._judgments(chunk), strict=True):
            start = line[:-end]
            for mode_row in self.mode.export_rows(judgment) or [{}]:
                cells = _csv_fragment([_csv_cell(mode_row.get(name)) for name in names])
                expanded.append(start + cells + CSV_LINE_END)
        return expanded

    def _judgments(self, chunk: list[tuple[Any, ...]]) -> Iterator[Judgment]:
        """Judgment instances for the mode's columns, with their item attached (no N+1)."""
        for row in chunk:
            item = Item(
                id=row[1], study_id=self.study.pk, kind=row[8], position=row[9],
                spec=_as_dict(json.loads(row[16])),
            )  # fmt: skip
            judgment = Judgment(
                id=row[0], study_id=self.study.pk, item_id=row[1], participant_id=row[12],
                assignment_id=row[13], part=row[3], phase=row[4], dwell_ms=row[5],
                excluded=bool(row[6]), exclusion_reason=row[7],
                payload=json.loads(row[14]), result=json.loads(row[15]),
                created_at=datetime.fromisoformat(row[17]),
            )  # fmt: skip
            judgment.item = item
            yield judgment

    def _load_items(self, chunk: list[tuple[Any, ...]]) -> None:
        """Format the cells of the chunk's items not yet cached."""
        new = {row[1]: row for row in chunk if row[1] not in self.item_cells}
        if not new:
            return
        if len(self.item_cells) + len(new) > ITEM_CACHE_SIZE:
            self.item_cells.clear()
        shown = {item_id: _spec_caption_ids(json.loads(row[16])) for item_id, row in new.items()}
        found = self._captions(sorted({cid for ids in shown.values() for cid in ids}))
        for item_id, ids in shown.items():
            rows = [found[cid] for cid in ids if cid in found]
            self.caption_ids.update(row[0] for row in rows)
            if not self.is_csv:
                self.item_cells[item_id] = tuple([row[n] for row in rows] for n in range(4))
                continue
            _, _, _, _, _, _, _, _, kind, position, image_name, image_sha, *_ = new[item_id]
            # JSON arrays built from C-encoded strings: json.dumps per list costs more.
            self.item_cells[item_id] = _csv_fragment(
                (
                    item_id,
                    _csv_cell(kind),
                    position,
                    _csv_cell(image_name),
                    _csv_cell(image_sha),
                    "[" + ",".join([str(row[0]) for row in rows]) + "]",
                    "[" + ",".join([encode_json_string(row[1]) for row in rows]) + "]",
                    "[" + ",".join([encode_json_string(row[2]) for row in rows]) + "]",
                    "[" + ",".join([encode_json_string(row[3]) for row in rows]) + "]",
                )
            )

    def _captions(self, caption_ids: list[int]) -> dict[int, tuple[int, str, str, str]]:
        if not caption_ids:
            return {}
        if connection.vendor == "postgresql":
            # One array parameter instead of thousands of IN placeholders.
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT id, system, text, raw_text FROM {Caption._meta.db_table} "
                    "WHERE study_id = %s AND id = ANY(%s)",
                    [self.study.pk, caption_ids],
                )
                return {row[0]: row for row in cursor.fetchall()}
        found = {}
        for batch in _batches(caption_ids):
            for row in Caption.objects.filter(id__in=batch, study_id=self.study.pk).values_list(
                "id", "system", "text", "raw_text"
            ):
                found[row[0]] = row
        return found

    def counts(self) -> dict[str, int]:
        return {
            "judgments": self.judgments,
            "rows": self.rows,
            "excluded": self.excluded,
            "participants": len(self.participant_ids),
            "items": len(self.item_ids),
            "images": len(self.image_ids - {None}),
            "captions": len(self.caption_ids),
        }


def _json_fragment(text: str, keys: list[str], cache: dict[str, str]) -> str:
    """The CSV line fragment of a payload's (result's) ``keys``, from its JSON text. Short
    texts are remembered: payloads and results repeat (a rating, a choice, the points it
    earned), and a row whose texts were seen before skips ``json.loads``. Long ones (free
    text) are not, which bounds the cache to about JSON_CELL_CACHE_SIZE x 0.6 kB."""
    if not keys:
        return ""
    values = json.loads(text)
    if type(values) is not dict:
        values = {}
    cells = _csv_fragment([_csv_cell(values.get(key)) for key in keys])
    if len(text) <= JSON_CELL_CACHE_TEXT:
        if len(cache) >= JSON_CELL_CACHE_SIZE:
            cache.clear()
        cache[text] = cells
    return cells


def _as_dict(value: Any) -> dict[str, Any]:
    return value if type(value) is dict else {}


def _identity(value: Any) -> Any:
    return value


# ---------------------------------------------------------------------------------------
# Datasheet


def _datasheet(
    *,
    study: Study,
    mode: Any,
    export_format: str,
    data_name: str,
    columns: Iterable[ExportColumnInfo],
    counts: dict[str, int],
    max_id: int,
) -> dict[str, Any]:
    rules = mode.exclusion_rules or ""
    rules_list = [rules] if isinstance(rules, str) else list(rules)
    return {
        "title": f"Judgments of study {study.pk}: {study.name}",
        "data_file": data_name,
        "format": export_format,
        "format_notes": (
            "CSV: RFC 4180, UTF-8, header row; lists and objects as compact JSON, booleans as "
            "true/false, null as empty; text cells starting with = + - @ tab or CR are "
            "prefixed with ' (CSV injection)."
            if export_format == "csv"
            else "JSONL: one JSON object per line, UTF-8, values in their JSON types."
        ),
        "exported_at": timezone.now().astimezone(UTC).isoformat(),
        "study": {
            "id": study.pk,
            "name": study.name,
            "description": study.description,
            "mode": study.mode,
            "mode_label": getattr(mode, "label", "") or study.mode,
            "status": study.status,
            "settings": study.settings,
            "created_at": _iso(study.created_at),
        },
        "seeds": {"study": study.seed},
        "snapshot": {
            "last_judgment_id": max_id,
            "note": "Judgments stored after the export started are not included.",
        },
        "counts": counts,
        "counts_notes": (
            "judgments and excluded count rows of the data file; participants, items, images "
            "and captions count those appearing in it. study_totals counts the whole study."
        ),
        "study_totals": study_counts(study),
        "exclusion_rules": [*[r for r in rules_list if r], GENERIC_EXCLUSION_RULE],
        "privacy": "Participants appear by pseudonym only; no user names or crowd worker ids.",
        "software": {
            "capeval": capeval.__version__,
            "django": django.get_version(),
            "python": platform.python_version(),
            "numpy": _version("numpy"),
            "database": connection.vendor,
            "platform": sys.platform,
        },
        "columns": [{"name": c.name, "description": c.description} for c in columns],
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
