"""Exports: a study's data as tidy tables a researcher can publish.

Tables.

- ``judgments``: the mode's own table (``mode.export.columns`` and ``mode.export.query``):
  THumB one row per caption per stage, VICR one per rating, HUMANr one per trial; typed
  columns, each described in the datasheet. A mode may add tables (``Export.extra_tables``,
  e.g. one row per marked error): a download each, and a Parquet file each in a dataset.
- ``caption_metrics``: one row per caption of the study (image, system, purpose, text) and
  one column per metric score the metric lab stored, named by implementation
  (``metric_cider_pycocoevalcap``); it joins the judgments table on ``caption_id``
  (``captions``).
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
``COPY (<the mode's query>) TO STDOUT (FORMAT csv)``, gathered into chunks of whole rows,
each parsed by pyarrow's CSV reader into one typed record batch; a worker (autocommit)
runs the COPY on a connection of its own in a thread handing chunks over a bounded queue,
so PostgreSQL and the parsing and writing overlap, and inside a caller's transaction
(tests) the COPY goes to a temporary file first on the caller's connection. On SQLite a
cursor's chunks become Arrow arrays. Writers: pyarrow's CSV writer (after vectorised
neutralisation, with zone-less timestamps whose ``Z`` numpy adds) and Parquet writer;
JSONL through ``json``. The datasheet's counts come from the written batches.

Memory (the export process stays below 200 MB on 1M rows; Django and pyarrow take about
120 MB before the first row). What it is bounded by: the COPY thread's queue
(``query.COPY_QUEUE_CHUNKS`` chunks of ``COPY_CHUNK_BYTES``), one Parquet row group
(``_ParquetSink.ROW_GROUP_ROWS``), the distinct ids and names the datasheet counts. What
made it grow before, and is avoided: pyarrow's streaming CSV reader's read-ahead (32
blocks), 1 MiB chunks, the default mimalloc pool keeping freed pages (``EXPORT_POOL``),
``np.unique`` temporaries and Python sets of ids, and ``pa.array()``, ``to_pylist()`` or
``Schema.empty_table()`` of timestamps, which import pandas when it is installed (about
50 MB), as does the first pyarrow.compute call (40-60 MB).

Files are written as hidden ``.part`` files in the export folder itself, flushed to disk
(``fsync``) and renamed with ``os.replace`` when complete (datasheet first, data file last,
then the folder is synced so the renames survive a crash); a failed run removes them, so no
partial file ever has a name the download offers. A full disk (``ENOSPC``, or a quota's
``EDQUOT``) is a ``ServiceError`` saying so, which fails the job with that reason. So is an
object store that does not answer (``StorageUnavailable``, ``STORE_DOWN_MESSAGE``): what
the run had stored is deleted, or, the store being down, left to the study's next export
(``result["leftover"]`` of the failed job).

The package by subject: ``files`` (the request, the job, ``export_file``, the dataset
folder, cleanup), ``query`` (rows as Arrow batches on PostgreSQL and SQLite),
``participants`` (that table), ``sinks`` (a writer per format), ``datasheet`` (counts,
redaction, the report summary, the dataset card) and ``common`` (what they share). Callers
import from the package.
"""

from annotation.services.exports.common import (
    ARROW_TYPES,
    EXPORT_FORMATS,
    EXPORT_TABLES,
    FORMULA_PREFIXES,
    _iso_column,
    neutralise,
)
from annotation.services.exports.datasheet import _Tally, dataset_card, public_settings
from annotation.services.exports.files import (
    DISK_FULL_MESSAGE,
    ExportColumn,
    ExportSummary,
    _schema,
    export_delete_old,
    export_file,
    export_request,
    export_run,
    export_table_choices,
    study_tables,
    table_columns,
)
from annotation.services.exports.participants import participant_columns
from annotation.services.exports.sinks import _CsvSink, _JsonlSink, _ParquetSink

__all__ = [
    "ARROW_TYPES",
    "DISK_FULL_MESSAGE",
    "EXPORT_FORMATS",
    "EXPORT_TABLES",
    "FORMULA_PREFIXES",
    "ExportColumn",
    "ExportSummary",
    "_CsvSink",
    "_JsonlSink",
    "_ParquetSink",
    "_Tally",
    "_iso_column",
    "_schema",
    "dataset_card",
    "export_delete_old",
    "export_file",
    "export_request",
    "export_run",
    "export_table_choices",
    "neutralise",
    "participant_columns",
    "public_settings",
    "study_tables",
    "table_columns",
]
