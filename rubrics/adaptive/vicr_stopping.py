"""The VICR stopping rule: the exact chance that more ratings would move the consensus."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from rubrics import checks, vicr
from rubrics.adaptive.rater_model import RaterModel

#: Largest ``max_ratings`` the rule computes for (VicrSettings bounds it at 1,000 too).
MAX_RATINGS = 1000


@lru_cache(maxsize=256)
def _sum_distributions(noise_bytes: bytes, levels: int, m: int) -> np.ndarray:
    """Row t: the distribution of the sum of m ratings drawn from noise[t]; index = sum - m."""
    noise = np.frombuffer(noise_bytes).reshape(-1, levels)
    out = np.ones((noise.shape[0], 1))
    for _ in range(m):
        out = np.stack([np.convolve(row, p) for row, p in zip(out, noise, strict=True)])
    return out


def change_probability(counts: tuple[int, ...], max_ratings: int, model: RaterModel) -> float:
    levels = model.levels
    k = sum(counts)
    m = max_ratings - k
    if m <= 0:
        return 0.0
    total = sum((level + 1) * c for level, c in enumerate(counts))
    now = (2 * total + k) // (2 * k)  # vicr.consensus of the ratings so far
    # The consensus of all max_ratings ratings stays `now` iff
    # 2 * max * now - max <= 2 * (total + T) < 2 * max * now + max.
    low_t = math.ceil((2 * max_ratings * now - max_ratings - 2 * total) / 2)
    high_t = math.ceil((2 * max_ratings * now + max_ratings - 2 * total) / 2) - 1
    sums = _sum_distributions(model.noise.tobytes(), levels, m)  # sums m..m*levels
    lo, hi = max(low_t - m, 0), min(high_t - m, sums.shape[1] - 1)
    stay = sums[:, lo : hi + 1].sum(axis=1) if lo <= hi else np.zeros(model.classes)
    posterior = model.posterior(counts)
    return float(np.clip(1.0 - posterior @ stay, 0.0, 1.0))


def rating_counts(ratings: Sequence[int], levels: int) -> tuple[int, ...]:
    values = vicr._as_rating_array(ratings, "ratings", levels)
    return tuple(int(c) for c in np.bincount(values - 1, minlength=levels))


def vicr_change_probability(
    ratings: Sequence[int], *, max_ratings: int, model: RaterModel
) -> float:
    """P(the consensus of ``max_ratings`` ratings differs from the consensus of ``ratings``).

    Exact under ``model`` (see the module docstring); 0 when ``ratings`` already holds
    ``max_ratings`` ratings or more. ValueError for an empty pair.
    """
    max_ratings = checks.integer(max_ratings, "max_ratings", 1, MAX_RATINGS)
    counts = rating_counts(ratings, model.levels)
    if sum(counts) == 0:
        raise ValueError("a pair without ratings has no consensus yet")
    return change_probability(counts, max_ratings, model)


def check_bounds(min_ratings: int, max_ratings: int, risk: float) -> tuple[int, int, float]:
    min_ratings = checks.integer(min_ratings, "min_ratings", 1, MAX_RATINGS)
    max_ratings = checks.integer(max_ratings, "max_ratings", 1, MAX_RATINGS)
    if min_ratings > max_ratings:
        raise ValueError("min_ratings must not exceed max_ratings")
    return min_ratings, max_ratings, checks.confidence(risk, "risk")


def vicr_needs_more(
    ratings: Sequence[int],
    *,
    min_ratings: int,
    max_ratings: int,
    model: RaterModel,
    risk: float = 0.05,
) -> bool:
    """Whether a VICR pair should get another rating under the adaptive rule.

    True below ``min_ratings``; False at ``max_ratings`` or more; in between, True while the
    probability that ``max_ratings`` ratings would give another consensus exceeds ``risk``.
    """
    min_ratings, max_ratings, risk = check_bounds(min_ratings, max_ratings, risk)
    counts = rating_counts(ratings, model.levels)
    k = sum(counts)
    if k < min_ratings:
        return True
    if k >= max_ratings:
        return False
    return change_probability(counts, max_ratings, model) > risk
