"""Export jobs and files: the request, the job run, ``export_file`` writing one export
(hidden ``.part`` files renamed when complete; a full disk is a ``ServiceError``, and so is
an object store that does not answer), the dataset folder (a zip of the tables, the card,
the datasheet and the display images) and the cleanup of old files."""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
from django.conf import settings
from django.db import connection
from django.utils import timezone

from annotation import storage
from annotation.errors import DiskFull, Forbidden, NotFound, ServiceError, StorageUnavailable
from annotation.models import Image, Job, Judgment, Study, User
from annotation.modes import get_mode
from annotation.modes.base import ExportColumn, ExportSql, ExportTable, Mode
from annotation.services.exports import captions
from annotation.services.exports.common import (
    ARROW_TYPES,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_KEEP_DAYS,
    EXPORT_FORMATS,
    EXPORT_TABLES,
    FILE_SUFFIX,
    Progress,
)
from annotation.services.exports.datasheet import _datasheet, _Tally, dataset_card
from annotation.services.exports.participants import _participant_batches, participant_columns
from annotation.services.exports.query import _sql_batches
from annotation.services.exports.sinks import _SINKS, _ParquetSink
from annotation.services.jobs import job_create
from annotation.services.judges_export import judge_alignment_json, judge_batches, judge_columns
from annotation.zipnames import safe_member_names

logger = logging.getLogger(__name__)


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
    _check_options(export_format, table, study)
    if raw_ids and study.owner_id != user.pk:
        raise Forbidden(
            "Only the study's owner may export raw Prolific/MTurk ids.", field="raw_ids"
        )
    params: dict[str, Any] = {"format": export_format}
    if table != "judgments":
        params["table"] = table
    if raw_ids:
        params["raw_ids"] = True
    if images:
        params["images"] = True
    return job_create(kind=Job.Kind.EXPORT, study=study, created_by=user, params=params)


def _check_options(export_format: str, table: str, study: Study, mode: Mode | None = None) -> None:
    if export_format not in EXPORT_FORMATS:
        raise ServiceError(
            f"Unknown export format {export_format!r}; choose one of {', '.join(EXPORT_FORMATS)}."
        )
    tables = study_tables(study, mode)
    if table not in tables:  # this study has no such table (another mode's, or none): 404
        raise NotFound(
            f"Unknown table {table!r}; choose one of {', '.join(tables)}.", field="table"
        )


def study_tables(study: Study, mode: Mode | None = None) -> tuple[str, ...]:
    """The tables a study's export has: the common ones and its mode's extra tables.

    ``mode`` is the study's mode when the caller has it (an export job looks it up once);
    without it, it is looked up here. A mode registered only in the worker process (the
    worker tests' hook mode) has no extra tables here: the request is checked where the mode
    is unknown, the export runs where it is known.
    """
    if mode is None:
        try:
            mode = get_mode(study.mode)
        except KeyError:
            return EXPORT_TABLES
    return (*EXPORT_TABLES, *(t.name for t in mode.export.extra_tables()))


@dataclass(frozen=True)
class TableChoice:
    """A table the export form offers beside the judgments and participants tables."""

    name: str
    label: str


def export_table_choices(study: Study, mode: Mode) -> list[TableChoice]:
    """The further tables the study page's export form lists: the captions with their
    metric scores (every mode), then the study's ``mode``'s own extra tables."""
    return [
        TableChoice(captions.TABLE, captions.LABEL),
        *(TableChoice(t.name, t.label) for t in mode.export.extra_tables()),
    ]


def _extra_table(mode: Mode, table: str) -> ExportTable | None:
    return next((t for t in mode.export.extra_tables() if t.name == table), None)


