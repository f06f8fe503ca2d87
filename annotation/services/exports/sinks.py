"""Writers per format: CSV (formulas neutralised), JSONL and Parquet; each takes record
batches of the table's schema."""

from __future__ import annotations

import io
import json
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from annotation.services.exports.common import (
    _LINE_SEPARATORS,
    ARROW_TYPES,
    EXPORT_POOL,
    _bits,
    _neutralised,
    _values,
)

# ---------------------------------------------------------------------------------------
# Writers (one per format; each takes record batches of the table's schema)


class _CsvSink:
    """CSV by pyarrow's writer, one batch at a time.

    Timestamps (why the batch is not handed to the writer as it is): pyarrow formats a
    ``timestamp[us, UTC]`` cell through the time zone database, about 0.8 us a cell, 65%
    of the writer's time for a VICR row; a timestamp without a zone costs a seventeenth of
    that and gives the same text without the final ``Z``. So the writer gets the batch with
    zone-less timestamps, separates cells with ``_CELL`` and rows with ``_ROW`` (control
    bytes, never in PostgreSQL's or pyarrow's own output of a number, flag or time), and
    numpy puts the commas and line ends back and a ``Z`` after every timestamp that is not
    null. A text holding a separator shows in their counts: that batch is written the plain
    way instead, so the file is the same either way.
    """

    _CELL, _ROW = 0x1F, 0x1E  # ASCII unit and record separators

    def __init__(self, out: BinaryIO):
        self.out = out

    def open(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.times = [
            n
            for n, f in enumerate(schema)
            if pa.types.is_timestamp(f.type) and f.type.tz == ARROW_TYPES["timestamp"].tz
        ]
        self.naive = pa.schema(
            [
                f.with_type(pa.timestamp(f.type.unit)) if n in self.times else f
                for n, f in enumerate(schema)
            ]
        )
        # The header as pyarrow's writer gives it (every name quoted), written here: an
        # empty table of the schema would import pandas for its timestamp column (50 MB).
        names = ('"' + name.replace('"', '""') + '"' for name in schema.names)
        self.out.write((",".join(names) + "\n").encode())

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        columns = [
            _neutralised(col) if pa.types.is_string(col.type) else col for col in batch.columns
        ]
        text = self._with_zones(columns) if self.times else None
        if text is None:
            text = self._csv(pa.RecordBatch.from_arrays(columns, schema=self.schema))
        self.out.write(text)

    def _with_zones(self, columns: list[pa.Array]) -> bytes | None:
        naive = [
            col.view(self.naive.field(n).type) if n in self.times else col
            for n, col in enumerate(columns)
        ]
        text = np.frombuffer(
            self._csv(pa.RecordBatch.from_arrays(naive, schema=self.naive), marked=True),
            dtype=np.uint8,
        )
        rows, width = len(columns[0]), len(columns)
        cells, ends = text == self._CELL, text == self._ROW
        if np.count_nonzero(cells) != rows * (width - 1) or np.count_nonzero(ends) != rows:
            return None
        separators = np.flatnonzero(cells | ends).reshape(rows, width)
        out = text.copy()
        out[separators[:, :-1]] = ord(",")
        out[separators[:, -1]] = ord("\n")
        zones = np.sort(np.concatenate([separators[_bits(columns[n], 0), n] for n in self.times]))
        return np.insert(out, zones, ord("Z")).tobytes()

    def _csv(self, batch: pa.RecordBatch, marked: bool = False) -> bytes:
        out = io.BytesIO()
        pa_csv.write_csv(
            batch, out, write_options=self._options(marked=marked), memory_pool=EXPORT_POOL
        )
        return out.getvalue()

    def _options(self, *, marked: bool = False) -> pa_csv.WriteOptions:
        return pa_csv.WriteOptions(
            include_header=False,
            quoting_style="needed",
            delimiter=chr(self._CELL) if marked else ",",
            eol=chr(self._ROW) if marked else "\n",
        )

    def close(self) -> None:
        return None


class _JsonlSink:
    """One JSON object a line, as ``json.dumps(row, ensure_ascii=False)`` writes it.

    Built column by column, not row by row (issue 27: a dict and a ``json.dumps`` call a
    row cost 17 us for VICR's 22 columns, a fifth of COPY's speed): numbers, flags and
    nulls of a column are one ``json.dumps`` of its values split at ``", "`` (no such
    value's text holds one), texts are ``json``'s own string encoder, timestamps come from
    numpy, and each line is one ``%`` of a template holding the keys.
    """

    # Each slice's values are Python objects here; slices keep that memory small.
    SLICE_ROWS = 2000

    def __init__(self, out: BinaryIO):
        self.out = out

    def open(self, schema: pa.Schema) -> None:
        self.times = [n for n, f in enumerate(schema) if pa.types.is_timestamp(f.type)]
        self.texts = [n for n, f in enumerate(schema) if pa.types.is_string(f.type)]
        keys = [json.dumps(name, ensure_ascii=False).replace("%", "%%") for name in schema.names]
        self.line = "{" + ", ".join(f"{key}: %s" for key in keys) + "}\n"

    def write(self, batch: pa.RecordBatch) -> None:
        for start in range(0, batch.num_rows, self.SLICE_ROWS):
            columns = [
                self._json(n, col)
                for n, col in enumerate(batch.slice(start, self.SLICE_ROWS).columns)
            ]
            line = self.line
            text = "".join([line % row for row in zip(*columns, strict=True)])
            # str.replace per separator, not str.translate: translate looks every
            # character up in its table, 60% of this writer's time.
            for separator, escaped in _LINE_SEPARATORS.items():
                text = text.replace(chr(separator), escaped)
            self.out.write(text.encode())

    def _json(self, n: int, column: pa.Array) -> list[str]:
        """The JSON text of every value of a column."""
        if n in self.times:
            return _iso_json(column)
        if n in self.texts:
            return [
                "null" if value is None else _json_string(value) for value in column.to_pylist()
            ]
        return json.dumps(column.to_pylist()).removeprefix("[").removesuffix("]").split(", ")

    def close(self) -> None:
        return None


_json_string = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses


def _iso_json(column: pa.Array) -> list[str]:
    """A timestamp[us] array as JSON texts of ``datetime.isoformat()`` in UTC
    (``"2025-01-02T03:04:05.000678+00:00"``, no fraction when it is zero), null for nulls.
    From the int64 values: to_pylist() of a timestamp column makes pyarrow import pandas
    (about 50 MB) when it is installed."""
    micros = _values(column, np.int64)
    texts = np.datetime_as_string(micros.astype("datetime64[us]"), unit="us").tolist()
    whole = (micros % 1_000_000 == 0).tolist()
    valid = _bits(column, 0).tolist()
    return [
        ('"' + (text[:19] if no_fraction else text) + '+00:00"') if ok else "null"
        for text, no_fraction, ok in zip(texts, whole, valid, strict=True)
    ]


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
