"""HUMANr adaptive allocation keeps the report's worker interval valid (issue 27).

With adaptive allocation every group holds one system, and a system stops being served once
``humanr_next_systems_by_worker`` says its interval over one vote per worker is narrow
enough. Why the interval stays valid: the rule looks only at that system's own past votes
(other systems' data never decide when it stops), and it stops on the interval's WIDTH, not
on its centre. For normal votes the mean and the spread are independent, so stopping on the
spread leaves the mean's t-interval exact in the limit (Chow and Robbins' fixed-width
sequential intervals); on a bounded slider they are not quite independent (votes that agree
also tend to sit near an end), which is why a system is never settled before 10 workers
(``ADAPTIVE_MIN_WORKERS``). These tests check the claim by simulation against the TRUE
value, computed independently as the exact expectation of the simulated answer distribution.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from rubrics.adaptive import humanr_next_systems_by_worker
from rubrics.humanr import report
from tests.rubrics.test_humanr import TINY, responses

#: ``annotation.modes.humanr.allocation.ADAPTIVE_MIN_WORKERS`` and
#: ``protocol.ADAPTIVE_MIN_VALUES`` (tests/annotation/test_adaptive_wiring.py checks the
#: first is 10; rubrics tests do not import Django).
MIN_WORKERS = 10
MIN_VALUES = 27


def test_worker_interval_worked_by_hand():
    rep = report(responses(TINY), n_bootstrap=50, n_splits=10, n_permutations=100)
    a = rep["systems"]["A"]
    # Kept A values per worker: w1 -0.75, -0.5, -0.25 (mean -0.5); w2 -1 (g2 dropped by
    # its failed check); w3 -0.25. Votes -0.5, -1, -0.25.
    votes = [-0.5, -1.0, -0.25]
    assert a["n_workers"] == 3
    assert a["worker_mean"] == pytest.approx(-7 / 12)
    low, high = scipy.stats.t.interval(0.95, 2, loc=np.mean(votes), scale=scipy.stats.sem(votes))
    assert low < -1  # clipped to the scale
    assert a["worker_t_interval"] == pytest.approx([-1.0, high])
    # Human: w1 0.25, 0.5 (0.375); w2 0.25; w3 0.
    base = rep["baseline"]
    assert base["worker_mean"] == pytest.approx((0.375 + 0.25 + 0) / 3)


def test_worker_interval_needs_two_workers():
    one = [row for row in TINY if row[0] == "w1"]
    rep = report(responses(one), n_bootstrap=50, n_splits=10, n_permutations=100)
    assert rep["systems"]["A"]["n_workers"] == 1
    assert rep["systems"]["A"]["worker_t_interval"] is None


def true_value(mu: float, spread: float) -> float:
    """E[(s - 5) / 4], s = clip(round(5 + 4 mu + N(0, spread)), 1, 9): exact."""
    edges = np.array([-np.inf, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, np.inf])
    pmf = np.diff(scipy.stats.norm.cdf((edges - (5 + 4 * mu)) / spread))
    return float(pmf @ ((np.arange(1, 10) - 5) / 4))


def test_true_value_matches_a_large_sample():
    rng = np.random.default_rng(3)
    s = np.clip(np.floor(5 + 4 * -0.46 + rng.normal(0, 2.06, 400_000) + 0.5), 1, 9)
    assert ((s - 5) / 4).mean() == pytest.approx(true_value(-0.46, 2.06), abs=0.003)


def adaptive_run(rng, *, mu: float, noise: float, leaning: float, target: float, most: int):
    """One system served a group (9 values, one new worker) at a time until the rule as
    wired stops it; returns the votes at the stop."""
    groups: dict[int, np.ndarray] = {}
    for worker in range(most):
        latent = 5 + 4 * mu + rng.normal(0, leaning) + rng.normal(0, noise, 9)
        groups[worker] = (np.clip(np.floor(latent + 0.5), 1, 9) - 5) / 4
        still = humanr_next_systems_by_worker(
            {"S": groups},
            target_half_width=target,
            min_values=MIN_VALUES,
            min_workers=MIN_WORKERS,
        )
        if not still:
            break
    return np.array([values.mean() for values in groups.values()])


@pytest.mark.parametrize(
    ("mu", "leaning"),
    [(0.0, 0.0), (-0.46, 0.5), (-0.69, 0.5)],  # Human; paper's GIT-L and ClipCap
)
def test_adaptive_stop_keeps_the_worker_interval_covering(mu, leaning):
    rng = np.random.default_rng(27)
    truth = true_value(mu, math.hypot(2.0, leaning))
    runs, covered, stopped_early = 300, 0, 0
    for _ in range(runs):
        votes = adaptive_run(rng, mu=mu, noise=2.0, leaning=leaning, target=0.12, most=40)
        stopped_early += votes.size < 40
        low, high = scipy.stats.t.interval(
            0.95, votes.size - 1, loc=votes.mean(), scale=scipy.stats.sem(votes)
        )
        covered += low <= truth <= high
    assert stopped_early >= 0.9 * runs  # the rule did stop: this is the adaptive case
    # 95% nominal; at 300 runs a true 93% falls below 90% with probability about 2%.
    assert covered / runs >= 0.90, covered / runs
