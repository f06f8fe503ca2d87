"""Tests of rubrics.thumb: the THumB rubric rules, validation and the per-system report."""

import json
import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa

from rubrics import resampling, thumb
from rubrics.thumb import (
    EXAMPLES,
    FLUENCY_ERRORS,
    CaptionJudgments,
    ScoreArrays,
    check_agreement,
    check_sample,
    developmental_images,
    fluency_penalty,
    normalise,
    report,
    stage_agreement,
    total,
    validate_caption_scores,
)
from rubrics.thumb.review import Kappas

# ---------------------------------------------------------------------------
# total()
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((5, 5), 5.0),  # (5 + 5) / 2 = 5
        ((3, 4), 3.5),  # (3 + 4) / 2 = 3.5
        ((1, 1), 1.0),
        ((5, 4, 0.1), 4.4),  # 4.5 - 0.1
        ((5, 5, 0.3), 4.7),  # 5 - 0.3 (float 5 - 0.3 = 4.7 after rounding)
        ((4, 3, 0.0, 0.5), 3.0),  # 3.5 - 0.5
        ((5, 5, 0.0, 0.0, 2), 3.0),  # 5 - 2 (severe inclusive-language problem)
        ((4, 4, 0.2, 0.5, 0.5), 2.8),  # 4 - (0.2 + 0.5 + 0.5) = 4 - 1.2
        ((1, 1, 4.7, 0.5, 2), -6.2),  # 1 - (4.7 + 0.5 + 2) = 1 - 7.2: the lowest possible Total
        ((4.0, 3.0, 0.1), 3.4),  # integral floats (as in the THumB 1.0 release) are accepted
        ((np.int64(2), np.float64(5), np.float64(0.4)), 3.1),  # 3.5 - 0.4
    ],
)
def test_total_hand_worked(args, expected):
    assert total(*args) == expected


# Paper Table 1, copied independently of rubrics.thumb.EXAMPLES: (id, P, R, Flu., Total).
PAPER_TABLE_1 = [
    ("1-A", 3, 4, 0, 3.5),
    ("1-B", 5, 4, 0.1, 4.4),
    ("1-C", 4, 3, 0, 3.5),
    ("2-A", 5, 3, 0, 4),
    ("2-B", 4, 4, 0, 4),
    ("2-C", 5, 5, 0.1, 4.9),
    ("3-A", 3, 4, 0, 3.5),
    ("3-B", 4, 5, 0, 4.5),
    ("3-C", 5, 5, 0, 5),
    ("4-A", 3, 5, 0, 4),
    ("4-B", 5, 5, 0, 5),
    ("4-C", 4, 5, 0, 4.5),
    ("5-A", 3, 2, 0, 2.5),
    ("5-B", 5, 3, 0, 4),
    ("5-C", 5, 5, 0.3, 4.7),
]


@pytest.mark.parametrize(("example_id", "p", "r", "flu", "paper_total"), PAPER_TABLE_1)
def test_total_reproduces_paper_table_1(example_id, p, r, flu, paper_total):
    assert total(p, r, flu) == paper_total


