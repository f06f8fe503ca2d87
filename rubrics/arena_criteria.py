"""Per-criterion side-by-side labels (ImageInWords' 5-point SxS): which side wins.

Kept apart from the Bradley-Terry leaderboard in ``rubrics.arena``: these labels have no
overall verdict and enter no fit, only a mean with a bootstrap interval per criterion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def criterion_preference(
    values: Sequence[int], seed: int = 0, rounds: int = 2000, level: float = 0.95
) -> Mapping[str, float]:
    """Summary of 5-point side-by-side labels coded -2..2 (positive: side A better).

    Returns the mean with a seeded bootstrap percentile interval, and the shares of
    A-better, neutral and B-better labels. The interval says which side wins the
    criterion: above 0, A; below 0, B; containing 0, neither is shown to win.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError("no labels")
    if not np.all(np.isin(v, [-2, -1, 0, 1, 2])):
        raise ValueError("labels must be coded -2, -1, 0, 1 or 2")
    rng = np.random.default_rng(seed)
    means = rng.choice(v, size=(rounds, v.size), replace=True).mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return {
        "mean": float(v.mean()),
        "low": float(low),
        "high": float(high),
        "a_better": float((v > 0).mean()),
        "neutral": float((v == 0).mean()),
        "b_better": float((v < 0).mean()),
        "n": float(v.size),
    }
