"""rubrics.spans on hand-worked cases: validation, MQM weights, ESA, agreement, alpha."""

import math

import numpy as np
import pytest

from rubrics import resampling
from rubrics.spans import (
    DEFAULT_CATEGORIES,
    FREITAG_2021,
    MQMWeights,
    code_point_offset,
    count_spans,
    esa_system_scores,
    mqm_system_scores,
    validate_judgment,
)
from rubrics.spans_agreement import score_alpha, span_agreement, span_agreement_between

TEXT = "A brown dog 🐶 sits on two red chairs."


def mark(start, end, severity="minor", category="object", **extra):
    return {"start": start, "end": end, "severity": severity, "category": category, **extra}


# ---------------------------------------------------------------------------
# Validation: clean input
# ---------------------------------------------------------------------------


def test_offsets_are_code_points_and_the_span_text_is_stored():
    dog = TEXT.index("dog 🐶")
    chairs = TEXT.index("two")
    judgment = validate_judgment(
        TEXT,
        [mark(chairs, chairs + 3, "major", "count"), mark(dog, dog + 5, category="Object")],
        score=62,
    )
    # sorted by position; the emoji is one character, so "dog 🐶" is five
    assert [s.text for s in judgment.spans] == ["dog 🐶", "two"]
    assert judgment.spans[0].category == "object"  # the study's spelling
    assert judgment.spans[1].severity == "major"
    assert judgment.score == 62.0
    assert judgment.counts() == {"minor": 1, "major": 1}


def test_omission_and_unusable_marks():
    judgment = validate_judgment(
        TEXT,
        [{"omission": True, "severity": "major", "category": "object", "note": "the cat"}],
        score=40,
    )
    assert judgment.spans[0].omission and judgment.spans[0].note == "the cat"
    unusable = validate_judgment(TEXT, [], score=0, unusable=True)
    assert unusable.unusable and unusable.spans == ()


def test_overlap_is_accepted_when_the_study_allows_it():
    judgment = validate_judgment(TEXT, [mark(0, 7), mark(2, 11)], score=50, allow_overlap=True)
    assert [(s.start, s.end) for s in judgment.spans] == [(0, 7), (2, 11)]


def test_touching_spans_do_not_overlap():
    validate_judgment(TEXT, [mark(0, 7), mark(7, 11)], score=50)


# ---------------------------------------------------------------------------
# Validation: every bad kind refused, with the field named
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spans", "kwargs", "message"),
    [
        ([mark(-1, 3)], {}, r"spans\[0\]\.start -1 is outside"),
        ([mark(3, len(TEXT) + 1)], {}, r"spans\[0\]\.end \d+ is outside"),
        ([mark(len(TEXT) + 2, len(TEXT) + 5)], {}, r"spans\[0\]\.start \d+ is outside"),
        ([mark(8, 3)], {}, r"spans\[0\]\.end must be greater than start"),
        ([mark(3, 3)], {}, r"spans\[0\]\.end must be greater than start"),
        ([mark(0, 7), mark(5, 11)], {}, r"0\.\.7 and 5\.\.11 overlap"),
        ([mark(0, 3, category="colour")], {}, r"spans\[0\]\.category must be one of"),
        ([mark(0, 3, severity="critical")], {}, r"spans\[0\]\.severity must be one of"),
        ([mark(0, 3, note="bad \ud83d")], {}, r"spans\[0\]\.note contains a lone surrogate"),
        ([mark(True, 3)], {}, r"spans\[0\]\.start must be a whole number"),
        ([mark(0, 3.0)], {}, r"spans\[0\]\.end must be a whole number"),
        ([mark(i, i + 1) for i in range(6)], {}, r"6 marks, at most 5"),
        ([mark(i, i + 1) for i in range(3)], {"max_spans": 2}, r"3 marks, at most 2"),
        (
            [{"omission": True, "severity": "major", "category": "object"}],
            {},
            r"needs a short note",
        ),
        (
            [
                {
                    "omission": True,
                    "start": 0,
                    "end": 2,
                    "severity": "major",
                    "category": "object",
                    "note": "x",
                }
            ],
            {},
            r"an omission has no start or end",
        ),
        ([mark(0, 3)], {"unusable": True}, r"unusable: the whole text is marked unusable"),
        ([], {"score": 101}, r"score must be a number from 0 to 100"),
        ([], {"score": -0.5}, r"score must be a number from 0 to 100"),
        ([], {"score": math.nan}, r"score must be a number from 0 to 100"),
        ([], {"score": True}, r"score must be a number from 0 to 100"),
        ([], {"score": "90"}, r"score must be a number from 0 to 100"),
        ([], {"score": None}, r"score must be a number from 0 to 100"),
    ],
)
def test_bad_marks_are_refused(spans, kwargs, message):
    kwargs = {"score": 50, **kwargs}
    with pytest.raises(ValueError, match=message):
        validate_judgment(TEXT, spans, **kwargs)