def test_examples_data_matches_paper_table_1():
    assert [(e.example_id, e.precision, e.recall, e.fluency, e.total) for e in EXAMPLES] == [
        (i, p, r, f, float(t)) for i, p, r, f, t in PAPER_TABLE_1
    ]
    by_id = {e.example_id: e for e in EXAMPLES}
    assert by_id["1-B"].caption == "A otter is laying on the sand next to two frisbees."
    assert by_id["2-B"].systems == ("Unified-VLP", "VinVL-base", "VinVL-large")
    assert by_id["5-C"].systems == ("Human",)
    for e in EXAMPLES:
        assert normalise(e.caption) == e.caption  # the paper prints normalised captions
        assert e.total == total(e.precision, e.recall, e.fluency)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"precision": 0, "recall": 3}, "precision"),
        ({"precision": 6, "recall": 3}, "precision"),
        ({"precision": 2.5, "recall": 3}, "precision"),
        ({"precision": -1, "recall": 3}, "precision"),
        ({"precision": True, "recall": 3}, "precision"),
        ({"precision": "3", "recall": 3}, "precision"),
        ({"precision": float("nan"), "recall": 3}, "precision"),
        ({"precision": 3, "recall": None}, "recall"),
        ({"precision": 3, "recall": 0}, "recall"),
        ({"precision": 3, "recall": 6}, "recall"),
        ({"precision": 3, "recall": 4.5}, "recall"),
        ({"precision": 3, "recall": 3, "fluency": -0.1}, "fluency"),  # deductions are positive
        ({"precision": 3, "recall": 3, "fluency": 0.15}, "fluency"),  # off the 0.1 step
        ({"precision": 3, "recall": 3, "fluency": 4.8}, "fluency"),  # above 4.7, the maximum
        ({"precision": 3, "recall": 3, "fluency": None}, "fluency"),
        ({"precision": 3, "recall": 3, "fluency": float("inf")}, "fluency"),
        ({"precision": 3, "recall": 3, "conciseness": 0.3}, "conciseness"),
        ({"precision": 3, "recall": 3, "conciseness": 1}, "conciseness"),
        ({"precision": 3, "recall": 3, "conciseness": -0.5}, "conciseness"),
        ({"precision": 3, "recall": 3, "inclusive": 1}, "inclusive"),
        ({"precision": 3, "recall": 3, "inclusive": -2}, "inclusive"),
        ({"precision": 3, "recall": 3, "inclusive": 0.2}, "inclusive"),
    ],
)
def test_total_refuses_out_of_range(kwargs, field):
    with pytest.raises(ValueError, match=field):
        total(**kwargs)


def test_total_missing_recall_is_a_type_error_or_value_error():
    with pytest.raises(TypeError):
        total(3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="recall: missing"):
        total(3, None)


@given(
    p=st.integers(1, 5),
    r=st.integers(1, 5),
    f=st.integers(0, 47),
    c=st.sampled_from([0, 0.5]),
    i=st.sampled_from([0, 0.5, 2]),
)
def test_total_formula_on_the_whole_domain(p, r, f, c, i):
    flu = f / 10
    got = total(p, r, flu, c, i)
    # Exact arithmetic in tenths: Total * 10 = 5 (P + R) - (10 flu + 10 con + 10 inc).
    assert round(got * 10) == 5 * (p + r) - (f + round(10 * c) + round(10 * i))
    assert got == round(got, 1)
    assert not math.isnan(got)


