"""Tests of the HUMANr report's estimators, each alone: hand-worked cases and scipy.

The report as a whole (and the published numbers) is tested in tests/rubrics/test_humanr.py;
here each estimator of rubrics/humanr/ is checked on its own, and the composed typed result
against the report's dict.
"""

import dataclasses
import itertools
import json
import statistics

import numpy as np
import pytest
import scipy.stats

from rubrics.humanr import Responses, TInterval, estimate, report, t_interval
from rubrics.humanr.baseline import PairedDifferences, paired_differences, sign_flips
from rubrics.humanr.estimators import (
    exclusions,
    image_bootstrap,
    kept_comparisons,
    summary,
    system_scores,
    worker_intervals,
)
from rubrics.humanr.reproducibility import (
    default_image_counts,
    half_splits,
    position_bias,
    ranking_robustness,
    std_by_image_count,
)
from rubrics.robustness import unpaired_reversal

# worker, group, image, system, raw, human_on_left (correct_on_left for checks), is_check
ROWS = [
    ("w1", "g1", "i1", "A", 2, True, False),  # -0.75
    ("w1", "g1", "i2", "A", 7, False, False),  # -0.5
    ("w1", "g1", "i1", "Human", 6, True, False),  # 0.25
    ("w1", "g1", "i9", "", 2, True, True),  # check passes (s = 2)
    ("w2", "g2", "i2", "A", 1, True, False),  # dropped: its group's check fails
    ("w2", "g2", "i8", "", 5, True, True),  # neutral: fails
    ("w2", "g3", "i3", "A", 9, False, False),  # -1
    ("w2", "g3", "i3", "Human", 4, False, False),  # 0.25
    ("w2", "g3", "i7", "", 8, False, True),  # check passes (s = 2)
    ("w3", "g1", "i2", "B", 6, True, False),  # 0.25
    ("w3", "g1", "i1", "Human", 5, True, False),  # 0
    ("w3", "g1", "i6", "", 3, True, True),  # check passes (s = 3)
]


def responses(rows):
    return Responses(
        worker_ids=[r[0] for r in rows],
        group_ids=[r[1] for r in rows],
        image_ids=[r[2] for r in rows],
        systems=[r[3] for r in rows],
        raw=[r[4] for r in rows],
        human_on_left=[r[5] for r in rows],
        is_attention_check=[r[6] for r in rows],
    )


def simulated(seed, n_workers=8, n_images=30, systems=("Human", "A", "B")):
    rng = np.random.default_rng(seed)
    rows = []
    for w in range(n_workers):
        for g in range(3):
            for _ in range(6):
                system = systems[int(rng.integers(len(systems)))]
                image = f"i{int(rng.integers(n_images))}"
                raw = int(rng.integers(1, 10))
                rows.append((f"w{w}", g, image, system, raw, bool(rng.random() < 0.5), False))
            rows.append((f"w{w}", g, "c", "", int(rng.choice([1, 2, 3, 7])), True, True))
    return responses(rows)


def kept_of(rows):
    r = responses(rows)
    return kept_comparisons(r, exclusions(r))


# ---------------------------------------------------------------------------
# Generic estimators
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_t_interval_matches_scipy(confidence):
    values = np.random.default_rng(1).normal(0.1, 0.4, size=23)
    ti = t_interval(values, confidence)
    low, high = scipy.stats.t.interval(
        confidence, len(values) - 1, loc=values.mean(), scale=scipy.stats.sem(values)
    )
    assert isinstance(ti, TInterval)
    assert (ti.low, ti.high) == pytest.approx((low, high))
    assert ti.std == pytest.approx(statistics.stdev(values))
    assert ti.sem == pytest.approx(scipy.stats.sem(values))
    assert ti.bounds == (ti.low, ti.high)


def test_t_interval_needs_two_values_and_clips_to_humanr_range():
    assert t_interval(np.array([0.5]), 0.95) is None
    ti = t_interval(np.array([-1.0, 1.0, -1.0]), 0.95)
    assert ti.low < -1 < 1 < ti.high and ti.clipped == (-1.0, 1.0)
    inside = t_interval(np.array([0.0, 0.25, 0.5, 0.25]), 0.95)
    assert inside.clipped == inside.bounds
    with pytest.raises(dataclasses.FrozenInstanceError):
        ti.low = 0.0