def export_delete_old(*, days: int = DEFAULT_KEEP_DAYS, now: datetime | None = None) -> int:
    """Delete export files of jobs finished more than ``days`` ago; return files deleted.

    Job rows stay (their ``result_file`` is cleared, so the page offers no dead link);
    ``.part`` files left by killed workers are removed once they are as old.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    deleted = 0
    old_jobs = Job.objects.filter(kind=Job.Kind.EXPORT, finished_at__lt=cutoff).exclude(
        result_file=""
    )
    for job in old_jobs.only("pk", "result_file", "result"):
        names = [job.result_file]
        if isinstance(job.result, dict) and job.result.get("datasheet"):
            names.append(job.result["datasheet"])
        for name in names:
            if storage.is_plain_name(name) and storage.exists(name, alias=storage.EXPORTS):
                storage.delete(name, alias=storage.EXPORTS)
                deleted += 1
        Job.objects.filter(pk=job.pk).update(
            result_file="", message=f"File deleted after {days} days; export again."
        )
    deleted += _remove_leftovers(Job.objects.filter(kind=Job.Kind.EXPORT))
    # Parts are written only into a local export folder (an object store gets whole files).
    root = storage.local_path("", alias=storage.EXPORTS)
    if root is not None and root.is_dir():
        for part in root.glob(".*.part"):
            if datetime.fromtimestamp(part.stat().st_mtime, tz=UTC) < cutoff:
                part.unlink(missing_ok=True)
                deleted += 1
    return deleted


def _remove_leftovers(jobs) -> int:
    """Delete what failed exports among ``jobs`` stored before the object store stopped
    answering (``result["leftover"]``: the cleanup needed the store too); return files
    deleted. StorageUnavailable while it still does not answer."""
    deleted = 0
    failed = jobs.filter(status=Job.Status.FAILED, result__has_key="leftover")
    for job in failed.only("pk", "result"):
        for name in job.result.get("leftover") or []:
            if storage.is_plain_name(name) and storage.exists(name, alias=storage.EXPORTS):
                storage.delete(name, alias=storage.EXPORTS)
                deleted += 1
        kept = {key: value for key, value in job.result.items() if key != "leftover"}
        Job.objects.filter(pk=job.pk).update(result=kept)
    return deleted


# ---------------------------------------------------------------------------------------
# Running


STORE_DOWN_MESSAGE = (
    "The file store did not answer while this export was being stored, so it was stopped "
    "and nothing of it is offered for download. Export again in a minute; if it keeps "
    "failing, ask the administrator to check the object store."
)


def export_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """Run an export job into the export folder; return what ``job_finish`` stores.

    An object store that does not answer fails the job with ``STORE_DOWN_MESSAGE``; what
    the run had stored is deleted, or, the store being down, listed in the failed job's
    ``result["leftover"]`` for the study's next export (or the daily cleanup) to delete."""
    study = Study.objects.get(pk=job.study_id)
    try:
        _remove_leftovers(Job.objects.filter(kind=Job.Kind.EXPORT, study_id=study.pk))
    except StorageUnavailable as exc:
        raise storage.unavailable(STORE_DOWN_MESSAGE) from exc
    # The one lookup of the job: every step below is handed this mode.
    mode = get_mode(study.mode)
    params = job.params or {}
    export_format = params.get("format", "csv")
    table = params.get("table", "judgments")
    try:
        _check_options(export_format, table, study, mode)
    except ValueError as exc:
        raise ServiceError(str(exc)) from exc
    name = f"study-{study.pk}-export-{job.pk}"
    if export_format != "dataset" and table != "judgments":
        name += f"-{table}"
    filename = f"{name}.{FILE_SUFFIX[export_format]}"
    options = {
        "study": study,
        "export_format": export_format,
        "table": table,
        "raw_ids": bool(params.get("raw_ids")),
        "images": bool(params.get("images")),
        "progress": progress,
        "mode": mode,
    }
    root = storage.local_path("", alias=storage.EXPORTS)
    if root is not None:  # the export folder of this node: written in place, renamed whole
        root.mkdir(parents=True, exist_ok=True)
        summary = export_file(path=root / filename, **options)
    else:
        # An object store: written on this worker's scratch disk, then stored whole, the
        # datasheet first, so the data file's name appears only when both are there.
        with tempfile.TemporaryDirectory(prefix="capeval-export-") as scratch:
            try:
                summary = export_file(path=Path(scratch) / filename, **options)
            except StorageUnavailable as exc:  # a dataset's images are read from the store
                raise storage.unavailable(STORE_DOWN_MESSAGE) from exc
            _store_whole(summary, filename)
    result = {
        "format": export_format,
        "table": "+".join(study_tables(study, mode)) if export_format == "dataset" else table,
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


def _store_whole(summary: ExportSummary, filename: str) -> None:
    """Store the written export (datasheet, then data file) in the export storage; if that
    fails, delete what was stored, and name what could not be deleted (the store not
    answering) in the StorageUnavailable the job fails with."""
    names = [summary.datasheet.name] if summary.datasheet else []
    try:
        if summary.datasheet:
            storage.write_file(summary.datasheet.name, summary.datasheet, alias=storage.EXPORTS)
        storage.write_file(filename, summary.path, alias=storage.EXPORTS)
    except BaseException as exc:
        # The data file too: a store can keep an upload whose answer was lost on the way.
        names.append(filename)
        left = []
        for name in names:
            try:
                storage.delete(name, alias=storage.EXPORTS)
            except StorageUnavailable:
                left.append(name)
        if isinstance(exc, StorageUnavailable):
            raise storage.unavailable(STORE_DOWN_MESSAGE, leftover=left) from exc
        if left:
            logger.warning("export files left in the store: %s", ", ".join(left))
        raise


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
    mode: Mode | None = None,
) -> ExportSummary:
    """Write one export of ``study`` to ``path`` (and its datasheet beside it, except for
    a dataset, which holds it); the job, the API and ``manage.py export_study`` all call
    this. Nothing appears under the final names unless the whole export succeeded.
    ``mode`` is the study's mode if the caller has looked it up (else it is, once, here)."""
    if mode is None:
        mode = get_mode(study.mode)
    _check_options(export_format, table, study, mode)
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
                    study, mode, out, raw_ids=raw_ids, images=images, progress=progress
                )
            else:
                sink = _SINKS[export_format](out)
                tallies = {
                    table: _write_table(
                        study, mode, table, sink, raw_ids=raw_ids, progress=progress
                    )
                }
            _flush_to_disk(out)
        if sheet:
            datasheet = _datasheet(
                study,
                tallies,
                export_format=export_format,
                files={table: path.name},
                raw_ids=raw_ids,
                mode=mode,
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
            raise DiskFull(DISK_FULL_MESSAGE) from exc
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


def table_columns(
    study: Study, table: str, *, raw_ids: bool = False, mode: Mode | None = None
) -> list[ExportColumn]:
    """The columns of one table of the study's export, in file order (``mode``: the
    study's mode if the caller has it)."""
    if table == "participants":
        return participant_columns(raw_ids=raw_ids)
    if table == "judges":
        return judge_columns()
    if table == captions.TABLE:
        return captions.caption_metric_columns(study)
    if mode is None:
        mode = get_mode(study.mode)
    extra = _extra_table(mode, table)
    columns = (
        list(extra.columns()) if extra else list(mode.export.study_columns(study, raw_ids=raw_ids))
    )
    if _unlinks_raters(mode, raw_ids=raw_ids):
        columns = [
            replace(column, description=UNLINKED_PARTICIPANT)
            if column.name == "participant"
            else column
            for column in columns
        ]
    return columns


#: The participant column's description in a raw-id export of a study asking raters' vision.
UNLINKED_PARTICIPANT = (
    "Empty in this export: it holds raw Prolific/MTurk ids, and the study asks raters' "
    "vision, which a rater's rows tell (some parts are answered by one group only), so no "
    "row says who made it. Every judgment is here; an export without raw ids names each "
    "row's participant by pseudonym."
)


def _unlinks_raters(mode: Mode, *, raw_ids: bool) -> bool:
    """Whether the mode's tables leave the participant out: an export with raw crowd ids
    of a study whose mode asks raters' vision (``Mode.asks_vision``). Its items are served
    by group and some parts answered only by sighted raters, so a rater's rows tell their
    vision, and the participants table beside them maps each pseudonym to a worker id."""
    return raw_ids and mode.asks_vision


def _without_participant(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches with their ``participant`` column emptied (nulls), every row kept."""
    for batch in batches:
        at = batch.schema.get_field_index("participant")
        if at < 0:
            yield batch
            continue
        columns = list(batch.columns)
        columns[at] = pa.nulls(batch.num_rows, batch.schema.field(at).type)
        yield pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _write_table(
    study: Study, mode: Mode, table: str, sink, *, raw_ids: bool, progress: Progress
) -> _Tally:
    columns = table_columns(study, table, raw_ids=raw_ids, mode=mode)
    schema = _schema(columns)
    tally = _Tally(columns)
    sink.open(schema)
    if table in ("participants", "judges", captions.TABLE):
        batches = {
            "participants": lambda: _participant_batches(study, schema, raw_ids=raw_ids),
            "judges": lambda: judge_batches(study, schema),
            captions.TABLE: lambda: captions.caption_metric_batches(study, schema),
        }[table]()
        for batch in batches:
            tally.observe(batch)
            sink.write(batch)
        sink.close()
        tally.close()
        return tally
    total = Judgment.objects.filter(study_id=study.pk).count()
    progress(0, f"Exporting {total:,} judgments")
    extra = _extra_table(mode, table)
    vendor = ExportSql(connection.vendor)
    if extra:
        sql, params = extra.query(study, vendor)
    else:
        sql, params = mode.export.study_query(study, vendor, raw_ids=raw_ids)
    shown = 0
    with _sql_batches(sql, params, schema) as batches:
        if _unlinks_raters(mode, raw_ids=raw_ids):
            batches = _without_participant(batches)
        for batch in _slowed_for_tests(batches):
            tally.observe(batch)
            sink.write(batch)
            percent = min(99, tally.judgments * 100 // max(total, 1))
            if percent >= shown + PROGRESS_STEP:
                shown = percent
                progress(percent, f"Exported {tally.judgments:,} of {total:,} judgments")
    sink.close()
    tally.close()
    return tally


# Percentage points between two progress writes. Each write is a commit PostgreSQL flushes
# to disk (3-4 ms on a quiet machine, tens under load): one per percent cost a 1M-row export
# 0.4 s; the job's heartbeat, not the progress, shows that it is alive.
PROGRESS_STEP = 5


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


def _write_dataset(
    study: Study, mode: Mode, out: BinaryIO, *, raw_ids: bool, images: bool, progress: Progress
) -> tuple[dict[str, _Tally], dict[str, Any]]:
    """The dataset folder as a zip: Parquet tables, README card, datasheet, images."""
    files = {table: f"data/{table}.parquet" for table in study_tables(study, mode)}
    tallies: dict[str, _Tally] = {}
    # Parquet is compressed already; storing keeps the zip as fast as the files.
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for table in files:
            with archive.open(files[table], "w", force_zip64=True) as out:
                tallies[table] = _write_table(
                    study, mode, table, _ParquetSink(out), raw_ids=raw_ids, progress=progress
                )
        image_names: list[str] = []
        renamed: dict[str, str] = {}
        if images:
            image_names, renamed = _add_images(study, archive)
        datasheet = _datasheet(
            study, tallies, export_format="dataset", files=files, raw_ids=raw_ids, mode=mode
        )
        if image_names:
            datasheet["images_folder"] = {
                "folder": "images/",
                "files": len(image_names),
                "note": IMAGES_NOTE,
                "renamed": renamed,
            }
        alignment = judge_alignment_json(study, mode)
        if alignment is not None:
            archive.writestr("judge_alignment.json", alignment)
            datasheet["judge_alignment"] = "judge_alignment.json: docs/judges.md"
        archive.writestr("datasheet.json", json.dumps(datasheet, indent=2, ensure_ascii=False))
        archive.writestr("README.md", dataset_card(datasheet))
    return tallies, datasheet


#: What the datasheet says of ``images/`` (docs/protocol-choices.md, "Dataset images").
IMAGES_NOTE = (
    "The imported image files, byte for byte (the SHA-256 the platform computed at import "
    "is each file's), named like the image; names unsafe on some operating system are "
    "changed as listed in renamed (the tables keep the original name). The files keep "
    "whatever metadata they were uploaded with (EXIF, possibly a camera's GPS position, "
    "XMP, ICC profile): strip it before publishing if it is private."
)


def _add_images(study: Study, archive: zipfile.ZipFile) -> tuple[list[str], dict[str, str]]:
    """Write the imported originals under ``images/``; return the members written and the
    names that had to change (original name -> member name, ``annotation.zipnames``).

    The originals, not the display renditions: a dataset is for others to measure, and a
    rendition is a smaller, re-encoded copy (WebP, longest side 1024 px) that would carry
    the original's name and extension with other bytes. Only a study's researchers export,
    and they may download the originals anyway (``selectors.media_file_kind``).
    """
    rows = [
        (name, original)
        for name, original in Image.objects.filter(study_id=study.pk).values_list("name", "file")
        if original and storage.exists(original)
    ]
    # The member names (not what "/" becomes) are what must unpack on Windows: reserved
    # device names, forbidden characters, trailing dots and names equal but for case.
    members = safe_member_names(name.replace("/", "_").replace("\\", "_") for name, _ in rows)
    written, renamed = [], {}
    for name, source in rows:
        member = members[name.replace("/", "_").replace("\\", "_")]
        # Streamed from the media storage (a local folder or an object store) into the zip.
        with archive.open("images/" + member, "w", force_zip64=True) as out:
            storage.copy_to(source, out)
        written.append("images/" + member)
        if member != name:
            renamed[name] = member
    return written, renamed