# ---------------------------------------------------------------------------
# normalise()
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a dog runs on the beach", "A dog runs on the beach."),
        ("  a dog runs on the beach  ", "A dog runs on the beach."),
        ("a dog runs on the beach .", "A dog runs on the beach."),
        ("a dog runs on the beach   .  ", "A dog runs on the beach."),
        ("A dog runs on the beach.", "A dog runs on the beach."),
        ("a st. bernard in the snow", "A st. bernard in the snow."),  # only a FINAL period
        ("tv on a table.", "Tv on a table."),  # first letter only; casing is a fluency error
        ("\ta cat\n", "A cat."),
        ("x", "X."),
        ("3 dogs", "3 dogs."),
    ],
)
def test_normalise(raw, expected):
    assert normalise(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", " . ", None, 3])
def test_normalise_refuses_empty_or_non_text(raw):
    with pytest.raises(ValueError):
        normalise(raw)


@given(st.text(alphabet="ab .,\t", min_size=1).filter(lambda s: s.strip(" .\t") != ""))
def test_normalise_is_idempotent_and_ends_with_a_period(text):
    once = normalise(text)
    assert normalise(once) == once
    assert once.endswith(".") and once == once.strip()
    assert not once[:-1].endswith(" ")


# ---------------------------------------------------------------------------
# Fluency table and penalty
# ---------------------------------------------------------------------------


def test_fluency_table_is_paper_table_6():
    fixed = {k: e.penalty for k, e in FLUENCY_ERRORS.items() if e.is_fixed}
    assert fixed == {
        "spelling": 0.1,
        "grammar": 0.1,
        "casing": 0.1,
        "hyphenation": 0.1,
        "unnatural_wording": 0.1,
        "punctuation": 0.2,
        "misleading_spelling": 0.5,
        "duplication": 0.5,
        "ambiguity": 0.5,
    }
    assert FLUENCY_ERRORS["awkward_construction"].amount_range == (0.1, 0.5, 0.1)
    assert FLUENCY_ERRORS["broken_sentence"].amount_range == (0.5, 2.0, 0.1)
    assert len(FLUENCY_ERRORS) == 11
    # 5 x 0.1 + 0.2 + 3 x 0.5 + 0.5 (awkward max) + 2.0 (broken max) = 4.7
    assert thumb.MAX_FLUENCY_PENALTY == 4.7
    for e in FLUENCY_ERRORS.values():
        assert e.label and e.example


@pytest.mark.parametrize(
    ("errors", "expected"),
    [
        ({}, 0.0),
        (None, 0.0),
        ({"grammar": None}, 0.1),  # "A otter" (paper Table 1, 1-B)
        ({"hyphenation": None}, 0.1),  # "multi colored" (2-C)
        ({"spelling": None, "grammar": None, "casing": None}, 0.3),  # 0.1 x 3, no float noise
        ({"punctuation": None, "awkward_construction": 0.3}, 0.5),  # 0.2 + 0.3
        ({"broken_sentence": 0.5}, 0.5),
        ({"broken_sentence": 2.0}, 2.0),
        ({"duplication": 0.5}, 0.5),  # a fixed type may repeat its own penalty
        ({k: (e.max_amount if not e.is_fixed else None) for k, e in FLUENCY_ERRORS.items()}, 4.7),
    ],
)
def test_fluency_penalty(errors, expected):
    assert fluency_penalty(errors) == expected


@pytest.mark.parametrize(
    ("errors", "message"),
    [
        ({"typo": None}, "unknown error type"),
        ({"awkward_construction": None}, "must pick an amount"),
        ({"awkward_construction": 0.6}, "from 0.1 to 0.5"),
        ({"awkward_construction": 0.0}, "from 0.1 to 0.5"),
        ({"awkward_construction": 0.25}, "multiple of 0.1"),
        ({"broken_sentence": 0.4}, "from 0.5 to 2.0"),
        ({"broken_sentence": 2.1}, "from 0.5 to 2.0"),
        ({"broken_sentence": 1.05}, "multiple of 0.1"),
        ({"spelling": 0.3}, "fixed penalty"),
        ({"spelling": "x"}, "must be a number"),
        ([("spelling", None)], "must map"),
    ],
)
def test_fluency_penalty_refusals(errors, message):
    with pytest.raises(ValueError, match=message):
        fluency_penalty(errors)


# ---------------------------------------------------------------------------
# validate_caption_scores() and rubric texts
# ---------------------------------------------------------------------------


def test_validate_caption_scores_clean_structure():
    s = validate_caption_scores(5, 4.0, {"grammar": None, "awkward_construction": 0.2}, 0.5, 0)
    assert (s.precision, s.recall) == (5, 4)
    assert s.fluency_errors == {"grammar": 0.1, "awkward_construction": 0.2}
    assert s.fluency == 0.3
    assert (s.conciseness, s.inclusive) == (0.5, 0.0)
    assert s.total == 3.7  # 4.5 - (0.3 + 0.5)
    assert json.loads(json.dumps(s.as_dict()))["total"] == 3.7


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((None, 3), "precision"),
        ((3, 7), "recall"),
        ((3, 3, {"nope": None}), "fluency"),
        ((3, 3, {}, 0.25), "conciseness"),
        ((3, 3, {}, 0, 1), "inclusive"),
    ],
)
def test_validate_caption_scores_names_the_field(args, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        validate_caption_scores(*args)


def test_rubric_texts():
    assert "Precision" in thumb.PRECISION_DEFINITION and "4" in thumb.PRECISION_DEFINITION
    assert "Recall" in thumb.RECALL_DEFINITION and "imagine" in thumb.RECALL_DEFINITION
    keys = [r.key for r in thumb.RULES]
    assert keys == [
        "double_penalties",
        "counts_are_attributes",
        "black_and_white",
        "implied_information",
        "imagine",
    ]
    text = " ".join(r.text for r in thumb.RULES)
    for phrase in ("hallucinated", "count", "black and white", "double-decker", "imagine"):
        assert phrase in text


# ---------------------------------------------------------------------------
# report(): a tiny hand-made image set
# ---------------------------------------------------------------------------

#   image  system   P  R  flu
TINY = [
    ("i1", "Human", 5, 5, 0.1),
    ("i1", "A", 5, 4, 0.0),
    ("i1", "B", 3, 5, 0.0),
    ("i2", "Human", 4, 4, 0.0),
    ("i2", "A", 4, 4, 0.0),
    ("i2", "B", 2, 3, 0.0),
    ("i3", "Human", 5, 4, 0.0),
    ("i3", "A", 3, 2, 0.0),
    ("i3", "B", 3, 2, 0.5),
]


def judgments(rows, **extra):
    return CaptionJudgments(
        image_ids=[r[0] for r in rows],
        systems=[r[1] for r in rows],
        precision=[r[2] for r in rows],
        recall=[r[3] for r in rows],
        fluency=[r[4] for r in rows],
        **extra,
    )


def test_report_best_worst_with_ties():
    rep = report(judgments(TINY))
    best = {row.name: row.n_best for row in rep.rows}
    worst = {row.name: row.n_worst for row in rep.rows}
    # i1: Human (5,5) >= A (5,4) and B (3,5) in both P and R -> best; nobody has both minima
    #     (min P = 3 is B, min R = 4 is A) -> no worst.
    # i2: Human and A tie at (4,4) -> both best; B (2,3) -> worst.
    # i3: Human (5,4) best; A and B tie at (3,2) -> both worst.
    assert best == {"Human": 3, "A": 1, "B": 0}
    assert worst == {"Human": 0, "A": 1, "B": 2}


def test_report_means_histograms_and_order():
    rep = report(judgments(TINY)).as_dict()
    ps = rep["per_system"]
    assert rep["systems"] == ["Human", "A", "B"]  # human first, then by mean Total
    assert ps["Human"]["precision"]["mean"] == pytest.approx(14 / 3)  # (5 + 4 + 5) / 3
    assert ps["Human"]["recall"]["mean"] == pytest.approx(13 / 3)  # (5 + 4 + 4) / 3
    assert ps["Human"]["fluency"]["mean"] == pytest.approx(0.1 / 3)
    # Human totals: 5 - 0.1, 4, 4.5 -> 13.4 / 3
    assert ps["Human"]["total"]["mean"] == pytest.approx(13.4 / 3)
    # B totals: 4, 2.5, 2.5 - 0.5 -> 8.5 / 3
    assert ps["B"]["total"]["mean"] == pytest.approx(8.5 / 3)
    assert ps["A"]["total"]["mean"] == pytest.approx((4.5 + 4 + 2.5) / 3)
    assert ps["B"]["n_images"] == 3
    h = rep["histograms"]
    # Human P: 5, 4, 5; Human R: 5, 4, 4.
    assert h["human"] == {"precision": [0, 0, 0, 1, 2], "recall": [0, 0, 0, 2, 1]}
    # Machine P: A 5, 4, 3 + B 3, 2, 3; machine R: A 4, 4, 2 + B 5, 3, 2.
    assert h["machine"] == {"precision": [0, 1, 3, 1, 1], "recall": [0, 2, 1, 2, 1]}
    assert h["per_system"]["B"]["precision"] == [0, 1, 2, 0, 0]
    json.dumps(rep, allow_nan=False)  # plain, JSON-serialisable, no NaN


def test_report_weighted_total():
    rep = report(judgments(TINY), weights=(0.2, 0.8))
    # Human: 0.2*5 + 0.8*5 - 0.1 = 4.9; 0.2*4 + 0.8*4 = 4.0; 0.2*5 + 0.8*4 = 4.2 -> 13.1 / 3
    assert rep.row("Human").weighted_total.mean == pytest.approx(13.1 / 3)
    # B: 0.2*3 + 0.8*5 = 4.6; 0.2*2 + 0.8*3 = 2.8; 0.2*3 + 0.8*2 - 0.5 = 1.7 -> 9.1 / 3
    assert rep.row("B").weighted_total.mean == pytest.approx(9.1 / 3)
    assert rep.as_dict()["weights"] == {"precision": 0.2, "recall": 0.8}
    default = report(judgments(TINY))
    for row in default.rows:
        assert row.weighted_total == row.total  # 0.5 / 0.5 reproduces Total, CI included


def random_judgments(n_images, systems, seed, missing=0.0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_images):
        for s in systems:
            if missing and s != "Human" and rng.random() < missing:
                continue
            rows.append((f"img{i}", s, int(rng.integers(1, 6)), int(rng.integers(1, 6)), 0.0))
    return rows


def test_paired_bootstrap_uses_the_same_images_for_every_system():
    rows = random_judgments(40, ["Human", "A", "B"], seed=1)
    rows += [(i, "A-copy", p, r, f) for i, s, p, r, f in rows if s == "A"]
    rep = report(judgments(rows), n_resamples=500, seed=7).as_dict()
    a, copy = rep["per_system"]["A"], rep["per_system"]["A-copy"]
    for field in ("precision", "recall", "total"):
        assert a[field] == copy[field]  # identical mean AND identical interval
        assert a[field]["ci_low"] <= a[field]["mean"] <= a[field]["ci_high"]
        assert a[field]["ci_low"] < a[field]["ci_high"]


def test_paired_bootstrap_matches_an_explicit_loop():
    rows = random_judgments(30, ["Human", "A"], seed=2)
    rep = report(judgments(rows), n_resamples=300, seed=11).as_dict()
    # Same stream convention as rubrics.resampling: resample r draws images idx[r].
    idx = resampling.resample_indices(30, 300, 11)
    images = sorted({r[0] for r in rows})
    for system in ("Human", "A"):
        p = {r[0]: r[2] for r in rows if r[1] == system}
        col = np.array([p[i] for i in images], dtype=float)
        means = [col[draw].mean() for draw in idx]
        lo, hi = np.percentile(means, [5, 95])
        assert rep["per_system"][system]["precision"]["ci_low"] == pytest.approx(lo)
        assert rep["per_system"][system]["precision"]["ci_high"] == pytest.approx(hi)


def test_report_seed_determinism():
    j = judgments(random_judgments(25, ["Human", "A", "B"], seed=3))
    r1 = report(j, n_resamples=200, seed=5)
    r2 = report(j, n_resamples=200, seed=5)
    r3 = report(j, n_resamples=200, seed=6)
    r4 = report(j, n_resamples=200, seed=np.random.default_rng(5))
    assert r1 == r2
    assert r1.as_dict() == r2.as_dict()
    assert r1.rows != r3.rows
    assert r1.rows == r4.rows  # an int seed s equals default_rng(s)
    assert (r1.bootstrap.seed, r4.bootstrap.seed) == (5, None)


def test_report_missing_system_on_an_image():
    rows = [r for r in TINY if not (r[0] == "i2" and r[1] == "B")]
    rows.append(("i4", "Human", 2, 2, 0.0))  # an image with a single caption
    rep = report(judgments(rows), n_resamples=300).as_dict()
    b = rep["per_system"]["B"]
    assert b["n_images"] == 2
    assert b["precision"]["mean"] == pytest.approx(3.0)  # (3 + 3) / 2 over i1, i3 only
    assert b["precision"]["ci_low"] <= 3.0 <= b["precision"]["ci_high"]
    h = rep["per_system"]["Human"]
    assert h["n_images"] == 4
    assert h["precision"]["mean"] == pytest.approx((5 + 4 + 5 + 2) / 4)
    # i2 now has Human (4,4) and A (4,4): both best and both worst; i4 (one caption) is skipped.
    assert h["n_best"] == 3 and h["n_worst"] == 1
    assert rep["per_system"]["A"]["n_worst"] == 2  # i2 (tie) and i3
    json.dumps(rep, allow_nan=False)


def test_report_sparse_system_never_returns_nan():
    rows = random_judgments(50, ["Human", "A"], seed=4)
    rows.append(("img0", "Rare", 3, 3, 0.0))  # present on one image out of 50
    rep = report(judgments(rows), n_resamples=200).as_dict()
    rare = rep["per_system"]["Rare"]
    assert rare["precision"] == {"mean": 3.0, "ci_low": 3.0, "ci_high": 3.0}
    json.dumps(rep, allow_nan=False)


def test_report_refusals():
    with pytest.raises(ValueError, match="several rows"):
        report(judgments(TINY + [("i1", "A", 3, 3, 0.0)]))
    with pytest.raises(ValueError, match="precision"):
        judgments([("i1", "A", 0, 3, 0.0)])
    with pytest.raises(ValueError, match="recall"):
        judgments([("i1", "A", 3, 2.5, 0.0)])
    with pytest.raises(ValueError, match="fluency"):
        judgments([("i1", "A", 3, 3, -0.1)])
    with pytest.raises(ValueError, match="conciseness"):
        judgments([("i1", "A", 3, 3, 0.0)], conciseness=[0.3])
    with pytest.raises(ValueError, match="inclusive"):
        judgments([("i1", "A", 3, 3, 0.0)], inclusive=[1])
    with pytest.raises(ValueError, match="recall"):
        CaptionJudgments.from_records(
            [{"image_id": "i1", "system": "A", "precision": 3, "recall": None}]
        )
    with pytest.raises(ValueError, match="systems"):
        judgments([("i1", "", 3, 3, 0.0)])
    with pytest.raises(ValueError, match="image_ids"):
        judgments([(None, "A", 3, 3, 0.0), ("i1", "B", 3, 3, 0.0)])
    mixed = np.array([1, "i1"], dtype=object)  # not mutually comparable
    with pytest.raises(ValueError, match="image_ids"):
        CaptionJudgments(image_ids=mixed, systems=["A", "B"], precision=[3, 3], recall=[3, 3])
    with pytest.raises(ValueError, match="no rows"):
        report(judgments([]))
    with pytest.raises(ValueError, match="weights"):
        report(judgments(TINY), weights=(-1, 1))
    with pytest.raises(ValueError, match="n_resamples"):
        report(judgments(TINY), n_resamples=0)


def test_report_pearson_with_and_without_human():
    rows = random_judgments(60, ["Human", "A", "B"], seed=8)
    j = judgments(rows)
    rng = np.random.default_rng(9)
    metric = j.precision * 0.3 + rng.normal(size=len(j))
    metric[5] = np.nan  # not scored: dropped pairwise
    rep = report(j, metrics={"clip_s": metric}, n_resamples=50).as_dict()
    corr = rep["correlations"]["clip_s"]
    ok = np.isfinite(metric)
    human = j.systems == "Human"
    totals = (j.precision + j.recall) / 2
    for label, mask in (("with_human", ok), ("without_human", ok & ~human)):
        assert corr[label]["n"] == mask.sum()
        for field, target in (("precision", j.precision), ("recall", j.recall), ("total", totals)):
            expected = scipy.stats.pearsonr(metric[mask], target[mask]).statistic
            assert corr[label][field] == pytest.approx(expected, abs=1e-12)
    assert corr["with_human"]["n"] == 179 and corr["without_human"]["n"] == 119


def test_report_pearson_undefined_is_none():
    rows = [("i1", "Human", 5, 5, 0.0), ("i1", "A", 3, 3, 0.0)]
    rep = report(judgments(rows), metrics={"m": [0.5, 0.7]}, n_resamples=20)
    # Without Human only one caption is left: r is undefined -> None, never NaN.
    assert rep.correlations["m"].without_human.precision is None
    assert rep.correlations["m"].with_human.precision == pytest.approx(-1.0)


def test_total_vectorised_matches_scalar():
    rng = np.random.default_rng(10)
    n = 200
    p, r = rng.integers(1, 6, n), rng.integers(1, 6, n)
    f = rng.integers(0, 48, n) / 10
    c = rng.choice([0, 0.5], n)
    i = rng.choice([0, 0.5, 2], n)
    arrays = ScoreArrays(precision=p, recall=r, fluency=f, conciseness=c, inclusive=i)
    expected = [total(*args) for args in zip(p, r, f, c, i, strict=True)]
    assert arrays.totals.tolist() == expected


# ---------------------------------------------------------------------------
# stage_agreement()
# ---------------------------------------------------------------------------


def test_stage_agreement_by_hand():
    s1 = ScoreArrays(
        precision=[5, 4, 3, 5], recall=[4, 4, 2, 5], fluency=[0, 0.1, 0, 0], conciseness=[0] * 4
    )
    s2 = ScoreArrays(
        precision=[5, 3, 3, 5],  # caption 2 modified
        recall=[4, 5, 3, 5],  # captions 2 and 3 modified
        fluency=[0, 0.1, 0, 0.1],  # caption 4 modified
        conciseness=[0] * 4,
    )
    out = stage_agreement(s1, s2)
    assert out.modified_share == {
        "precision": 0.25,  # 1 of 4
        "recall": 0.5,  # 2 of 4
        "fluency": 0.25,
        "conciseness": 0.0,
        "inclusive": 0.0,
        "any": 0.75,  # captions 2, 3, 4
    }
    # P: stage1 (5,4,3,5) vs stage2 (5,3,3,5): po = 3/4; marginals over {3,4,5}:
    # stage1 (1/4, 1/4, 2/4), stage2 (2/4, 0, 2/4): pe = 2/16 + 0 + 4/16 = 6/16;
    # kappa = (12/16 - 6/16) / (1 - 6/16) = 6/10.
    assert out.kappa.precision == pytest.approx(0.6)
    assert out.as_dict()["kappa"]["precision"] == out.kappa.precision


def test_stage_agreement_matches_statsmodels():
    rng = np.random.default_rng(12)
    n = 300
    p1 = rng.integers(1, 6, n)
    r1 = rng.integers(1, 6, n)
    p2 = np.where(rng.random(n) < 0.8, p1, rng.integers(1, 6, n))
    r2 = np.where(rng.random(n) < 0.7, r1, rng.integers(1, 6, n))
    out = stage_agreement(
        ScoreArrays(precision=p1, recall=r1), ScoreArrays(precision=p2, recall=r2)
    )
    for field, a, b in (("precision", p1, p2), ("recall", r1, r2)):
        table = np.zeros((5, 5))
        np.add.at(table, (a - 1, b - 1), 1)
        expected = sm_cohens_kappa(table).kappa
        assert getattr(out.kappa, field) == pytest.approx(expected, abs=1e-12)
        assert out.modified_share[field] == pytest.approx(np.mean(a != b))


def test_stage_agreement_refusals_and_undefined_kappa():
    a = ScoreArrays(precision=[5, 5], recall=[4, 4])
    with pytest.raises(ValueError, match="rows"):
        stage_agreement(a, ScoreArrays(precision=[5], recall=[4]))
    j1 = judgments([("i1", "A", 5, 4, 0.0), ("i1", "B", 5, 4, 0.0)])
    j2 = judgments([("i1", "B", 5, 4, 0.0), ("i1", "A", 5, 4, 0.0)])
    with pytest.raises(ValueError, match="aligned"):
        stage_agreement(j1, j2)
    out = stage_agreement(a, a)
    assert out.kappa == Kappas(precision=None, recall=None)  # one category only: undefined
    assert out.modified_share["any"] == 0.0


# ---------------------------------------------------------------------------
# check_agreement(), check_sample(), developmental_images()
# ---------------------------------------------------------------------------


def test_check_agreement_by_hand():
    final = ScoreArrays(
        precision=[5, 4, 3, 5, 2], recall=[4, 4, 2, 5, 1], inclusive=[0, 0, 0, 0.5, 0]
    )
    check = ScoreArrays(
        precision=[5, 4, 4, 5, 2],  # caption 3 changed
        recall=[4, 3, 2, 5, 1],  # caption 2 changed
        inclusive=[0, 0, 0, 0, 0],  # caption 4 changed
    )
    out = check_agreement(final, check)
    assert out.n_captions == 5
    assert out.unchanged == 2  # captions 1 and 5
    assert out.changed == {
        "precision": 1,
        "recall": 1,
        "fluency": 0,
        "conciseness": 0,
        "inclusive": 1,
        "any": 3,
    }
    assert out.changed_share["any"] == pytest.approx(3 / 5)
    assert out.changed_share["precision"] == pytest.approx(1 / 5)
    # P final (5, 4, 3, 5, 2) vs check (5, 4, 4, 5, 2): po = 4/5. Marginals over 2..5:
    # final (1, 1, 1, 2)/5, check (1, 0, 2, 2)/5: pe = (1 + 0 + 2 + 4)/25 = 7/25;
    # kappa = (20/25 - 7/25) / (18/25) = 13/18.
    assert out.kappa.precision == pytest.approx(13 / 18)
    assert list(out.as_dict()) == ["n_captions", "unchanged", "changed", "changed_share", "kappa"]


def test_check_agreement_of_the_paper_no_change_in_100_of_100():
    rng = np.random.default_rng(3)
    p, r = rng.integers(1, 6, 100), rng.integers(1, 6, 100)
    scores = ScoreArrays(precision=p, recall=r)
    out = check_agreement(scores, ScoreArrays(precision=p.copy(), recall=r.copy()))
    assert out.unchanged == 100 and out.changed["any"] == 0
    assert out.as_dict()["kappa"] == {"precision": pytest.approx(1.0), "recall": pytest.approx(1.0)}


def test_check_agreement_kappa_matches_statsmodels_and_refuses_bad_input():
    rng = np.random.default_rng(21)
    n = 250
    p1, r1 = rng.integers(1, 6, n), rng.integers(1, 6, n)
    p2 = np.where(rng.random(n) < 0.9, p1, rng.integers(1, 6, n))
    r2 = np.where(rng.random(n) < 0.6, r1, rng.integers(1, 6, n))
    out = check_agreement(
        ScoreArrays(precision=p1, recall=r1), ScoreArrays(precision=p2, recall=r2)
    )
    for field, a, b in (("precision", p1, p2), ("recall", r1, r2)):
        table = np.zeros((5, 5))
        np.add.at(table, (a - 1, b - 1), 1)
        assert getattr(out.kappa, field) == pytest.approx(sm_cohens_kappa(table).kappa, abs=1e-12)
        assert out.changed[field] == int(np.sum(a != b))
    assert out.changed["any"] == int(np.sum((p1 != p2) | (r1 != r2)))
    with pytest.raises(ValueError, match="check: has 1 rows"):
        check_agreement(
            ScoreArrays(precision=[5, 4], recall=[4, 4]), ScoreArrays(precision=[5], recall=[4])
        )
    with pytest.raises(ValueError, match="final: no rows"):
        check_agreement(ScoreArrays(precision=[], recall=[]), ScoreArrays(precision=[], recall=[]))
    with pytest.raises(ValueError, match="final: must be ScoreArrays"):
        check_agreement({"precision": [5]}, ScoreArrays(precision=[5], recall=[4]))


def test_check_sample_size_range_and_reproducibility():
    assert check_sample(10, 10, seed=1) == list(range(10))
    assert check_sample(4, 100, seed=1) == [0, 1, 2, 3]  # fewer captions than asked: all
    assert check_sample(10, 0, seed=1) == []
    assert check_sample(0, 100, seed=1) == []
    drawn = check_sample(2500, 100, seed=42)
    assert len(drawn) == len(set(drawn)) == 100
    assert drawn == sorted(drawn) and drawn[0] >= 0 and drawn[-1] < 2500
    assert drawn == check_sample(2500, 100, seed=42)
    assert drawn != check_sample(2500, 100, seed=43)
    assert check_sample(50, 5, seed=-7) == check_sample(50, 5, seed=-7)  # negative seeds too


def test_check_sample_is_uniform_over_captions():
    # Each of 20 captions is drawn with probability 5/20 per seed; over 4,000 seeds the
    # counts follow a chi-square goodness of fit with 19 degrees of freedom.
    counts = np.zeros(20)
    for seed in range(4000):
        counts[check_sample(20, 5, seed=seed)] += 1
    assert counts.sum() == 4000 * 5
    assert scipy.stats.chisquare(counts).pvalue > 0.001


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 5), "n_captions"),
        ((10, -1), "n_checked"),
        ((10, 2.0), "n_checked"),
        ((10, True), "n_checked"),
    ],
)
def test_check_sample_refusals(args, message):
    with pytest.raises(ValueError, match=message):
        check_sample(*args, seed=0)


def test_developmental_images_are_the_first_n_in_study_order():
    order = ["img-c", "img-a", "img-b", "img-d"]
    assert developmental_images(order, 2) == {"img-c", "img-a"}
    assert developmental_images(order, 0) == set()
    assert developmental_images(order, 50) == set(order)  # the paper's 50 of a small study
    with pytest.raises(ValueError, match="once"):
        developmental_images(["a", "b", "a"], 1)
    with pytest.raises(ValueError, match="n_developmental"):
        developmental_images(order, -1)