def test_the_pages_span_text_must_match_the_offsets():
    dog = TEXT.index("dog")
    judgment = validate_judgment(TEXT, [mark(dog, dog + 3, text="dog", note=None)], score=50)
    assert judgment.spans[0].text == "dog" and judgment.spans[0].note == ""
    # offsets counted in UTF-16 units land one character late after the emoji
    sits = TEXT.index("sits")
    with pytest.raises(ValueError, match=r"spans\[0\]\.text 'sits' is not the text at"):
        validate_judgment(TEXT, [mark(sits + 1, sits + 5, text="sits")], score=50)


def test_unknown_fields_are_refused():
    with pytest.raises(ValueError, match=r"spans\[0\]: unknown field\(s\) severty"):
        validate_judgment(TEXT, [{**mark(0, 1), "severty": "major"}], score=50)


def test_a_text_with_a_surrogate_half_is_refused():
    with pytest.raises(ValueError, match="text contains a lone surrogate"):
        validate_judgment("a dog \udc36", [mark(0, 1)], score=10)


def test_categories_none_accepts_any_and_stores_none():
    judgment = validate_judgment(TEXT, [mark(0, 1, category="whatever")], score=5, categories=None)
    assert judgment.spans[0].category == ""


def test_default_categories_are_the_issues_list():
    assert DEFAULT_CATEGORIES == (
        "object",
        "attribute",
        "count",
        "spatial relation",
        "action",
        "text in the image",
        "hallucinated existence",
        "other",
    )


