"""What every part of an export shares: formats, tables, Arrow types, limits, the
neutralisation of spreadsheet formulas, and the small conversions of Arrow columns and
times."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import metadata
from typing import Any

import numpy as np
import pyarrow as pa

EXPORT_FORMATS = ("csv", "jsonl", "parquet", "dataset")
# caption_metrics: every caption with its metric scores (services/exports/captions.py).
EXPORT_TABLES = ("judgments", "participants", "judges", "caption_metrics")
FILE_SUFFIX = {"csv": "csv", "jsonl": "jsonl", "parquet": "parquet", "dataset": "zip"}
DEFAULT_CHUNK_SIZE = 50_000
# Bytes of PostgreSQL's COPY output parsed at a time (about 1,300 VICR rows; query.py),
# one record batch each. The COPY thread holds at most ``query.COPY_QUEUE_CHUNKS`` of them.
# 1 MiB chunks cost no less CPU and took 30 MB more of the 200 MB budget (the queued
# chunks and each batch's temporaries in the CSV writer; bench/export.py, VICR at 1M rows).
COPY_CHUNK_BYTES = 256 << 10
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
