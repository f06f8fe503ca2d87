"""Bootstrap resampling and random half-splits (pure numpy; no Django).

Every random function takes ``seed``: an ``int`` (a fresh
``numpy.random.default_rng(seed)`` is made, so the same int always gives the same
result) or a ``numpy.random.Generator`` (used and advanced in place, for callers that
chain several draws from one stream).

The resampling functions share one stream convention: resample ``r`` draws the units
``resample_indices(n, n_resamples, seed)[r]``. :func:`resample_counts`,
:func:`paired_bootstrap_means`, :func:`cluster_bootstrap_mean`,
:func:`paired_cluster_bootstrap_means` and :func:`percentile_bootstrap` use exactly
those draws, so, for the same int seed, their results agree with each other and with a
hand-written loop over the indices.

This module is the one bootstrap of ``rubrics``: the THumB report
(``rubrics.thumb.report``, paired over images) and the HUMANr report
(``rubrics.humanr.report``, clustered by image, paired over systems) both call
:func:`paired_cluster_bootstrap_means`. The three mean bootstraps share one
computation: per-unit sums and sizes, replicate = (counts @ sums) / (counts @ sizes).

Intervals are percentile intervals (Efron & Tibshirani 1993, section 13.3): the
``100 (1 - confidence) / 2`` and ``100 (1 + confidence) / 2`` percentiles of the
bootstrap replicates (:func:`percentile_levels`), with numpy's default linear
interpolation. ``confidence=0.90`` gives the 5th and 95th percentiles used by THumB
(Kasai et al. 2022, Table 2, paired bootstrap after Koehn 2004).

Means are computed from an ``n_resamples x n`` matrix of resample counts (a matrix
product), never by a Python loop over resamples.

Input checks come from :mod:`rubrics.checks` (ValueError instead of NaN).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks

__all__ = [
    "Seed",
    "BootstrapMeans",
    "MeanInterval",
    "as_generator",
    "resample_indices",
    "resample_counts",
    "subsample_indices",
    "percentile_levels",
    "percentile_interval",
    "percentile_bootstrap",
    "paired_bootstrap_means",
    "cluster_bootstrap_mean",
    "paired_cluster_bootstrap_means",
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
    n = checks.integer(n, "n")
    n_resamples = checks.integer(n_resamples, "n_resamples")
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
    n = checks.integer(n, "n")
    size = checks.integer(size, "size")
    n_resamples = checks.integer(n_resamples, "n_resamples")
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
    n_splits = checks.integer(n_splits, "n_splits")
    rng = as_generator(seed)
    order = np.argsort(rng.random((n_splits, n)), axis=1)
    masks = np.zeros((n_splits, n), dtype=bool)
    np.put_along_axis(masks, order[:, : n // 2], True, axis=1)
    return masks


# ---------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------


def z_value(alpha: float) -> float:
    """The standard normal quantile ``1 - alpha / 2``: the half-width of a two-sided CLT
    interval in standard errors (``alpha`` 0.05: 1.96), beside the bootstrap's
    percentiles."""
    from scipy.special import ndtri  # scipy loaded only when an interval is made

    return float(ndtri(1.0 - checks.confidence(alpha, "alpha") / 2.0))


def percentile_levels(confidence: float) -> list[float]:
    """The two percentiles (in percent) of a ``confidence`` interval: 100 (1 -+ confidence) / 2.

    ``percentile_levels(0.90)`` is ``[5, 95]`` up to float rounding (the low end is
    4.999999999999999). Every interval of this module is taken at exactly these
    levels with ``numpy.percentile``, the computation the reports have always used, so
    their intervals stay bit-for-bit the same; the reports record the levels as they are.
    """
    confidence = checks.confidence(confidence)
    return [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2]


def percentile_interval(
    replicates: ArrayLike, confidence: float = 0.95, axis: int = 0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile interval (Efron & Tibshirani 1993, 13.3) of bootstrap replicates along ``axis``.

    Returns ``(low, high)``: the :func:`percentile_levels` percentiles (linear
    interpolation), as arrays with ``axis`` removed (0-d for 1-D input).
    Raises ValueError for non-finite replicates (a statistic undefined on a resample).
    """
    levels = percentile_levels(confidence)
    reps = checks.finite_array(replicates, "replicates")
    low, high = np.percentile(reps, levels, axis=axis)
    return low, high


