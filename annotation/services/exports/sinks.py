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
    _iso_column,
    _neutralised,
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
    # Rows become Python dicts here; slices keep that memory small.
    SLICE_ROWS = 2000

    def __init__(self, out: BinaryIO):
        self.out = out

    def open(self, schema: pa.Schema) -> None:
        self.names = schema.names
        self.times = [
            n
            for n, f in enumerate(schema)
            if pa.types.is_timestamp(f.type) and f.type.tz == ARROW_TYPES["timestamp"].tz
        ]

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
