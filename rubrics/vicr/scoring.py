"""Tutorial points, consensus and Algorithm 1 (PROTOCOLS.md section 2), in exact fractions.

The thresholds ``d <= 0.25, 0.5, 1, 1.75`` are compared in rational arithmetic
(``fractions.Fraction``), never through a float.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from rubrics.vicr.ratings import check_rating, check_ratings
from rubrics.vicr.scale import PRIMED_RATINGS, V_MAX

__all__ = [
    "Score",
    "consensus",
    "consensus_pool",
    "player_score",
    "points_for_distance",
    "score_rating",
    "tutorial_points",
]


def tutorial_points(rating: int, truth: int) -> int:
    """Tutorial/probation points ``2 - |truth - rating|`` (section 2, Phases 1-2)."""
    return 2 - abs(check_rating(truth, "truth") - check_rating(rating))


def _round_half_up_mean(total: int, count: int) -> int:
    # floor(total / count + 1/2) in exact integer arithmetic
    return (2 * total + count) // (2 * count)


def consensus(pool: Iterable[int]) -> int:
    """Consensus ``r = round_half_up(mean(pool))`` (section 2, Algorithm 1); 3.5 -> 4."""
    values = check_ratings(pool, "pool")
    if not values:
        raise ValueError("consensus of an empty pool is undefined (no ratings yet)")
    return _round_half_up_mean(sum(values), len(values))


def consensus_pool(human_ratings: Iterable[int], primed_ratings: Iterable[int]) -> list[int]:
    """Priming rule: humans plus the first ``max(0, 2 - humans)`` primed ratings (section 2)."""
    humans = check_ratings(human_ratings, "human_ratings")
    primed = check_ratings(primed_ratings, "primed_ratings")
    return humans + primed[: max(0, PRIMED_RATINGS - len(humans))]


_THRESHOLDS: tuple[tuple[Fraction, int], ...] = (
    (Fraction(1, 4), 2),
    (Fraction(1, 2), 1),
    (Fraction(1), 0),
    (Fraction(7, 4), -1),
)


def points_for_distance(d: Fraction | float | int) -> int:
    """Algorithm 1 ladder: d <= 0.25 -> 2, <= 0.5 -> 1, <= 1 -> 0, <= 1.75 -> -1, else -2."""
    if isinstance(d, bool) or not isinstance(d, Fraction | numbers.Real):
        raise ValueError(f"d must be a number, got {d!r}")
    if isinstance(d, Fraction | numbers.Integral):
        exact = Fraction(int(d)) if isinstance(d, numbers.Integral) else d
    else:
        value = float(d)
        if not np.isfinite(value):
            raise ValueError(f"d must be finite, got {d!r}")
        exact = Fraction(value)  # the float's exact value: 0.25 and 1.75 compare exactly
    if exact < 0:
        raise ValueError(f"d must be >= 0, got {d!r}")
    for threshold, points in _THRESHOLDS:
        if exact <= threshold:
            return points
    return -2


@dataclass(frozen=True, slots=True)
class _Algorithm1:
    r: int
    n: int
    var: Fraction
    v: Fraction
    d: Fraction
    points: int


def _algorithm1(rating: int, previous: list[int]) -> _Algorithm1:
    """Algorithm 1 in exact arithmetic; ``previous`` is non-empty and validated."""
    m = len(previous)
    total = sum(previous)
    r = _round_half_up_mean(total, m)
    n = m + 1
    var = Fraction(m * sum(x * x for x in previous) - total * total, m * m)  # ddof 0
    v = 1 + Fraction(1, n) * (1 + (n - 1) * var / V_MAX)
    d = abs(rating - r) / v
    return _Algorithm1(r=r, n=n, var=var, v=v, d=d, points=points_for_distance(d))


def player_score(rating: int, previous: Iterable[int]) -> int:
    """Points for ``rating`` against the consensus pool ``previous`` (Algorithm 1); empty -> 0."""
    x = check_rating(rating)
    pool = check_ratings(previous, "previous")
    if not pool:
        return 0
    return _algorithm1(x, pool).points


_LEVEL_WORDS = {1: "one level", 2: "two levels", 3: "three levels", 4: "four levels"}


@dataclass(frozen=True, slots=True)
class Score:
    """Everything the game feedback page shows for one rating (section 2, Algorithm 1).

    ``consensus``, ``var``, ``v`` and ``d`` are ``None`` when the pool is empty; ``n`` counts
    the pool plus the player's rating; ``var`` is the population variance (ddof 0) of the pool.
    """

    rating: int
    consensus: int | None
    points: int
    n: int
    var: float | None
    v: float | None
    d: float | None
    reason: str


def score_rating(rating: int, previous: Iterable[int]) -> Score:
    """Algorithm 1 with its intermediate values and a plain-words reason (section 2)."""
    x = check_rating(rating)
    pool = check_ratings(previous, "previous")
    if not pool:
        return Score(
            rating=x,
            consensus=None,
            points=0,
            n=1,
            var=None,
            v=None,
            d=None,
            reason="no consensus yet, so this rating scores 0 points",
        )
    result = _algorithm1(x, pool)
    distance = abs(x - result.r)
    if distance == 0:
        reason = "you matched the consensus"
    else:
        away = _LEVEL_WORDS[distance]
        # Would the same distance have scored fewer points if the raters had all agreed?
        strict = points_for_distance(Fraction(distance) / (1 + Fraction(1, result.n)))
        if result.points > strict:
            reason = f"{away} away, and raters disagreed on this one"
        elif result.var == 0 and len(pool) > 1:
            reason = f"{away} away from the consensus, and the raters so far all agreed"
        else:
            reason = f"{away} away from the consensus"
    return Score(
        rating=x,
        consensus=result.r,
        points=result.points,
        n=result.n,
        var=float(result.var),
        v=float(result.v),
        d=float(result.d),
        reason=reason,
    )