def _defined_percentile_interval(
    replicates: NDArray[np.float64], confidence: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-column percentile interval of (n_resamples, columns) replicates, skipping NaN.

    A column's interval uses only its defined (non-NaN) replicates; it is NaN when the
    column has none. Same numbers as ``numpy.nanpercentile`` per column.
    """
    levels = percentile_levels(confidence)
    defined = ~np.isnan(replicates)
    if defined.all():
        low, high = np.percentile(replicates, levels, axis=0)
        return low, high
    low = np.full(replicates.shape[1], np.nan)
    high = np.full(replicates.shape[1], np.nan)
    for j in np.flatnonzero(defined.any(axis=0)):
        low[j], high[j] = np.percentile(replicates[defined[:, j], j], levels)
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
    confidence = checks.confidence(confidence)
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


# ---------------------------------------------------------------------------
# Bootstraps of means: one computation
# ---------------------------------------------------------------------------


def _mean_replicates(
    sums: NDArray[np.float64],
    sizes: NDArray[np.float64] | None,
    n_resamples: int,
    seed: Seed,
) -> NDArray[np.float64]:
    """Bootstrap replicates of (per-column) means from per-unit sums and sizes.

    ``sums``: (units,) or (units, columns). Resample r's replicate is
    ``counts[r] @ sums / counts[r] @ sizes`` with ``counts = resample_counts(units,
    n_resamples, seed)``; ``sizes=None`` means one observation per unit (divide by the
    number of units). Shape (n_resamples,) or (n_resamples, columns); NaN where a
    resample draws no observation of a column (0 / 0).
    """
    n = sums.shape[0]
    counts = resample_counts(n, n_resamples, seed).astype(np.float64)
    if sizes is None:
        return counts @ sums / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts @ sums) / (counts @ sizes)


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
    With missing cells, use :func:`paired_cluster_bootstrap_means` (sizes 0 and 1).
    """
    arr = checks.finite_array(values, "values")
    if arr.ndim != 2:
        raise ValueError(
            f"values must be 2-D (units x columns), got shape {arr.shape}; "
            "use values[:, None] for a single column"
        )
    confidence = checks.confidence(confidence)
    reps = _mean_replicates(arr, None, n_resamples, seed)  # (n_resamples, columns)
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
    ``values`` and the percentile interval. For several columns (e.g. systems) drawn
    with the same clusters, see :func:`paired_cluster_bootstrap_means`.
    """
    vals = checks.finite_array(values, "values")
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
    confidence = checks.confidence(confidence)
    n_clusters = int(inverse.max()) + 1
    sums = np.bincount(inverse, weights=vals, minlength=n_clusters)
    sizes = np.bincount(inverse, minlength=n_clusters).astype(np.float64)
    reps = _mean_replicates(sums, sizes, n_resamples, seed)  # every size >= 1: finite
    low, high = percentile_interval(reps, confidence)
    return MeanInterval(float(vals.mean()), float(low), float(high))


def paired_cluster_bootstrap_means(
    sums: ArrayLike,
    sizes: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> BootstrapMeans:
    """Paired cluster bootstrap of column means with missing cells (THumB and HUMANr reports).

    ``sums[i, j]`` and ``sizes[i, j]``: the sum and the number (or total weight) of
    column j's observations in unit i, both (units, columns); ``sizes`` >= 0 and
    ``sums`` 0 where ``sizes`` is 0 (unit i has nothing for column j). Units are
    clusters (e.g. images); columns are e.g. systems. Every resample draws units with
    replacement (``resample_counts(units, n_resamples, seed)``) and uses the SAME
    drawn units for every column (paired); column j's replicate is the mean over all
    its observations in the drawn units, ``counts @ sums[:, j] / counts @ sizes[:, j]``.

    Special cases: all sizes 1 is :func:`paired_bootstrap_means`; one column is
    :func:`cluster_bootstrap_mean` with the per-cluster sums and sizes (same draws,
    same intervals). With sizes 0/1 it is the nan-aware paired bootstrap of THumB
    (a system's mean over the drawn images where it has a caption).

    Missing cells are expected, so undefined values are NaN rather than errors: a
    resample that draws no observation of a column is left out of that column's
    percentiles; a column's ``low``/``high`` are NaN when no resample defines it, its
    ``mean`` (sum of sums / sum of sizes) NaN when its sizes are all 0. Returns
    ``BootstrapMeans(mean, low, high)``, arrays of shape (columns,).
    """
    s = checks.finite_array(sums, "sums")
    w = checks.finite_array(sizes, "sizes")
    if s.ndim != 2:
        raise ValueError(f"sums must be 2-D (units x columns), got shape {s.shape}")
    if w.shape != s.shape:
        raise ValueError(f"sizes must have the shape of sums {s.shape}, got {w.shape}")
    if (w < 0).any():
        raise ValueError("sizes must be >= 0")
    if (s[w == 0] != 0).any():
        raise ValueError("sums must be 0 where sizes are 0 (a unit with no observation)")
    confidence = checks.confidence(confidence)
    reps = _mean_replicates(s, w, n_resamples, seed)
    low, high = _defined_percentile_interval(reps, confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s.sum(axis=0) / w.sum(axis=0)
    return BootstrapMeans(mean, low, high)
