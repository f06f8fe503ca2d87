"""Ranking robustness against brute force over every subset of small studies."""

from itertools import combinations

import numpy as np
import pytest

from rubrics.robustness import paired_reversal, unpaired_reversal


def _brute_paired(upper, lower):
    n = len(upper)
    for k in range(n):  # keep at least one unit
        for removed in combinations(range(n), k):
            kept = [i for i in range(n) if i not in removed]
            if np.mean([lower[i] for i in kept]) > np.mean([upper[i] for i in kept]) + 1e-12:
                return k
    return None


def _brute_unpaired(upper, lower):
    n_up, n_low = len(upper), len(lower)
    for k in range(n_up + n_low - 1):
        for k_up in range(max(0, k - (n_low - 1)), min(k, n_up - 1) + 1):
            for drop_up in combinations(range(n_up), k_up):
                mean_up = np.mean([v for i, v in enumerate(upper) if i not in drop_up])
                for drop_low in combinations(range(n_low), k - k_up):
                    mean_low = np.mean([v for i, v in enumerate(lower) if i not in drop_low])
                    if mean_low > mean_up + 1e-12:
                        return k
    return None


def test_paired_hand_worked():
    # Differences 3, 1, -1, -1: the upper system leads by a sum of 2. Removing the 3 leaves
    # -1 (reversed), so one image decides the order.
    upper = [5, 4, 3, 3]
    lower = [2, 3, 4, 4]
    result = paired_reversal(upper, lower)
    assert result.removed == 1
    assert result.share == 0.25
    assert result.as_dict()["from_upper"] == 1


def test_paired_tie_is_not_a_reversal():
    # Differences 1, -1: removing the 1 leaves -1 (reversed) -> 1. Differences 1, 0: the
    # remainder after removing the 1 is 0, a tie: no reversal is possible.
    assert paired_reversal([2, 1], [1, 2]).removed == 1
    assert paired_reversal([2, 1], [1, 1]).removed is None


def test_paired_already_reversed_needs_nothing():
    assert paired_reversal([1, 1], [2, 2]).removed == 0


def test_unpaired_hand_worked():
    # Upper values 1, 1, 0 (mean 2/3); lower 1, 0, 0 (mean 1/3). One removal is not enough:
    # the best are upper {1, 0} (1/2) against lower 1/3, or lower {1, 0} (1/2) against 2/3.
    # Two are: lower's two 0s leave lower {1} (1) above 2/3 (upper's two 1s would do too;
    # the first split found, fewest from the upper system, is reported), while one from
    # each gives 1/2 against 1/2, a tie.
    result = unpaired_reversal([1, 1, 0], [1, 0, 0])
    assert result.removed == 2
    assert result.total == 6
    assert (result.from_upper, result.from_lower) == (0, 2)


@pytest.mark.parametrize("seed", range(40))
def test_paired_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    upper = rng.integers(1, 6, size=n).astype(float) + 0.5 * rng.integers(0, 2, size=n)
    lower = rng.integers(1, 6, size=n).astype(float)
    assert paired_reversal(upper, lower).removed == _brute_paired(upper, lower)


@pytest.mark.parametrize("seed", range(40))
def test_unpaired_matches_brute_force(seed):
    rng = np.random.default_rng(1000 + seed)
    upper = (rng.integers(1, 10, size=int(rng.integers(1, 6))) - 5) / 4
    lower = (rng.integers(1, 10, size=int(rng.integers(1, 6))) - 5) / 4
    result = unpaired_reversal(upper, lower)
    assert result.removed == _brute_unpaired(list(upper), list(lower))
    if result.removed:
        # The split it reports really reverses the order.
        kept_up = np.sort(upper)[: upper.size - result.from_upper]
        kept_low = np.sort(lower)[result.from_lower :]
        assert kept_low.mean() > kept_up.mean()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same length"):
        paired_reversal([1, 2], [1])
    with pytest.raises(ValueError, match="non-empty"):
        unpaired_reversal([], [1])
    with pytest.raises(ValueError, match="finite"):
        paired_reversal([1, float("nan")], [1, 2])


@pytest.mark.parametrize("seed", range(8))
def test_thumb_report_robustness_matches_brute_force(seed):
    from rubrics.thumb import CaptionJudgments, report

    rng = np.random.default_rng(seed)
    systems = ["Human", "A", "B", "C"]
    n_images = 6
    images = np.repeat(np.arange(n_images), len(systems))
    names = np.tile(systems, n_images)
    precision = rng.integers(1, 6, size=images.size)
    recall = rng.integers(1, 6, size=images.size)
    result = report(
        CaptionJudgments(image_ids=images, systems=names, precision=precision, recall=recall),
        n_resamples=10,
    )
    totals = {s: (precision[names == s] + recall[names == s]) / 2 for s in systems}
    ranked = sorted(systems, key=lambda s: (-totals[s].mean(), s))
    pairs = result.as_dict()["robustness"]
    assert [(p["upper"], p["lower"]) for p in pairs] == list(zip(ranked, ranked[1:], strict=False))
    for pair in pairs:
        expected = _brute_paired(list(totals[pair["upper"]]), list(totals[pair["lower"]]))
        assert pair["removed"] == expected
        assert pair["total"] == n_images


@pytest.mark.parametrize("seed", range(6))
def test_humanr_report_robustness_matches_brute_force(seed):
    from rubrics.humanr import Responses, comparison_value, report

    rng = np.random.default_rng(50 + seed)
    systems = np.array(["A", "B", "C"] * 4)  # 4 comparisons per system, no checks
    raw = rng.integers(1, 10, size=systems.size)
    left = rng.integers(0, 2, size=systems.size).astype(bool)
    result = report(
        Responses(
            worker_ids=np.arange(systems.size) % 3,
            image_ids=np.arange(systems.size),
            systems=systems,
            raw=raw,
            human_on_left=left,
            is_attention_check=np.zeros(systems.size, dtype=bool),
            group_ids=np.zeros(systems.size, dtype=int),
        ),
        n_bootstrap=10,
        n_splits=10,
        n_permutations=10,
        image_counts=[],
    )
    values = {
        s: [
            comparison_value(r, h)
            for r, h, name in zip(raw, left, systems, strict=True)
            if name == s
        ]
        for s in ("A", "B", "C")
    }
    ranked = sorted(values, key=lambda s: (-np.mean(values[s]), s))
    pairs = result["robustness"]
    assert [(p["upper"], p["lower"]) for p in pairs] == list(zip(ranked, ranked[1:], strict=False))
    for pair in pairs:
        assert pair["removed"] == _brute_unpaired(values[pair["upper"]], values[pair["lower"]])
