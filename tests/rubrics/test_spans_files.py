"""rubrics.span_files on small files: offsets recovered exactly, bad rows refused by line."""

import json

import pytest

from rubrics.span_files import latest_judgments, read_esa_csv, read_mqm_tsv, text_source

HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\tcomment\n"


def tsv(*rows, header=HEADER):
    return text_source(header + "".join("\t".join(r) + "\n" for r in rows))


def row(target, source="src", category="Accuracy/Mistranslation", severity="Major"):
    return ("sysA", "talk.1", "1", "3", "rater1", source, target, category, severity, "")


def test_mqm_offsets_are_code_points_into_the_text_without_markers():
    rows = read_mqm_tsv(tsv(row("Ein 🐶 <v>läuft</v> schnell."), row("Gut.", severity="No-error")))
    first = rows[0]
    assert first.target == "Ein 🐶 läuft schnell."
    assert (first.start, first.end, first.span_text) == (6, 11, "läuft")
    assert first.target[first.start : first.end] == "läuft"
    assert rows[0].line == 2 and rows[1].line == 3
    assert rows[1].span_in is None and rows[1].span_text == ""


def test_mqm_omission_marks_the_source():
    rows = read_mqm_tsv(
        tsv(row("Der Hund.", source="The <v>big</v> dog.", category="Accuracy/Omission"))
    )
    assert (rows[0].span_in, rows[0].span_text, rows[0].source) == ("source", "big", "The big dog.")


def test_mqm_unclosed_marker_runs_to_the_end():
    rows = read_mqm_tsv(tsv(row("Satz. <v>?")))
    assert rows[0].unclosed and rows[0].span_text == "?" and rows[0].target == "Satz. ?"


def test_mqm_nine_columns_without_comment():
    header = HEADER.replace("\tcomment", "")
    rows = read_mqm_tsv(tsv(row("a <v>b</v>")[:9], header=header))
    assert rows[0].comment == "" and rows[0].span_text == "b"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([row("<v>a</v> <v>b</v>")], r"line 2: target has 2 <v> and 2 </v> markers"),
        ([row("a </v>b<v>")], r"line 2: target closes </v> before it opens <v>"),
        ([row("ok"), row("a", severity="")], r"line 3: severity is empty"),
        ([row("<v>a</v>", source="<v>b</v>")], r"line 2: both source and target mark a span"),
        ([("a", "b")], r"line 2: 2 columns, expected 10"),
        ([], r"line 2: the file has a header but no rows"),
    ],
)
def test_mqm_bad_rows_are_refused_with_the_line(rows, message):
    with pytest.raises(ValueError, match=message):
        read_mqm_tsv(tsv(*rows))


def test_mqm_bad_header_and_empty_file():
    with pytest.raises(ValueError, match="line 1: expected the columns"):
        read_mqm_tsv(tsv(row("a"), header="a\tb\n"))
    with pytest.raises(ValueError, match="line 1: the file is empty"):
        read_mqm_tsv(text_source(""))


# ---------------------------------------------------------------------------
# ESA campaign CSV
# ---------------------------------------------------------------------------

BATCHES = [
    {
        "task": {"batchNo": 1},
        "items": [
            {
                "mqm": {"tutorial": {}, "payload": []},
                "documentID": "tut",
                "targetID": "tut",
                "itemType": "TGT",
                "sourceText": "s",
                "targetText": "The dog.",
                "itemID": 1,
            },
            {
                "mqm": [],
                "documentID": "doc#sysA",
                "targetID": "wmt.sysA",
                "itemType": "TGT",
                "sourceText": "Der Hund läuft.",
                "targetText": "The dog runs fast.",
                "itemID": 2,
            },
        ],
    },
    {
        "task": {"batchNo": 2},
        "items": [
            {
                "mqm": [],
                "documentID": "doc#sysB",
                "targetID": "wmt.sysB",
                "itemType": "TGT",
                "sourceText": "x",
                "targetText": "y",
                "itemID": 2,
            }
        ],
    },
]


def esa_line(
    spans,
    *,
    login="login1",
    system="wmt.sysA",
    index=2,
    kind="TGT",
    score="70",
    item="doc#sysA",
    end="2.0",
):
    fields = [
        login,
        system,
        str(index),
        kind,
        "eng",
        "deu",
        score,
        item,
        "False",
        json.dumps(spans),
        "1.0",
        end,
    ]
    return (
        ",".join(
            f'"{f}"' if "," in f or '"' in f else f for f in (x.replace('"', '""') for x in fields)
        )
        + "\n"
    )


def batches_file():
    return text_source(json.dumps(BATCHES))


def test_esa_inclusive_end_and_texts():
    spans = [
        {"start_i": 4, "end_i": 6, "severity": "major", "error_type": None},
        {"start_i": "missing", "end_i": "missing", "severity": "minor"},
    ]
    tutorial = esa_line([], index=1, system="tut", item="tut")
    rows = read_esa_csv(text_source(esa_line(spans) + tutorial), batches_file())
    span = rows[0].spans[0]
    assert (span.start, span.end) == (4, 7)  # end_i inclusive
    assert rows[0].text.target[span.start : span.end] == "dog"
    assert rows[0].spans[1].omission
    assert rows[0].text.batch == 1 and not rows[0].tutorial and rows[1].tutorial


def test_latest_judgment_wins():
    first = esa_line([], score="40", end="5.0")
    second = esa_line([], score="60", end="9.0")
    kept = latest_judgments(read_esa_csv(text_source(second + first)))
    assert [r.score for r in kept] == [60.0]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (esa_line([], score="101"), r"line 1: score must be a number from 0 to 100"),
        (esa_line([], score="abc"), r"line 1: score must be a number from 0 to 100"),
        (esa_line([], kind="XYZ"), r"line 1: item type must be TGT or BAD"),
        ("a,b,c\n", r"line 1: 3 columns, expected 12"),
        (
            esa_line([{"start_i": 5, "end_i": 2, "severity": "minor"}]),
            r"spans\[0\] ends \(2\) before it starts \(5\)",
        ),
        (
            esa_line([{"start_i": "missing", "end_i": 3, "severity": "minor"}]),
            r"spans\[0\] is half missing",
        ),
        (
            esa_line([{"start_i": -1, "end_i": 3, "severity": "minor"}]),
            r"spans\[0\]\.start_i must be a whole number",
        ),
        (
            esa_line([{"start_i": 1, "end_i": 3, "severity": "critical"}]),
            r"spans\[0\]\.severity 'critical'",
        ),
    ],
)
def test_esa_bad_rows_are_refused_with_the_line(line, message):
    with pytest.raises(ValueError, match=message):
        read_esa_csv(text_source(line))


def test_esa_bad_json_spans():
    line = esa_line([]).replace(",[],", ",[{,")
    with pytest.raises(ValueError, match="line 1: spans are not JSON"):
        read_esa_csv(text_source(line))


def test_esa_span_past_the_text_and_unknown_batch():
    past = esa_line([{"start_i": 10, "end_i": 18, "severity": "minor"}])
    with pytest.raises(ValueError, match=r"line 1: spans\[0\] ends at 18 \(inclusive\), outside"):
        read_esa_csv(text_source(past), batches_file())
    stranger = esa_line([], item="other#sysA")
    with pytest.raises(ValueError, match="login 'login1' matches no batch"):
        read_esa_csv(text_source(stranger), batches_file())
