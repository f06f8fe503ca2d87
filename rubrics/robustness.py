"""Ranking robustness: how many judgments hold a leaderboard's order in place.

A leaderboard can hinge on a handful of answers (dropping 0.003% of Chatbot Arena's votes
changes its first place, arXiv 2508.11847). For each pair of adjacent systems this module
finds the smallest number of units (images or judgments) whose removal makes the lower
system's mean strictly higher than the upper one's: a reversal, not a tie. Both methods
are exact, not approximations, and are checked against brute force in the tests.

* ``paired_reversal``: both systems are scored on the same units (THumB: every image has a
  caption of every system, and removing an image removes it from both). The upper system
  leads by ``mean(d)`` with ``d = upper - lower`` per unit. Removing the ``k`` largest
  differences leaves the smallest possible remaining sum of any ``k``-subset, so the first
  ``k`` whose remainder sums below zero is the minimum.
* ``unpaired_reversal``: each system has its own units (HUMANr: a comparison involves one
  system). For a split of ``k`` removals into ``k_up`` from the upper system and
  ``k_low`` from the lower, the upper mean is lowest without its ``k_up`` largest values and
  the lower mean highest without its ``k_low`` smallest: the two choices are independent.
  Feasibility is monotone in ``k`` (dropping the largest of what is left never raises a
  mean), so a binary search over ``k`` with every split checked at once finds the minimum.

At least one unit of each system must remain: emptying a system is not a reversal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["NeighbourReversal", "Reversal", "paired_reversal", "unpaired_reversal"]


@dataclass(frozen=True)
class Reversal:
    """The smallest removal that reverses an order, or ``removed=None`` when none can.

    ``removed`` counts units taken away (of ``total``); ``share`` is ``removed / total``;
    ``from_upper`` and ``from_lower`` split it by system (equal to ``removed`` and 0 for
    paired units, where one unit holds both systems).
    """

    removed: int | None
    total: int
    from_upper: int = 0
    from_lower: int = 0

    @property
    def share(self) -> float | None:
        return None if self.removed is None else self.removed / self.total

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "removed": self.removed,
            "total": self.total,
            "share": self.share,
            "from_upper": self.from_upper,
            "from_lower": self.from_lower,
        }


@dataclass(frozen=True)
class NeighbourReversal:
    """Two systems adjacent in a ranking and the fewest shared units (images) whose removal
    reverses their order; ``reversal`` is None when they share no unit. THumB's and VICR's
    reports give one per neighbouring pair (issue 15)."""

    upper: str
    lower: str
    reversal: Reversal | None

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"upper": self.upper, "lower": self.lower}
        if self.reversal is None:
            entry.update({"removed": None, "total": 0, "share": None})
        else:
            entry.update(self.reversal.as_dict())
        return entry


def _vector(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds a value that is not a finite number")
    return array


def paired_reversal(upper: ArrayLike, lower: ArrayLike) -> Reversal:
    """Fewest shared units whose removal puts ``lower``'s mean strictly above ``upper``'s.

    ``upper[i]`` and ``lower[i]`` are the two systems' scores on unit ``i``. If ``lower``
    already leads, nothing needs removing (``removed=0``).
    """
    up, low = _vector(upper, "upper"), _vector(lower, "lower")
    if up.shape != low.shape:
        raise ValueError("upper and lower must score the same units (same length)")
    difference = np.sort(up - low)[::-1]  # largest lead first
    # remaining[k] = sum of the differences left after removing the k largest.
    remaining = difference.sum() - np.concatenate(([0.0], np.cumsum(difference)))
    # Keep at least one unit: k runs from 0 to n - 1. A tiny tolerance keeps an exact tie
    # (sum 1e-16 below zero after floating-point cancellation) from counting as reversed.
    tolerance = 1e-9 * max(1.0, float(np.abs(difference).sum()))
    reversed_at = np.flatnonzero(remaining[: up.size] < -tolerance)
    if reversed_at.size == 0:
        return Reversal(None, up.size)
    k = int(reversed_at[0])
    return Reversal(k, up.size, from_upper=k, from_lower=0)


def _best_split(
    up_prefix: np.ndarray, low_prefix: np.ndarray, n_up: int, n_low: int, k: int
) -> int | None:
    """A ``k_up`` for which removing ``k`` units reverses the order, or None.

    ``up_prefix[j]``: sum of the upper system's values without its ``j`` largest;
    ``low_prefix[j]``: sum of the lower system's values without its ``j`` smallest.
    """
    k_up = np.arange(max(0, k - (n_low - 1)), min(k, n_up - 1) + 1)
    if k_up.size == 0:
        return None
    k_low = k - k_up
    mean_up = up_prefix[k_up] / (n_up - k_up)
    mean_low = low_prefix[k_low] / (n_low - k_low)
    gap = mean_up - mean_low
    tolerance = 1e-9 * max(1.0, float(np.abs(up_prefix[0]) + np.abs(low_prefix[0])))
    hits = np.flatnonzero(gap < -tolerance)
    return int(k_up[hits[0]]) if hits.size else None


def unpaired_reversal(upper: ArrayLike, lower: ArrayLike) -> Reversal:
    """Fewest units, taken from either system, that put ``lower``'s mean strictly above.

    ``upper`` and ``lower`` are the values of each system's own units (their lengths may
    differ). ``total`` is the number of units of both systems.
    """
    up = np.sort(_vector(upper, "upper"))[::-1]  # largest first: removed first
    low = np.sort(_vector(lower, "lower"))  # smallest first: removed first
    n_up, n_low = up.size, low.size
    up_prefix = up.sum() - np.concatenate(([0.0], np.cumsum(up)))
    low_prefix = low.sum() - np.concatenate(([0.0], np.cumsum(low)))
    total = n_up + n_low
    largest = (n_up - 1) + (n_low - 1)
    if _best_split(up_prefix, low_prefix, n_up, n_low, 0) is not None:
        return Reversal(0, total)
    if _best_split(up_prefix, low_prefix, n_up, n_low, largest) is None:
        return Reversal(None, total)
    # Smallest feasible k in (0, largest]: feasibility is monotone in k (module docstring).
    lo, hi = 0, largest
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _best_split(up_prefix, low_prefix, n_up, n_low, mid) is None:
            lo = mid
        else:
            hi = mid
    k_up = _best_split(up_prefix, low_prefix, n_up, n_low, hi)
    assert k_up is not None
    return Reversal(hi, total, from_upper=k_up, from_lower=hi - k_up)
