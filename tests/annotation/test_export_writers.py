"""Exports, byte for byte: what the CSV and JSONL writers put in a file for every column
type (nulls, negatives, quotes, line breaks, formulas, timestamps with and without
microseconds), written out by hand from the format notes in
``annotation/services/exports/__init__.py``; and the worker's COPY path with chunks of
one row each and a writer that fails midway (issue 27: the writers and the reader were
made faster; these pin what must not change); progress written every few percent."""

import io
import json
import threading
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from django.db import connection

from annotation.models import Judgment
from annotation.services import exports
from annotation.services.exports import export_file, query, table_columns
from tests.annotation.test_exports import assert_same_rows, expected_vicr, read_table, vicr_data
from tests.factories.core import skip_or_fail

COLUMNS = [
    exports.ExportColumn("id", "int", "An id."),
    exports.ExportColumn("text", "str", "A text."),
    exports.ExportColumn("score", "float", "A score."),
    exports.ExportColumn("ok", "bool", "A flag."),
    exports.ExportColumn("at", "timestamp", "A time."),
]
TIMES = [
    datetime(2025, 1, 2, 3, 4, 5, 678, tzinfo=UTC),
    datetime(2025, 1, 2, tzinfo=UTC),
    None,
    datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]
LINE_BREAKS = "a\u2028b\x85c\u2029d"


def sample() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([1, -2, None, 40]),
            pa.array(["plain", 'say "hi", then\nleave', None, "=1+1"]),
            pa.array([0.25, -3.0, None, 1e20]),
            pa.array([True, False, None, True]),
            pa.array(TIMES, exports.ARROW_TYPES["timestamp"]),
        ],
        schema=exports._schema(COLUMNS),
    )


def written(sink_class, batches) -> str:
    out = io.BytesIO()
    sink = sink_class(out)
    sink.open(exports._schema(COLUMNS))
    for batch in batches:
        sink.write(batch)
    sink.close()
    return out.getvalue().decode("utf-8")


def test_csv_bytes_of_every_column_type():
    batch = sample()
    # The second write is a slice (an offset into the buffers), as readers hand them over.
    text = written(exports._CsvSink, [batch, batch.slice(1, 2)])
    assert text == (
        '"id","text","score","ok","at"\n'
        '1,"plain",0.25,true,2025-01-02 03:04:05.000678Z\n'
        '-2,"say ""hi"", then\nleave",-3,false,2025-01-02 00:00:00.000000Z\n'
        ",,,,\n"
        '40,"\'=1+1",1e+20,true,1999-12-31 23:59:59.999999Z\n'
        '-2,"say ""hi"", then\nleave",-3,false,2025-01-02 00:00:00.000000Z\n'
        ",,,,\n"
    )


def test_csv_of_an_empty_table_is_its_header():
    assert written(exports._CsvSink, []) == '"id","text","score","ok","at"\n'


def test_jsonl_bytes_of_every_column_type():
    batch = sample()
    text = written(exports._JsonlSink, [batch, batch.slice(1, 2)])
    second = (
        '{"id": -2, "text": "say \\"hi\\", then\\nleave", "score": -3.0, "ok": false, '
        '"at": "2025-01-02T00:00:00+00:00"}\n'
    )
    empty = '{"id": null, "text": null, "score": null, "ok": null, "at": null}\n'
    assert text == (
        '{"id": 1, "text": "plain", "score": 0.25, "ok": true, '
        '"at": "2025-01-02T03:04:05.000678+00:00"}\n'
        + second
        + empty
        + '{"id": 40, "text": "=1+1", "score": 1e+20, "ok": true, '
        '"at": "1999-12-31T23:59:59.999999+00:00"}\n' + second + empty
    )


def test_jsonl_escapes_line_separators_and_keeps_other_text():
    schema = exports._schema(COLUMNS[1:2])
    batch = pa.RecordBatch.from_arrays([pa.array([LINE_BREAKS, "é \\ \t"])], schema=schema)
    out = io.BytesIO()
    sink = exports._JsonlSink(out)
    sink.open(schema)
    sink.write(batch)
    sink.close()
    assert out.getvalue().decode("utf-8") == (
        '{"text": "a\\u2028b\\u0085c\\u2029d"}\n{"text": "é \\\\ \\t"}\n'
    )


# ---------------------------------------------------------------------- the worker's COPY


@pytest.fixture
def worker_study(researcher):
    if connection.vendor != "postgresql":
        skip_or_fail("the COPY path of a worker needs PostgreSQL (set DATABASE_URL)")
    return vicr_data(researcher)