def test_utf16_offsets_convert_and_refuse_a_split_pair():
    text = "dog 🐶 sits"
    # JavaScript: "dog " = 4 units, the emoji 2 units, so " sits" starts at unit 6
    assert code_point_offset(text, 4) == 4
    assert code_point_offset(text, 6) == 5
    assert code_point_offset(text, len(text.encode("utf-16-le")) // 2) == len(text)
    with pytest.raises(ValueError, match="inside a surrogate pair"):
        code_point_offset(text, 5)
    with pytest.raises(ValueError, match="outside the text"):
        code_point_offset(text, 99)


# ---------------------------------------------------------------------------
# MQM weighting, worked by hand
# ---------------------------------------------------------------------------


def test_freitag_weights():
    assert FREITAG_2021.weight("Accuracy/Mistranslation", "Major") == 5
    assert FREITAG_2021.weight("Style/Awkward", "Minor") == 1
    assert FREITAG_2021.weight("Fluency/Punctuation", "Minor") == 0.1
    assert FREITAG_2021.weight("Fluency/Punctuation", "Major") == 5
    assert FREITAG_2021.weight("Non-translation", "Major") == 25
    assert FREITAG_2021.weight("Non-translation", "Minor") == 25
    assert FREITAG_2021.weight("No-error", "No-error") == 0
    assert FREITAG_2021.weight("Other", "Neutral") == 0
    assert FREITAG_2021.weight("Other", "Major") == 5
    with pytest.raises(ValueError, match="severity 'Critical' has no weight"):
        FREITAG_2021.weight("Accuracy/Mistranslation", "Critical")
    assert MQMWeights(critical=10).weight("x", "critical") == 10
    with pytest.raises(ValueError, match="major weight must be finite"):
        MQMWeights(major=-1)


def test_mqm_system_scores_by_hand():
    rows = [
        # system, segment, rater, category, severity
        ("S", 1, "r1", "Accuracy/Mistranslation", "Major"),  # 5
        ("S", 1, "r1", "Fluency/Punctuation", "Minor"),  # 0.1
        ("S", 1, "r2", "No-error", "No-error"),  # 0: r2 saw segment 1 and found nothing
        ("S", 2, "r1", "Style/Awkward", "Minor"),  # 1
        ("S", 2, "r1", "Non-translation", "Minor"),  # 25
        ("T", 1, "r2", "Style/Awkward", "Major"),  # 5
    ]
    columns = list(zip(*rows, strict=True))
    words = {("S", 1): 10, ("S", 2): 20, ("T", 1): 8}
    scores = mqm_system_scores(*columns, words=words)
    # S: units (1, r1) = 5.1, (1, r2) = 0, (2, r1) = 26 -> mean 31.1 / 3
    assert scores["S"].mean == pytest.approx(31.1 / 3)
    assert scores["S"].n_segments == 3
    # words rated: segment 1 twice (two raters) + segment 2 = 10 + 10 + 20
    assert scores["S"].per_100_words == pytest.approx(100 * 31.1 / 40)
    assert scores["T"].mean == 5 and scores["T"].per_100_words == pytest.approx(100 * 5 / 8)
    with pytest.raises(ValueError, match="row 0: severity 'Critical'"):
        mqm_system_scores(["S"], [1], ["r"], ["x"], ["Critical"])
    with pytest.raises(ValueError, match="words has no count"):
        mqm_system_scores(*columns, words={("S", 1): 10})


# ---------------------------------------------------------------------------
# ESA
# ---------------------------------------------------------------------------


def test_esa_scores_and_the_cluster_bootstrap_by_hand():
    systems = ["A", "A", "A", "A", "B", "B"]
    items = ["i1", "i1", "i2", "i3", "i1", "i2"]
    scores = [80, 60, 100, 40, 10, 30]
    result = esa_system_scores(systems, items, scores, n_resamples=200, seed=3)
    assert result["A"].mean == pytest.approx(70) and result["A"].n == 4
    assert result["B"].mean == pytest.approx(20) and result["B"].n == 2
    # independent loop: draw items (clusters) of A, mean over their scores
    clusters = {"i1": [80, 60], "i2": [100], "i3": [40]}
    order = ["i1", "i2", "i3"]
    draws = resampling.resample_indices(3, 200, 3)
    reps = [np.mean([s for k in row for s in clusters[order[k]]]) for row in draws]
    low, high = np.percentile(reps, [2.5, 97.5])
    assert result["A"].low == pytest.approx(low)
    assert result["A"].high == pytest.approx(high)
    with pytest.raises(ValueError, match="score must be a number from 0 to 100"):
        esa_system_scores(["A"], ["i"], [120])


def test_count_spans():
    counts = count_spans(["A", "A", "B"], ["minor", "major", "minor"])
    assert counts == {"A": {"minor": 1, "major": 1}, "B": {"minor": 1}}


# ---------------------------------------------------------------------------
# Agreement, worked by hand
# ---------------------------------------------------------------------------


def test_span_agreement_two_annotators_by_hand():
    a = [(0, 4, "minor")]
    b = [(2, 6, "major"), (8, 10, "minor")]
    result = span_agreement([(10, [a, b])])
    # A marks 0-3 (4 chars), B marks 2-5 and 8-9 (6 chars); shared: 2, 3
    assert result.char_f1 == pytest.approx(2 * 2 / (4 + 6))
    assert result.char_f1_severity == 0  # the shared characters differ in severity
    # A's span overlaps B's; B's first overlaps A's, its second nothing
    assert result.matched == pytest.approx(2 / 3)
    assert result.matched_severity == 0
    assert (result.n_texts, result.n_pairs) == (1, 1)


def test_span_agreement_pools_pairs_of_three_annotators():
    first = (10, [[(0, 4, "minor")], [(2, 6, "major"), (8, 10, "minor")]])
    second = (5, [[(0, 5, "major")], [(0, 5, "major")], []])  # three annotators, one found nothing
    result = span_agreement([first, second, (7, [[(0, 7, "minor")]])])  # one annotator: skipped
    # shared chars: 2 + 5 (pair AB of the second text); marked: 10 + (10 + 5 + 5)
    assert result.char_f1 == pytest.approx(2 * 7 / 30)
    assert result.char_f1_severity == pytest.approx(2 * 5 / 30)
    # spans: 3 in the first text; 2 + 1 + 1 over the pairs of the second; hits 2 + 2
    assert result.matched == pytest.approx(4 / 7)
    assert result.matched_severity == pytest.approx(2 / 7)
    assert (result.n_texts, result.n_pairs) == (2, 4)


def test_agreement_between_two_groups_counts_only_pairs_across_them():
    """Two groups of the same texts: a pair within a group never counts."""
    same = [(0, 5, "major")]
    result = span_agreement_between([(5, [same, same], [[]]), (7, [[(0, 7, "minor")]], [])])
    # Text 1: pairs (1st, other) and (2nd, other): shared 0, marked 5 + 5; the two first-group
    # annotators agree perfectly, which must not count. Text 2 has no second group: skipped.
    assert result.char_f1 == 0 and result.matched == 0
    assert (result.n_texts, result.n_pairs) == (1, 2)
    # One annotator on each side: exactly the pair's ``span_agreement``.
    a = [(0, 4, "minor")]
    b = [(2, 6, "major"), (8, 10, "minor")]
    assert span_agreement_between([(10, [a], [b])]) == span_agreement([(10, [a, b])])
    with pytest.raises(ValueError, match="no text has two annotators"):
        span_agreement_between([(5, [a], [])])


def test_span_agreement_undefined_cases():
    with pytest.raises(ValueError, match="no text has two annotators"):
        span_agreement([(5, [[(0, 1, "minor")]])])
    with pytest.raises(ValueError, match="no annotator marked any character"):
        span_agreement([(5, [[], []])])
    with pytest.raises(ValueError, match="outside a text of length 5"):
        span_agreement([(5, [[(3, 9, "minor")], []])])


def test_score_alpha_equals_the_krippendorff_package():
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(7)
    units, raters, scores = [], [], []
    matrix = np.full((4, 30), np.nan)
    for u in range(30):
        for r in rng.choice(4, size=rng.integers(1, 5), replace=False):
            value = float(rng.integers(0, 101))
            units.append(f"u{u}")
            raters.append(f"r{r}")
            scores.append(value)
            matrix[r, u] = value
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")
    assert score_alpha(units, raters, scores) == pytest.approx(expected)
    with pytest.raises(ValueError, match="judged unit 'u' twice"):
        score_alpha(["u", "u"], ["r", "r"], [1, 2])
