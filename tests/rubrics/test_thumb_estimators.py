"""The estimators of rubrics.thumb's report, each alone: hand-worked cases and scipy.

``tests/rubrics/test_thumb.py`` checks the composed report; here each estimator's frozen
result is checked by itself, and the report's JSON against its parts.
"""

import dataclasses
import math

import numpy as np
import pytest
import scipy.stats

from rubrics.robustness import Reversal
from rubrics.thumb import CaptionJudgments, report
from rubrics.thumb.estimators import (
    Interval,
    NeighbourReversal,
    best_worst,
    caption_grid,
    metric_correlations,
    ranking_robustness,
    score_counts,
    system_means,
    system_order,
)

#   image  system   P  R  flu
ROWS = [
    ("i1", "Human", 5, 5, 0.1),
    ("i1", "A", 5, 4, 0.0),
    ("i1", "B", 3, 5, 0.0),
    ("i2", "Human", 4, 4, 0.0),
    ("i2", "A", 4, 4, 0.0),
    ("i3", "Human", 2, 3, 0.0),  # the only caption of i3
]


def judgments(rows):
    return CaptionJudgments(
        image_ids=[r[0] for r in rows],
        systems=[r[1] for r in rows],
        precision=[r[2] for r in rows],
        recall=[r[3] for r in rows],
        fluency=[r[4] for r in rows],
    )


def test_caption_grid_places_each_caption_and_refuses_a_cell_twice():
    grid = caption_grid(judgments(ROWS))
    assert grid.images.tolist() == ["i1", "i2", "i3"]
    assert grid.systems.tolist() == ["A", "B", "Human"]  # sorted: a system's index
    assert grid.present.tolist() == [[True, True, True], [True, False, True], [False, False, True]]
    table = grid.table(np.arange(6.0))  # row k's value is k
    assert table[0].tolist() == [1.0, 2.0, 0.0]
    assert table[1, 0] == 4.0 and math.isnan(table[1, 1]) and math.isnan(table[2, 0])
    with pytest.raises(ValueError, match="i2.* has several rows for system .*A"):
        caption_grid(judgments([*ROWS, ("i2", "A", 1, 1, 0.0)]))


def test_best_worst_counts_ties_and_skips_single_caption_images():
    j = judgments(ROWS)
    result = best_worst(j, caption_grid(j))
    # i1: Human (5,5) best; nobody has both minima (P 3 is B, R 4 is A). i2: Human and A
    # tie at (4,4), both best and both worst. i3 has one caption: not counted.
    assert result.n_best.tolist() == [1, 0, 2]  # A, B, Human
    assert result.n_worst.tolist() == [1, 0, 1]


def test_score_counts_by_hand_and_as_json():
    j = judgments(ROWS)
    counts = score_counts(j, j.systems == "Human")
    # Human P: 5, 4, 2; R: 5, 4, 3.
    assert counts.precision == (0, 1, 0, 1, 1) and counts.recall == (0, 0, 1, 1, 1)
    assert counts.as_dict() == {"precision": [0, 1, 0, 1, 1], "recall": [0, 0, 1, 1, 1]}
    assert score_counts(j, np.zeros(len(j), dtype=bool)).precision == (0, 0, 0, 0, 0)


def test_system_means_by_hand_with_a_missing_caption():
    j = judgments(ROWS)
    grid = caption_grid(j)
    means = system_means(j, grid, (1.0, 0.0), 50, 0.9, np.random.default_rng(0))
    assert means.n_images.tolist() == [2, 1, 3]
    # A: P (5, 4), Totals 4.5 and 4 over the two images it has (nan-aware).
    assert means.interval("precision", 0).mean == pytest.approx(4.5)
    assert means.total.tolist() == pytest.approx([4.25, 4.0, (4.9 + 4 + 2.5) / 3])
    # Weighted Total with weights (1, 0) is P minus the penalties: Human 4.9, 4, 2.
    assert means.interval("weighted_total", 2).mean == pytest.approx((4.9 + 4 + 2) / 3)
    # B has one caption: every resample that draws i1 gives the same mean, so no spread.
    assert means.interval("recall", 1) == Interval(mean=5.0, ci_low=5.0, ci_high=5.0)
    low, high = means.interval("total", 2).ci_low, means.interval("total", 2).ci_high
    assert low <= means.total[2] <= high
    assert means.percentiles == pytest.approx((5.0, 95.0))


