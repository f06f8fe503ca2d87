"""Bootstrap resampling and random half-splits (pure numpy; no Django).

Every random function takes ``seed``: an ``int`` (a fresh
``numpy.random.default_rng(seed)`` is made, so the same int always gives the same
result) or a ``numpy.random.Generator`` (used and advanced in place, for callers that
chain several draws from one stream).

The resampling functions share one stream convention: resample ``r`` draws the units
``resample_indices(n, n_resamples, seed)[r]``. :func:`resample_counts`,
:func:`paired_bootstrap_means`, :func:`cluster_bootstrap_mean` and
:func:`percentile_bootstrap` use exactly those draws, so, for the same int seed, their
results agree with each other and with a hand-written loop over the indices.

Intervals are percentile intervals (Efron & Tibshirani 1993, section 13.3): the
``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the bootstrap
replicates, with numpy's default linear interpolation. ``confidence=0.90`` gives the
5th and 95th percentiles used by THumB (Kasai et al. 2022, Table 2, paired bootstrap
after Koehn 2004).

Means are computed from an ``n_resamples x n`` matrix of resample counts (a matrix
product), never by a Python loop over resamples.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Seed",
    "BootstrapMeans",
    "MeanInterval",
    "as_generator",
    "resample_indices",
    "resample_counts",
    "subsample_indices",
    "percentile_interval",
    "percentile_bootstrap",
    "paired_bootstrap_means",
    "cluster_bootstrap_mean",
    "half_splits",
]

Seed = int | np.random.Generator


class BootstrapMeans(NamedTuple):
    """Per-column means and percentile-bootstrap interval ends, each of shape (columns,)."""

    mean: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


class MeanInterval(NamedTuple):
    """A mean and the low/high ends of its bootstrap interval."""

    mean: float
    low: float
    high: float


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float | np.floating):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    return float(confidence)


def _finite(values: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from exc
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or infinity)")
    return arr


# ---------------------------------------------------------------------------
# Random streams and index draws
# ---------------------------------------------------------------------------


def as_generator(seed: Seed) -> np.random.Generator:
    """Return a numpy Generator: ``default_rng(seed)`` for an int, the Generator itself otherwise.

    Raises ValueError for anything else (including None and bool: results must be
    reproducible).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an int or a numpy.random.Generator, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.default_rng(int(seed))


def resample_indices(n: int, n_resamples: int, seed: Seed = 0) -> NDArray[np.int32]:
    """Nonparametric bootstrap draws (Efron 1979): an (n_resamples, n) array of indices in [0, n).

    Row r lists the n units drawn with replacement for resample r; this is the stream
    every bootstrap function of this module uses. The dtype is int32 (half the cost
    of int64 to draw); n must be below 2**31.
    """
    n = _positive_int(n, "n")
    n_resamples = _positive_int(n_resamples, "n_resamples")
    if n >= 2**31:
        raise ValueError(f"n must be below 2**31, got {n}")
    rng = as_generator(seed)
    return rng.integers(0, n, size=(n_resamples, n), dtype=np.int32)