def test_summary_by_hand_ignores_what_is_not_finite():
    result = summary(np.array([1.0, 2.0, np.nan, 3.0, 4.0, np.inf]))
    assert (result.n, result.mean, result.p50) == (4, 2.5, 2.5)
    assert result.std == pytest.approx(statistics.stdev([1, 2, 3, 4]))
    # numpy's linear interpolation: the 2.5th percentile of 1..4 sits at rank 0.075.
    assert result.p2_5 == pytest.approx(1.075) and result.p97_5 == pytest.approx(3.925)
    assert summary(np.array([np.nan])).as_dict() == {
        "n": 0,
        "mean": None,
        "std": None,
        "p2_5": None,
        "p50": None,
        "p97_5": None,
    }
    assert summary(np.array([0.5])).std is None


# ---------------------------------------------------------------------------
# Attention checks and kept comparisons
# ---------------------------------------------------------------------------


def test_exclusions_by_hand():
    excluded = exclusions(responses(ROWS))
    # w2's group g2 failed its check: its two rows are dropped, nothing else.
    assert excluded.dropped_by_check.tolist() == [i in (4, 5) for i in range(len(ROWS))]
    section = excluded.as_dict()
    assert (section["n_checks"], section["n_failed"]) == (4, 1)
    assert (section["n_dropped_groups"], section["n_dropped_responses"]) == (1, 2)
    assert section["n_dropped_other"] == 0
    w2 = excluded.per_worker["w2"]
    assert (w2.responses, w2.groups, w2.checks, w2.failed_checks) == (5, 2, 2, 1)
    assert (w2.dropped_groups, w2.dropped_responses) == (1, 2)
    assert section["per_worker"]["w1"] == {
        "responses": 4,
        "groups": 1,
        "checks": 1,
        "failed_checks": 0,
        "dropped_groups": 0,
        "dropped_responses": 0,
    }


def test_kept_comparisons_sum_per_image_and_worker_as_a_loop_does():
    r = simulated(2)
    kept = kept_comparisons(r, exclusions(r))
    values, dropped = r.values(), exclusions(r).dropped
    for j, name in enumerate(kept.systems):
        for i, image in enumerate(sorted(set(r.image_ids[~r.is_attention_check & ~dropped]))):
            rows = (r.image_ids == image) & (r.systems == name)
            rows &= ~r.is_attention_check & ~dropped
            assert kept.image_sums[i, j] == pytest.approx(values[rows].sum())
            assert kept.image_counts[i, j] == rows.sum()
    assert kept.systems == ("A", "B", "Human")
    assert kept.n_comparisons.sum() == (~r.is_attention_check).sum()


def test_kept_comparisons_refuse_checks_only():
    with pytest.raises(ValueError, match="no comparisons"):
        kept_of([("w1", "g1", "i1", "", 2, True, True)])


def test_system_scores_and_worker_intervals_by_hand():
    kept = kept_of(ROWS)
    boot = image_bootstrap(kept, None, 50, 0.95, np.random.default_rng(0))
    scores = dict(zip(kept.systems, system_scores(kept, boot, 0.95), strict=True))
    # A keeps -0.75, -0.5 (w1) and -1 (w2); B keeps one value, so no t-interval.
    assert scores["A"].humanr == pytest.approx(-0.75) and scores["A"].n_comparisons == 4
    assert scores["A"].n_kept == 3 and scores["A"].n_images == 3
    assert scores["B"].humanr == 0.25 and scores["B"].t_interval is None
    assert scores["B"].as_dict()["std"] is None
    workers = dict(zip(kept.systems, worker_intervals(kept, 0.95), strict=True))
    # One vote per worker for A: w1's mean -0.625 and w2's -1.
    votes = np.array([-0.625, -1.0])
    low, high = scipy.stats.t.interval(0.95, 1, loc=votes.mean(), scale=scipy.stats.sem(votes))
    assert workers["A"].n_workers == 2 and workers["A"].worker_mean == pytest.approx(-0.8125)
    assert workers["A"].worker_t_interval == pytest.approx((max(-1.0, low), min(1.0, high)))
    assert workers["B"].worker_t_interval is None and workers["B"].n_workers == 1


# ---------------------------------------------------------------------------
# Against the baseline
# ---------------------------------------------------------------------------


def test_paired_differences_by_hand():
    values = np.array([[0.25, -0.5, np.nan], [np.nan, 0.0, 0.5], [0.0, 0.5, 0.75]])
    pairs = paired_differences(values, ["A", "Human", "B"], "Human")
    assert pairs.systems == ("A", "B")
    assert pairs.paired.tolist() == [[True, False], [False, True], [True, True]]
    assert pairs.differences.tolist() == [[0.75, 0.0], [0.0, 0.5], [-0.5, 0.25]]
    with pytest.raises(ValueError, match="baseline"):
        paired_differences(values, ["A", "B", "C"], "Human")