def test_metric_correlations_match_scipy_and_refuse_bad_columns():
    rng = np.random.default_rng(4)
    rows = [(f"i{i}", s, *rng.integers(1, 6, 2).tolist(), 0.0) for i in range(20) for s in "HAB"]
    j = judgments(rows)
    metric = rng.normal(size=len(j))
    metric[3] = np.nan
    result = metric_correlations(j, {"m": metric}, human_system="H")["m"]
    machine = np.isfinite(metric) & (j.systems != "H")
    expected = scipy.stats.pearsonr(metric[machine], j.totals[machine]).statistic
    assert result.without_human.n == int(machine.sum())
    assert result.without_human.total == pytest.approx(expected, abs=1e-12)
    assert result.with_human.n == len(j) - 1
    assert list(result.as_dict()["with_human"]) == ["n", "precision", "recall", "total"]
    with pytest.raises(ValueError, match=r"metrics\['m'\]: expected 60 rows"):
        metric_correlations(j, {"m": [0.5]}, human_system="H")
    with pytest.raises(ValueError, match="numbers or NaN"):
        metric_correlations(j, {"m": ["x"] * len(j)}, human_system="H")
    with pytest.raises(ValueError, match="must map"):
        metric_correlations(j, [metric], human_system="H")


def test_ranking_robustness_by_hand():
    # Upper U has Totals 5, 3, 3 (mean 11/3); lower L has 2, 4, 4 (mean 10/3). Removing the
    # first image leaves U at 3 and L at 4: one image reverses the order. Z shares no image.
    rows = [
        ("i1", "U", 5, 5, 0.0),
        ("i1", "L", 2, 2, 0.0),
        ("i2", "U", 3, 3, 0.0),
        ("i2", "L", 4, 4, 0.0),
        ("i3", "U", 3, 3, 0.0),
        ("i3", "L", 4, 4, 0.0),
        ("i4", "Z", 1, 1, 0.0),
    ]
    j = judgments(rows)
    grid = caption_grid(j)
    means = system_means(j, grid, (0.5, 0.5), 10, 0.9, np.random.default_rng(0))
    first, second = ranking_robustness(j, grid, means.total)
    assert (first.upper, first.lower) == ("U", "L")
    assert first.reversal == Reversal(removed=1, total=3, from_upper=1)
    assert (second.upper, second.lower, second.reversal) == ("L", "Z", None)
    assert second.as_dict() == {
        "upper": "L",
        "lower": "Z",
        "removed": None,
        "total": 0,
        "share": None,
    }
    assert first.as_dict()["share"] == pytest.approx(1 / 3)


def test_system_order_puts_the_human_system_first_then_total_then_name():
    rows = [("i1", s, p, p, 0.0) for s, p in (("C", 4), ("Human", 2), ("A", 4), ("B", 5))]
    j = judgments(rows)
    grid = caption_grid(j)
    order = system_order(grid, grid.table(j.totals)[0], "Human")
    assert [grid.systems[k] for k in order] == ["Human", "B", "A", "C"]


def test_the_report_is_frozen_and_its_json_is_made_of_its_parts():
    rep = report(judgments(ROWS), n_resamples=30, seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.n_images = 0
    data = rep.as_dict()
    assert list(data) == [
        "n_images",
        "n_captions",
        "human_system",
        "robustness",
        "systems",
        "per_system",
        "histograms",
        "weights",
        "bootstrap",
        "correlations",
    ]
    assert data["systems"] == rep.systems == ["Human", "A", "B"]
    assert data["per_system"]["A"] == rep.row("A").as_dict()
    assert data["per_system"]["A"]["total"] == rep.row("A").total.as_dict()
    assert data["robustness"] == [pair.as_dict() for pair in rep.robustness]
    assert all(isinstance(pair, NeighbourReversal) for pair in rep.robustness)
    assert data["bootstrap"]["seed"] == 3 and data["correlations"] is None
    with pytest.raises(KeyError):
        rep.row("nobody")
