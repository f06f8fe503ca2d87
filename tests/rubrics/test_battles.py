"""Battle-log readers (rubrics/battles.py): LMArena JSON Lines and ImageInWords SxS files."""

import json
from collections import Counter

import pytest

from rubrics import battles

IIW_FILES = {"DCI_Test": 112, "DOCCI_Test": 100}


def test_lmarena_lines_are_read_with_optional_fields():
    lines = [
        json.dumps({"model_a": "x", "model_b": "y", "winner": "tie (bothbad)", "judge": "w1"}),
        "",
        json.dumps(
            {
                "model_a": "y",
                "model_b": "z",
                "winner": "model_b",
                "image": "im.jpg",
                "caption_a": "a cat",
            }
        ),
    ]
    out = battles.read_battles_jsonl(lines)
    assert [(b.line, b.model_a, b.model_b, b.winner) for b in out] == [
        (1, "x", "y", "tie (bothbad)"),
        (3, "y", "z", "model_b"),
    ]
    assert out[0].judge == "w1" and out[0].image is None
    assert out[1].image == "im.jpg" and out[1].caption_a == "a cat" and out[1].caption_b is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ('{"model_a": "x", "winner": "tie"}', "line 2: field 'model_b' is missing"),
        ('{"model_a": "x", "model_b": "y", "winner": "A"}', "line 2: field 'winner' is 'A'"),
        ('{"model_a": "x", "model_b": "x", "winner": "tie"}', "line 2: model_a and model_b"),
        ('{"model_a": "x", "model_b": "y", "winner": "tie", "judge": 3}', "line 2: field 'judge'"),
        ('{"model_a": "", "model_b": "y", "winner": "tie"}', "line 2: field 'model_a'"),
    ],
)
def test_bad_lmarena_lines_are_refused_with_their_line_number(line, message):
    good = json.dumps({"model_a": "x", "model_b": "y", "winner": "model_a"})
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        battles.read_battles_jsonl([good, line])


def test_an_empty_file_is_refused():
    with pytest.raises(ValueError, match="no battles"):
        battles.read_battles_jsonl(["", "  "])


def _row(label="IIW is marginally better"):
    row = {"IIW": "text", "ex_id": "1", "image": "a.jpg"}
    row.update({f"metrics/{c}": "Neutral" for c in battles.CRITERIA})
    row["metrics/Specificity"] = label
    return json.dumps(row)


def test_iiw_labels_are_coded_from_the_iiw_side():
    (cmp,) = battles.read_iiw_sxs([_row("DCI is substantially better")], "DCI_Test")
    assert cmp.labels["Specificity"] == -2 and cmp.labels["Comprehensiveness"] == 0
    assert (cmp.system_a, cmp.system_b, cmp.caption_a, cmp.caption_b) == (
        "IIW",
        "DCI",
        "text",
        None,
    )
    assert any("DCI description" in m for m in cmp.missing)
    assert any("image" in m for m in cmp.missing)


def test_bad_iiw_lines_are_refused_with_their_line_number():
    with pytest.raises(ValueError, match=r"line 2: field 'metrics/Specificity': label 'DOCCI is"):
        battles.read_iiw_sxs([_row(), _row("DOCCI is marginally better")], "DCI_Test")
    row = json.loads(_row())
    del row["metrics/Hallucination"]
    with pytest.raises(ValueError, match="line 1: field 'metrics/Hallucination' is missing"):
        battles.read_iiw_sxs([json.dumps(row)], "DCI_Test")
    with pytest.raises(ValueError, match="unknown ImageInWords file"):
        battles.read_iiw_sxs([_row()], "other")


def _independent_counts(path, column=None):
    counts = {}
    n = 0
    with path.open() as handle:
        for raw in handle:
            row = json.loads(raw)
            metrics = row if column is None else row.get(column)
            if metrics is None:
                continue
            n += 1
            for key, value in metrics.items():
                if key.startswith("metrics/"):
                    counts.setdefault(key[len("metrics/") :], Counter())[value] += 1
    return n, counts