def test_sign_flips_count_every_flip_as_brute_force_does():
    diffs = np.array([[0.5, -0.25], [0.25, 0.0], [-0.75, 0.5], [0.25, 0.25]])
    paired = np.array([[True, True], [True, False], [True, True], [True, True]])
    flips = sign_flips(PairedDifferences(("A", "B"), diffs, paired), 100, None)
    assert flips.exact and flips.n_flips == 16
    for k in range(2):
        observed = abs(diffs[:, k].sum())
        brute = sum(
            abs(sum(s * d for s, d in zip(signs, diffs[:, k], strict=True))) >= observed - 1e-12
            for signs in itertools.product([1, -1], repeat=4)
        )
        assert flips.extreme[k] == brute


def test_sign_flips_draw_at_random_beyond_the_budget():
    diffs = np.random.default_rng(3).normal(0.2, 0.5, size=(12, 1))
    pairs = PairedDifferences(("A",), diffs, np.ones_like(diffs, dtype=bool))
    flips = sign_flips(pairs, 500, np.random.default_rng(0))
    assert not flips.exact and flips.n_flips == 500 and 0 <= flips.extreme[0] <= 500


# ---------------------------------------------------------------------------
# Reproducibility, ranking and position bias
# ---------------------------------------------------------------------------


def test_default_image_counts_by_hand():
    assert default_image_counts(10) == []
    assert default_image_counts(11) == [10]
    assert default_image_counts(120) == [10, 20, 50, 100]


def test_half_splits_halves_of_the_workers():
    r = simulated(4, n_workers=5)
    kept = kept_comparisons(r, exclusions(r))
    splits = half_splits(kept, 30, np.random.default_rng(0), include_distributions=True)
    assert (splits.n_splits, splits.n_workers, splits.half_a_size) == (30, 5, 2)
    a = splits.systems[0]
    assert len(a.half_a) == len(a.half_b) == 30
    assert a.difference.n + a.n_undefined_splits == 30
    assert set(a.as_dict()) == {"halves", "difference", "n_undefined_splits", "half_a", "half_b"}
    assert set(a.as_dict(distributions=False)) == {"halves", "difference", "n_undefined_splits"}
    one = kept_of([r for r in ROWS if r[0] == "w1"])
    assert half_splits(one, 30, np.random.default_rng(0)) is None


def test_std_by_image_count_uses_every_image_at_the_full_count():
    r = simulated(5)
    kept = kept_comparisons(r, exclusions(r))
    points = std_by_image_count(kept, [kept.n_images], 20, np.random.default_rng(0))
    # Every draw of all the images gives the same HUMANr: no spread at all.
    assert points[0].n_images == kept.n_images
    assert all(std == pytest.approx(0.0, abs=1e-12) for std in points[0].std.values())
    with pytest.raises(ValueError, match="image_counts"):
        std_by_image_count(kept, [kept.n_images + 1], 20, np.random.default_rng(0))


def test_position_bias_matches_scipy():
    kept = kept_of(ROWS)
    bias = position_bias(kept, 0.95)
    raws = np.array([2, 7, 6, 9, 4, 6, 5], dtype=float)  # the kept comparisons' answers
    low, high = scipy.stats.t.interval(0.95, 6, loc=raws.mean(), scale=scipy.stats.sem(raws))
    assert bias.n == 7 and bias.mean_raw == pytest.approx(raws.mean())
    assert bias.t_interval == pytest.approx((low, high))


def test_ranking_robustness_is_the_unpaired_reversal_of_adjacent_systems():
    kept = kept_of(ROWS)
    (pair,) = ranking_robustness(kept, ["B", "A"])
    expected = unpaired_reversal([0.25], [-0.75, -0.5, -1.0])
    assert (pair.upper, pair.lower, pair.reversal) == ("B", "A", expected)
    assert pair.as_dict() == {"upper": "B", "lower": "A", **expected.as_dict()}


# ---------------------------------------------------------------------------
# The composed result
# ---------------------------------------------------------------------------


def test_estimate_as_dict_is_the_report():
    r = simulated(6)
    settings = dict(n_bootstrap=50, n_splits=20, n_permutations=200, seed=9)
    result = estimate(r, include_distributions=True, **settings)
    as_dict = result.as_dict()
    assert json.dumps(as_dict) == json.dumps(report(r, include_distributions=True, **settings))
    assert result.baseline is not None and "Human" not in result.systems
    assert list(result.systems) == list(as_dict["systems"])
    humanrs = [entry.humanr for entry in result.systems.values()]
    assert humanrs == sorted(humanrs, reverse=True)
    trimmed = result.as_dict(distributions=False)
    assert "half_a" not in trimmed["systems"]["A"]["half_splits"]
    assert "half_a" in as_dict["systems"]["A"]["half_splits"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.n_kept = 0
