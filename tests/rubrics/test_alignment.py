"""rubrics.alignment against independent code (scipy, statsmodels, krippendorff) and by hand."""

import itertools

import krippendorff
import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.inter_rater import cohens_kappa

from rubrics import alignment

# Hand-made study: 10 captions, 3 human ratings each on 1-5 (one missing), a judge's rating.
HUMAN = np.array(
    [
        [5, 4, 5],
        [4, 4, 3],
        [2, 1, 2],
        [3, 3, np.nan],
        [1, 2, 1],
        [5, 5, 4],
        [3, 2, 3],
        [4, 5, 4],
        [2, 3, 3],
        [1, 1, 2],
    ]
)
JUDGE = np.array([5, 3, 2, 4, 1, 5, 2, 4, 3, 2], dtype=float)
SCALE = range(1, 6)


def test_human_reference_mean_and_majority_by_hand():
    mean = alignment.human_reference(HUMAN, "mean")
    assert mean[0] == pytest.approx(14 / 3) and mean[3] == 3.0
    assert alignment.human_reference(HUMAN, "majority").tolist() == [5, 4, 2, 3, 1, 5, 3, 4, 3, 1]
    # A tie between modes: the one nearest the median, then the lower.
    assert alignment.human_reference([[1, 1, 4, 4, 3]], "majority").tolist() == [4]
    assert alignment.human_reference([[2, 4]], "majority").tolist() == [2]
    with pytest.raises(ValueError, match="no human rating"):
        alignment.human_reference([[1, 2], [np.nan, np.nan]])


def test_caption_level_equals_scipy_with_rows_per_rating():
    rows = ~np.isnan(HUMAN)
    judge_rows = np.repeat(JUDGE[:, None], 3, axis=1)[rows]
    human_rows = HUMAN[rows]
    clusters = np.repeat(np.arange(10)[:, None], 3, axis=1)[rows]
    out = alignment.caption_level(
        judge_rows,
        human_rows,
        kinds=("pearson", "kendall_tau_c", "kendall_tau_b"),
        clusters=clusters,
        resamples=200,
    )
    assert out["pearson"]["value"] == pytest.approx(scipy.stats.pearsonr(judge_rows, human_rows)[0])
    assert out["kendall_tau_c"]["value"] == pytest.approx(
        scipy.stats.kendalltau(judge_rows, human_rows, variant="c")[0]
    )
    assert out["kendall_tau_b"]["value"] == pytest.approx(
        scipy.stats.kendalltau(judge_rows, human_rows, variant="b")[0]
    )
    for r in out.values():
        assert r["low"] <= r["value"] <= r["high"] and r["n"] == 29


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("against", ["majority", "mean"])
def test_weighted_kappa_equals_statsmodels(weights, against):
    out = alignment.kappa_vs_humans(
        JUDGE, HUMAN, categories=SCALE, against=against, weights=weights, resamples=100
    )
    ref = alignment.human_reference(HUMAN, against)
    if against == "mean":
        ref = np.floor(ref + 0.5)  # nearest category, halves up (none here are halves)
    table = np.zeros((5, 5))
    for a, b in zip(JUDGE.astype(int), ref.astype(int), strict=True):
        table[a - 1, b - 1] += 1
    wt = {None: None, "linear": "linear", "quadratic": "quadratic"}[weights]
    expected = cohens_kappa(table, wt=wt).kappa
    assert out["value"] == pytest.approx(expected)
    assert out["low"] <= out["high"]


def test_mean_on_the_scale_rounds_halves_up():
    # Item means 2.5 and 3.5 go to 3 and 4; a judge saying 3 and 4 agrees perfectly.
    out = alignment.kappa_vs_humans(
        [3, 4, 1], [[2, 3], [3, 4], [1, 1]], categories=SCALE, against="mean", resamples=0
    )
    assert out["value"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("against", "level"),
    [
        ("mean", "interval"),
        ("mean", "ordinal"),
        ("majority", "interval"),
        ("majority", "ordinal"),
        ("majority", "nominal"),
    ],
)
def test_alpha_equals_the_krippendorff_package(against, level):
    out = alignment.alpha_vs_humans(JUDGE, HUMAN, against=against, level=level, resamples=50)
    data = np.vstack([JUDGE, alignment.human_reference(HUMAN, against)])
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert out["value"] == pytest.approx(expected)
    assert out["low"] <= out["high"] and out["against"] == against