@pytest.mark.django_db(transaction=True)
def test_the_copy_in_chunks_of_one_row_gives_every_row(worker_study, tmp_path, monkeypatch):
    # A chunk ends after every row: rows with quotes and line breaks, many chunks queued.
    monkeypatch.setattr(query, "COPY_CHUNK_BYTES", 1)
    monkeypatch.setattr(query, "COPY_QUEUE_CHUNKS", 1)
    columns = table_columns(worker_study, "judgments")
    for export_format in ("csv", "parquet"):
        path = tmp_path / f"worker.{export_format}"
        export_file(study=worker_study, path=path, export_format=export_format)
        table = read_table(path, export_format, columns)
        assert_same_rows(table, expected_vicr(worker_study), columns, export_format)


@pytest.mark.django_db(transaction=True)
def test_a_writer_failing_midway_stops_the_copy(worker_study, tmp_path, monkeypatch):
    monkeypatch.setattr(query, "COPY_CHUNK_BYTES", 1)
    monkeypatch.setattr(query, "COPY_QUEUE_CHUNKS", 1)
    writes = []

    def fail_on_the_second(self, batch):
        writes.append(batch.num_rows)
        if len(writes) == 2:
            raise RuntimeError("writer broke")

    monkeypatch.setattr(exports._CsvSink, "write", fail_on_the_second)
    with pytest.raises(RuntimeError, match="writer broke"):
        export_file(study=worker_study, path=tmp_path / "x.csv", export_format="csv")
    assert writes == [1, 1]
    assert not [t for t in threading.enumerate() if t.name == "capeval-export-copy"]
    assert not list(tmp_path.iterdir())


def test_csv_of_texts_holding_the_writers_own_separators():
    # The fast path marks cells with U+001F and rows with U+001E; a text holding them is
    # written the plain way, the same bytes.
    batch = sample()
    texts = pa.array(["unit\x1fsep", "record\x1esep", None, "="])
    odd = pa.RecordBatch.from_arrays(
        [batch.column(0), texts, *batch.columns[2:]], schema=batch.schema
    )
    assert written(exports._CsvSink, [odd]) == (
        '"id","text","score","ok","at"\n'
        '1,"unit\x1fsep",0.25,true,2025-01-02 03:04:05.000678Z\n'
        '-2,"record\x1esep",-3,false,2025-01-02 00:00:00.000000Z\n'
        ",,,,\n"
        '40,"\'=",1e+20,true,1999-12-31 23:59:59.999999Z\n'
    )


# ---------------------------------------------------------------------- progress


def test_progress_is_written_every_five_percent_not_every_percent(researcher, tmp_path, settings):
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 1  # a batch per judgment: a percent or less each
    study = vicr_data(researcher, game_ratings=7, players=7)
    total = Judgment.objects.filter(study=study).count()
    assert total > 40
    calls = []
    export_file(
        study=study,
        path=tmp_path / "x.csv",
        export_format="csv",
        progress=lambda percent, message="": calls.append(percent),
    )
    steps = [later - earlier for earlier, later in zip(calls, calls[1:], strict=False)]
    assert calls[0] == 0 and calls[-1] >= 95
    assert steps and all(step >= 5 for step in steps), calls


# ---------------------------------------------------------------------- the datasheet's tally


def test_a_closed_tally_keeps_its_counts_and_lets_go_of_the_ids_and_names():
    columns = [
        exports.ExportColumn("caption_id", "int", "Caption.", "captions"),
        exports.ExportColumn("image", "str", "Image.", "images"),
    ]
    tally = exports._Tally(columns)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([1, 2, 2, None]), pa.array(["a.jpg", "b.jpg", "a.jpg", None])],
        schema=exports._schema(columns),
    )
    tally.observe(batch)
    tally.observe(batch.slice(1))
    tally.close()
    assert tally.counts() == {"rows": 7, "captions": 2, "images": 2}
    assert tally.ids == {} and tally.distinct == {}, "a dataset's next table starts clean"


def test_jsonl_timestamps_are_pythons_isoformat_across_the_calendar():
    when = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2038, 1, 19, 3, 14, 8, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ]
    schema = exports._schema(COLUMNS[4:])
    out = io.BytesIO()
    sink = exports._JsonlSink(out)
    sink.open(schema)
    sink.write(pa.RecordBatch.from_arrays([pa.array(when, schema.field(0).type)], schema=schema))
    sink.close()
    lines = out.getvalue().decode().splitlines()
    assert lines == [json.dumps({"at": moment.isoformat()}) for moment in when]
