"""HUMANr allocation: serve the systems whose interval is still wider than the target."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from numpy.typing import ArrayLike, NDArray

from rubrics import checks


def _values(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if arr.size and (arr.min() < -1 or arr.max() > 1):
        raise ValueError(f"{name} must be comparison values in [-1, 1]")
    return arr


def humanr_half_width(values: ArrayLike, *, confidence: float = 0.95) -> float:
    """Half-width of the HUMANr report's t-interval of these comparison values.

    ``t.ppf((1 + confidence) / 2, n - 1) * sd(ddof=1) / sqrt(n)``, as
    ``rubrics.humanr.report`` computes ``t_interval`` (before clipping to [-1, 1]);
    infinite for fewer than 2 values (no interval yet).
    """
    arr = _values(values, "values")
    conf = checks.confidence(confidence)
    n = arr.size
    if n < 2:
        return math.inf
    from scipy import stats

    return float(stats.t.ppf((1 + conf) / 2, n - 1)) * float(arr.std(ddof=1)) / math.sqrt(n)


def humanr_next_systems(
    values_by_system: Mapping[str, ArrayLike],
    *,
    target_half_width: float,
    confidence: float = 0.95,
    min_values: int = 27,
) -> list[str]:
    """Systems that still need comparisons, widest interval first (ties by name).

    ``values_by_system``: each system's kept comparison values so far (``(s - 5) / 4``,
    attention-check failures already dropped). A system needs more while it has fewer than
    ``min_values`` values or its half-width (``humanr_half_width``) is above
    ``target_half_width``. An empty list means every system has reached the target.
    """
    target = float(target_half_width)
    if isinstance(target_half_width, bool) or not 0 < target < 2:
        raise ValueError(f"target_half_width must be in (0, 2), got {target_half_width!r}")
    min_values = checks.integer(min_values, "min_values", 2, 10**7)
    open_systems = []
    for name, values in values_by_system.items():
        arr = _values(values, f"values of {name!r}")
        width = humanr_half_width(arr, confidence=confidence)
        if arr.size < min_values or width > target:
            open_systems.append((-width, str(name)))
    return [name for _, name in sorted(open_systems)]


def humanr_next_systems_by_worker(
    values_by_system: Mapping[str, Mapping[Hashable, ArrayLike]],
    *,
    target_half_width: float,
    confidence: float = 0.95,
    min_values: int = 27,
    min_workers: int = 5,
) -> list[str]:
    """Systems that still need comparisons when each worker has one vote (issue 29).

    ``values_by_system[system][worker]``: the kept comparison values of one independent
    worker (a linked identity, ``annotation/identities.py``) for that system. A worker's
    vote is the mean of their values, so many ids of one person answering alike count once
    and cannot narrow the interval. A system needs more while it has fewer than
    ``min_values`` values in all, fewer than ``min_workers`` workers, or while the
    t-interval half-width of the votes (``humanr_half_width``) is above the target. Widest
    first (ties by name); an empty list means every system has reached the target.
    """
    target = float(target_half_width)
    if isinstance(target_half_width, bool) or not 0 < target < 2:
        raise ValueError(f"target_half_width must be in (0, 2), got {target_half_width!r}")
    min_values = checks.integer(min_values, "min_values", 2, 10**7)
    min_workers = checks.integer(min_workers, "min_workers", 2, 10**7)
    open_systems = []
    for name, by_worker in values_by_system.items():
        arrays = [_values(v, f"values of {name!r}") for v in by_worker.values()]
        votes = np.array([a.mean() for a in arrays if a.size], dtype=np.float64)
        total = sum(a.size for a in arrays)
        width = humanr_half_width(votes, confidence=confidence) if votes.size else math.inf
        if total < min_values or votes.size < min_workers or width > target:
            open_systems.append((-width, str(name)))
    return [name for _, name in sorted(open_systems)]
