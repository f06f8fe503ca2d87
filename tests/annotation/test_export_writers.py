"""Exports, byte for byte: what the CSV and JSONL writers put in a file for every column
type (nulls, negatives, quotes, line breaks, formulas, timestamps with and without
microseconds), written out by hand from the format notes in
``annotation/services/exports/__init__.py`` (issue 27: the writers are being made
faster; these pin what must not change)."""

import io
from datetime import UTC, datetime

import pyarrow as pa

from annotation.services import exports

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


def test_csv_of_texts_holding_the_writers_own_separators():
    # Control characters a text may hold (a faster writer may use them as markers).
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