def test_confusion_matrix_by_hand():
    ref = alignment.human_reference(HUMAN, "majority")
    table = alignment.confusion(JUDGE, ref, SCALE)
    assert table.shape == (5, 5) and table.sum() == 10
    assert np.trace(table) == 6  # judge == majority on captions 0, 2, 4, 5, 7, 8
    expected = np.zeros((5, 5), dtype=int)
    for a, b in zip(JUDGE.astype(int), ref.astype(int), strict=True):
        expected[a - 1, b - 1] += 1
    assert (table == expected).all()


def test_pairwise_accuracy_tie_rules_by_hand():
    judge = [0, 1, 0.5, 0, 0.5, 1]
    human = [0, 0, 1, 0, 0, 1]
    miss = alignment.pairwise_accuracy(judge, human, ties="miss", resamples=100)
    half = alignment.pairwise_accuracy(judge, human, ties="half", resamples=0)
    assert miss["value"] == pytest.approx(3 / 6) and miss["judge_ties"] == 2
    assert half["value"] == pytest.approx(4 / 6)
    assert miss["low"] <= 0.5 <= miss["high"]
    coin = alignment.pairwise_accuracy(judge, human, ties="coin", repeats=2000, seed=1)
    assert coin["value"] == pytest.approx(4 / 6, abs=0.02)  # a coin on a tie is right half the time
    with pytest.raises(ValueError, match='use ties="coin"'):
        alignment.pairwise_accuracy(judge, [0, 0, 0.5, 0, 0, 1], ties="miss")


def test_choices_from_scores():
    assert alignment.choices_from_scores([0.9, 0.1, 0.5], [0.2, 0.3, 0.5]).tolist() == [0, 1, 0.5]


def test_position_bias_of_a_judge_that_always_prefers_the_left_caption():
    n = 12
    out = alignment.position_bias(np.zeros(n), np.zeros(n))
    assert out["flip_rate"] == 1.0 and out["flips"] == n
    assert out["first_position_rate"] == 1.0


def test_position_bias_of_a_consistent_judge_and_a_mixed_one():
    rng = np.random.default_rng(3)
    first = rng.choice([0.0, 1.0, 0.5], size=40)
    consistent = alignment.position_bias(first, 1 - first)
    assert consistent["flip_rate"] == 0.0 and consistent["first_position_rate"] == 0.5
    swapped = first.copy()
    swapped[:10] = 0.0  # the first 10 answers after the swap: "the one shown first"
    out = alignment.position_bias(first, swapped)
    # Independent count, pair by pair in plain Python.
    flips = sum(
        1
        for a, b in zip(first.tolist(), swapped.tolist(), strict=True)
        if {0.0: "a", 1.0: "b", 0.5: "tie"}[a] != {0.0: "b", 1.0: "a", 0.5: "tie"}[b]
    )
    picks = [x for x in first.tolist() + swapped.tolist() if x != 0.5]
    assert out["flip_rate"] == pytest.approx(flips / 40)
    assert out["first_position_rate"] == pytest.approx(picks.count(0.0) / len(picks))


def test_length_bias_of_a_judge_that_prefers_the_longer_caption():
    rng = np.random.default_rng(7)
    len_a = rng.integers(5, 30, size=50).astype(float)
    len_b = rng.integers(5, 30, size=50).astype(float)
    choice = np.where(len_a > len_b, 0.0, np.where(len_b > len_a, 1.0, 0.5))
    out = alignment.length_bias(choice, len_a, len_b)
    assert out["longer_wins"] == 1.0
    diff, picked_a = len_a - len_b, 1 - choice
    assert out["slope"] == pytest.approx(scipy.stats.linregress(diff, picked_a).slope)
    assert out["correlation"] == pytest.approx(scipy.stats.pearsonr(diff, picked_a)[0])
    assert out["slope"] > 0 and out["correlation"] > 0.7


def test_length_bias_without_ties_is_point_biserial_and_zero_for_a_length_blind_judge():
    len_a = np.array([10, 12, 8, 20, 15, 9, 11, 30], dtype=float)
    len_b = np.array([12, 10, 8, 25, 10, 19, 11, 20], dtype=float)
    choice = np.array([0, 1, 0, 1, 0, 1, 0, 1], dtype=float)
    out = alignment.length_bias(choice, len_a, len_b)
    assert out["correlation"] == pytest.approx(
        scipy.stats.pointbiserialr(1 - choice, len_a - len_b)[0]
    )
    # Longer won in pairs 3 (b, 25>20), 4 (a, 15>10), 5 (b), 7 (b loses: a=30 longer) ...
    unequal = [(a, b, c) for a, b, c in zip(len_a, len_b, choice, strict=True) if a != b]
    wins = sum((a > b) == (c == 0) for a, b, c in unequal)
    assert out["longer_wins"] == pytest.approx(wins / len(unequal))