def resample_counts(n: int, n_resamples: int, seed: Seed = 0) -> NDArray[np.int64]:
    """Bootstrap draws as counts (Efron 1979): (n_resamples, n), [r, i] = draws of unit i in row r.

    Uses the same draws as :func:`resample_indices` with the same seed; each row sums
    to n. A bootstrap mean of per-unit values v is then ``counts @ v / n``.
    """
    idx = resample_indices(n, n_resamples, seed)
    n_resamples, n = idx.shape
    keys = idx + (np.arange(n_resamples, dtype=np.int64) * n)[:, None]  # int64: no overflow
    return np.bincount(keys.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


def subsample_indices(n: int, size: int, n_resamples: int, seed: Seed = 0) -> NDArray[np.int64]:
    """Subsampling without replacement: an (n_resamples, size) array of distinct indices in [0, n).

    For stability curves such as the standard deviation of a score as a function of
    the number of images (HUMANr paper, Fig. 4 right). Each row is a uniformly random
    subset, in random order.
    """
    n = _positive_int(n, "n")
    size = _positive_int(size, "size")
    n_resamples = _positive_int(n_resamples, "n_resamples")
    if size > n:
        raise ValueError(f"size ({size}) cannot exceed n ({n}) when drawing without replacement")
    rng = as_generator(seed)
    keys = rng.random((n_resamples, n))
    return np.argsort(keys, axis=1)[:, :size].astype(np.int64)


def half_splits(units: int | ArrayLike, n_splits: int, seed: Seed = 0) -> NDArray[np.bool_]:
    """Random half-splits (split-half reproducibility, HUMANr paper Fig. 4 left): bool masks.

    ``units``: the number of units n, or a 1-D sequence of units (then n = its length
    and mask columns follow its order). Returns an ``(n_splits, n)`` boolean array;
    row s is split s: ``True`` marks the first half (exactly ``n // 2`` units) and
    ``False`` the second half (``n - n // 2`` units), each split uniformly random.
    Use ``units[mask]`` and ``units[~mask]``. Needs n >= 2.
    """
    if isinstance(units, int | np.integer) and not isinstance(units, bool):
        n = int(units)
    else:
        arr = np.asarray(units)
        if arr.ndim != 1:
            raise ValueError(f"units must be an int or a 1-D sequence, got shape {arr.shape}")
        n = arr.shape[0]
    if n < 2:
        raise ValueError(f"half-splits need at least 2 units, got {n}")
    n_splits = _positive_int(n_splits, "n_splits")
    rng = as_generator(seed)
    order = np.argsort(rng.random((n_splits, n)), axis=1)
    masks = np.zeros((n_splits, n), dtype=bool)
    np.put_along_axis(masks, order[:, : n // 2], True, axis=1)
    return masks


# ---------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------


def percentile_interval(
    replicates: ArrayLike, confidence: float = 0.95, axis: int = 0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile interval (Efron & Tibshirani 1993, 13.3) of bootstrap replicates along ``axis``.

    Returns ``(low, high)``: the (1 - confidence)/2 and (1 + confidence)/2 quantiles
    (linear interpolation), as arrays with ``axis`` removed (0-d for 1-D input).
    Raises ValueError for non-finite replicates (a statistic undefined on a resample).
    """
    confidence = _check_confidence(confidence)
    reps = _finite(replicates, "replicates")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(reps, [alpha, 1.0 - alpha], axis=axis)
    return low, high


def percentile_bootstrap(
    statistic: Callable[[NDArray[Any]], Any],
    data: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: Seed = 0,
    *,
    vectorized: bool = False,
) -> tuple[float, float]:
    """Percentile bootstrap interval (Efron & Tibshirani 1993, 13.3) of any statistic of data rows.

    Resample r is ``data[resample_indices(len(data), n_resamples, seed)[r]]`` (rows of
    ``data`` drawn with replacement; extra axes are kept together, so pass an
    (n, k) array to resample paired observations). ``statistic(sample) -> float`` is
    called once per resample; with ``vectorized=True`` it is called once with the
    stacked resamples of shape ``(n_resamples, n, ...)`` and must return
    ``n_resamples`` values. Returns ``(low, high)``.
    """
    if not callable(statistic):
        raise ValueError("statistic must be callable")
    arr = np.asarray(data)
    if arr.ndim < 1 or arr.shape[0] == 0:
        raise ValueError("data must have at least one row")
    confidence = _check_confidence(confidence)
    idx = resample_indices(arr.shape[0], n_resamples, seed)
    if vectorized:
        reps = np.asarray(statistic(arr[idx]), dtype=np.float64)
        if reps.shape != (idx.shape[0],):
            raise ValueError(
                f"vectorized statistic must return shape ({idx.shape[0]},), got {reps.shape}"
            )
    else:
        reps = np.fromiter((float(statistic(arr[i])) for i in idx), np.float64, idx.shape[0])
    low, high = percentile_interval(reps, confidence)
    return float(low), float(high)


def paired_bootstrap_means(
    values: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.90,
    seed: Seed = 0,
) -> BootstrapMeans:
    """Paired percentile bootstrap of column means (THumB Table 2, Kasai et al. 2022; Koehn 2004).

    ``values``: units x columns (e.g. images x systems), finite. Every resample draws
    units with replacement and uses the SAME drawn units for every column, so
    differences between columns are resampled consistently. Returns
    ``BootstrapMeans(mean, low, high)``, arrays of shape (columns,): the column means
    and the percentile interval; the default 0.90 gives the 5th/95th percentiles.
    """
    arr = _finite(values, "values")
    if arr.ndim != 2:
        raise ValueError(
            f"values must be 2-D (units x columns), got shape {arr.shape}; "
            "use values[:, None] for a single column"
        )
    confidence = _check_confidence(confidence)
    n = arr.shape[0]
    counts = resample_counts(n, n_resamples, seed).astype(np.float64)
    reps = counts @ arr / n  # (n_resamples, columns)
    low, high = percentile_interval(reps, confidence, axis=0)
    return BootstrapMeans(arr.mean(axis=0), low, high)


def cluster_bootstrap_mean(
    values: ArrayLike,
    clusters: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> MeanInterval:
    """Cluster (block) bootstrap of a mean (Davison & Hinkley 1997, section 3.8): resample clusters.

    ``values``: 1-D observations; ``clusters``: same-length labels (e.g. image ids).
    The G distinct labels, in sorted order, are drawn with replacement
    (``resample_indices(G, n_resamples, seed)``); a resample's mean is the mean over
    all observations of the drawn clusters (sum of drawn cluster sums / sum of drawn
    cluster sizes). Returns ``MeanInterval(mean, low, high)`` with the plain mean of
    ``values`` and the percentile interval.
    """
    vals = _finite(values, "values")
    if vals.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {vals.shape}")
    labels = np.asarray(clusters)
    if labels.ndim != 1:
        raise ValueError(f"clusters must be 1-D, got shape {labels.shape}")
    if labels.shape[0] != vals.shape[0]:
        raise ValueError(
            f"values and clusters have different lengths ({vals.shape[0]} and {labels.shape[0]})"
        )
    if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
        raise ValueError("clusters contain NaN or infinity")
    try:
        _, inverse = np.unique(labels, return_inverse=True)
    except TypeError as exc:
        raise ValueError(f"cluster labels cannot be sorted: {exc}") from exc
    confidence = _check_confidence(confidence)
    n_clusters = int(inverse.max()) + 1
    sums = np.bincount(inverse, weights=vals, minlength=n_clusters)
    sizes = np.bincount(inverse, minlength=n_clusters).astype(np.float64)
    counts = resample_counts(n_clusters, n_resamples, seed).astype(np.float64)
    reps = (counts @ sums) / (counts @ sizes)
    low, high = percentile_interval(reps, confidence)
    return MeanInterval(float(vals.mean()), float(low), float(high))
