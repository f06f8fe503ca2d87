"""Writers per format: CSV (formulas neutralised), JSONL and Parquet; each takes record
batches of the table's schema."""

from __future__ import annotations

import json
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from annotation.services.exports.common import (
    _LINE_SEPARATORS,
    EXPORT_POOL,
    _iso_column,
    _neutralised,
)

# ---------------------------------------------------------------------------------------
# Writers (one per format; each takes record batches of the table's schema)


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