def test_system_level_equals_scipy():
    systems = np.repeat(["s1", "s2", "s3", "s4"], 3)
    human = np.array([4, 5, 4, 3, 3, 2, 5, 5, 4, 1, 2, 2], dtype=float)
    judge = np.array([3, 4, 4, 4, 3, 3, 5, 4, 5, 2, 1, 2], dtype=float)
    out = alignment.system_level(judge, human, systems)
    jm = judge.reshape(4, 3).mean(axis=1)
    hm = human.reshape(4, 3).mean(axis=1)
    assert out["spearman"] == pytest.approx(scipy.stats.spearmanr(jm, hm)[0])
    assert out["kendall_tau_b"] == pytest.approx(scipy.stats.kendalltau(jm, hm)[0])
    assert out["systems"] == ["s1", "s2", "s3", "s4"]


def test_human_ceiling_by_hand():
    out = alignment.human_ceiling(JUDGE, HUMAN, kind="pearson")
    per_human, per_judge = [], []
    for k in range(3):
        rows = [i for i in range(10) if not np.isnan(HUMAN[i, k])]
        ref = [np.nanmean(np.delete(HUMAN[i], k)) for i in rows]
        per_human.append(scipy.stats.pearsonr(HUMAN[rows, k], ref)[0])
        per_judge.append(scipy.stats.pearsonr(JUDGE[rows], ref)[0])
    assert out["per_human"] == pytest.approx(per_human)
    assert out["per_judge"] == pytest.approx(per_judge)
    assert out["human"] == pytest.approx(np.mean(per_human))


def test_self_consistency_equals_krippendorff_and_hand_counts():
    runs = np.array(
        [
            [1, 2, 3, 4, 5, 3, 2],
            [1, 2, 3, 5, 5, 3, 1],
            [1, 3, 3, 4, 5, np.nan, 2],
        ]
    )
    out = alignment.self_consistency(runs)
    assert out["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=runs, level_of_measurement="ordinal")
    )
    complete = [c for c in range(7) if not np.isnan(runs[:, c]).any()]
    assert out["all_agree"] == pytest.approx(
        sum(len(set(runs[:, c])) == 1 for c in complete) / len(complete)
    )
    pairs = [
        np.mean([runs[a, c] == runs[b, c] for c in complete])
        for a, b in itertools.combinations(range(3), 2)
    ]
    assert out["pairwise"] == pytest.approx(np.mean(pairs))


def test_prompt_drift():
    human = np.array([1, 2, 3, 4, 5, 3, 2, 4], dtype=float)
    v1 = np.array([1, 2, 3, 4, 5, 3, 2, 4], dtype=float)
    v2 = np.array([2, 2, 3, 4, 4, 3, 3, 4], dtype=float)
    rows = alignment.prompt_drift({"v1": v1, "v2": v2}, human, kind="kendall_tau_c")
    tau2 = scipy.stats.kendalltau(v2, human, variant="c")[0]
    assert rows[0]["alignment"] == pytest.approx(scipy.stats.kendalltau(v1, human, variant="c")[0])
    assert rows[1]["alignment"] == pytest.approx(tau2)
    assert rows[1]["change"] == pytest.approx(tau2 - rows[0]["alignment"])
    assert rows[1]["agreement_with_previous"] == pytest.approx(5 / 8)
    assert "change" not in rows[0]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: alignment.position_bias([0, 2], [0, 1]), "0.5"),
        (lambda: alignment.length_bias([0, 1], [3, 4], [1, 2]), "same length difference"),
        (lambda: alignment.human_ceiling([1, 2], [[1], [2]]), "at least 2"),
        (lambda: alignment.kappa_vs_humans([7, 1], [[1], [2]], categories=SCALE), "categories"),
        (lambda: alignment.pairwise_accuracy([0], [0], ties="maybe"), "ties"),
        (lambda: alignment.kappa_vs_humans([1], [[1]], categories=[3, 2, 1]), "increasing"),
        (lambda: alignment.system_level([1, 2], [1, 2], ["a", "b"]), "3 systems"),
    ],
)
def test_bad_input_is_a_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