def _reader_counts(comparisons):
    counts = {}
    for cmp in comparisons:
        for criterion, label in cmp.raw_labels.items():
            counts.setdefault(criterion, Counter())[label] += 1
    return counts


@pytest.mark.parametrize("source", sorted(IIW_FILES))
def test_iiw_top_level_files_match_an_independent_count(shared_datasets, source):
    path = shared_datasets / "imageinwords" / f"{source}.jsonl"
    comparisons = battles.read_iiw_sxs(path.read_text().splitlines(), source)
    n, expected = _independent_counts(path)
    assert len(comparisons) == n == IIW_FILES[source]
    assert _reader_counts(comparisons) == expected
    # The codes agree with the labels: sum of codes per criterion from the raw counts.
    for criterion, counter in expected.items():
        by_code = Counter()
        for label, c in counter.items():
            sign = 0 if label == "Neutral" else (1 if label.startswith("IIW ") else -1)
            by_code[sign * (2 if "substantially" in label else 1)] += c
        assert Counter(cmp.labels[criterion] for cmp in comparisons) == by_code


def test_dci_comprehensiveness_counts_are_the_published_ones(shared_datasets):
    path = shared_datasets / "imageinwords" / "DCI_Test.jsonl"
    comparisons = battles.read_iiw_sxs(path.read_text().splitlines(), "DCI_Test")
    counts = Counter(c.raw_labels["Comprehensiveness"] for c in comparisons)
    assert counts == {
        "DCI is substantially better": 3,
        "DCI is marginally better": 8,
        "Neutral": 21,
        "IIW is marginally better": 34,
        "IIW is substantially better": 46,
    }
    assert all(c.caption_b is None and c.caption_a for c in comparisons)


def test_iiw_400_gives_both_sxs_columns_of_100(shared_datasets):
    path = shared_datasets / "imageinwords" / "IIW-400.jsonl"
    comparisons = battles.read_iiw_sxs(path.read_text().splitlines(), "IIW-400")
    for column, opponent in (
        ("iiw-human-sxs-gpt4v", "GPT-4V"),
        ("iiw-human-sxs-iiw-p5b", "IIW-P5B"),
    ):
        mine = [c for c in comparisons if c.system_b == opponent]
        n, expected = _independent_counts(path, column)
        assert len(mine) == n == 100
        assert _reader_counts(mine) == expected
    gpt = [c for c in comparisons if c.system_b == "GPT-4V"]
    p5b = [c for c in comparisons if c.system_b == "IIW-P5B"]
    assert all(c.caption_b is None for c in gpt) and all(c.caption_b for c in p5b)


def test_iiw_wins_dci_comprehensiveness_with_an_interval(shared_datasets):
    from rubrics.arena_criteria import criterion_preference

    path = shared_datasets / "imageinwords" / "DCI_Test.jsonl"
    comparisons = battles.read_iiw_sxs(path.read_text().splitlines(), "DCI_Test")
    values = [c.labels["Comprehensiveness"] for c in comparisons]
    summary = criterion_preference(values, seed=1)
    # By hand from the counts: (-2*3 - 8 + 0*21 + 34 + 2*46) / 112 = 112 / 112.
    assert summary["mean"] == 1.0
    assert summary["a_better"] == pytest.approx(80 / 112)
    assert summary["b_better"] == pytest.approx(11 / 112)
    # The bootstrap interval is close to the normal one (mean +- 1.96 sd / sqrt(n)).
    sd = (sum((v - 1.0) ** 2 for v in values) / 111) ** 0.5
    half = 1.96 * sd / 112**0.5
    assert summary["low"] == pytest.approx(1.0 - half, abs=0.04)
    assert summary["high"] == pytest.approx(1.0 + half, abs=0.04)
    assert summary["low"] > 0  # IIW wins comprehensiveness
