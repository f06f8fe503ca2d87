"""Krippendorff's alpha (nominal, ordinal, interval) with missing values."""

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

AlphaLevel = Literal["nominal", "ordinal", "interval"]

_ALPHA_LEVELS = ("nominal", "ordinal", "interval")


def krippendorff_alpha(ratings: ArrayLike, level: AlphaLevel = "interval") -> float:
    """Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's alpha-reliability").

    ``ratings``: raters x units (coders in rows, as the ``krippendorff`` package), NaN =
    missing. Only pairable values (units with >= 2 values) count. ``level``:
    "nominal" (delta = [c != k]), "ordinal" (delta = (sum_{g=c..k} n_g - (n_c + n_k)/2)^2
    over the pairable value frequencies n_g) or "interval" (delta = (c - k)^2).
    alpha = 1 - (n - 1) sum o_ck delta_ck / sum n_c n_k delta_ck, computed in
    O(N log N) without a coincidence matrix (ordinal = interval on cumulative
    mid-frequencies). Raises ValueError when no unit is pairable or all pairable
    values are equal (expected disagreement 0).
    """
    if level not in _ALPHA_LEVELS:
        raise ValueError(f"unknown level {level!r}; expected 'nominal', 'ordinal' or 'interval'")
    values, units = _pairable(ratings)
    _, units = np.unique(units, return_inverse=True)  # 0..U-1 over pairable units
    m_u = np.bincount(units).astype(np.float64)
    n = float(values.size)
    distinct, codes, n_c = np.unique(values, return_inverse=True, return_counts=True)
    if distinct.size < 2:
        raise ValueError(
            "Krippendorff's alpha is undefined: all pairable values are equal "
            "(expected disagreement is 0)"
        )
    if level == "nominal":
        # n_uc for every (unit, value) pair present; sq[u] = sum_c n_uc^2
        keys, pair_counts = np.unique(units * distinct.size + codes, return_counts=True)
        sq = np.bincount(keys // distinct.size, weights=pair_counts.astype(np.float64) ** 2)
        observed = ((m_u * m_u - sq) / (m_u - 1)).sum()
        expected = (n * n - float((n_c.astype(np.float64) ** 2).sum())) / (n - 1)
        return float(1.0 - observed / expected)
    if level == "ordinal":
        nc = n_c.astype(np.float64)
        positions = np.cumsum(nc) - nc / 2.0  # sum_{g<c} n_g + n_c / 2
        x = positions[codes]
    else:
        x = values
    unit_means = np.bincount(units, weights=x) / m_u
    dev = x - unit_means[units]
    ss_u = np.bincount(units, weights=dev * dev)
    total_dev = x - x.mean()
    ss_total = float(total_dev @ total_dev)
    if ss_total == 0:
        raise ValueError("Krippendorff's alpha is undefined: expected disagreement is 0")
    observed = (m_u * ss_u / (m_u - 1)).sum()
    return float(1.0 - (n - 1) / n * observed / ss_total)


def _pairable(ratings: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The values of units with at least 2 of them, and the column (unit) of each."""
    try:
        arr = np.asarray(ratings, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ratings must be numeric (NaN for missing): {exc}") from exc
    if arr.ndim != 2:
        raise ValueError(f"ratings must be 2-D (raters x units), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("ratings is empty")
    if np.any(np.isinf(arr)):
        raise ValueError("ratings contain infinity (use NaN for missing values)")
    present = ~np.isnan(arr)
    per_unit = present.sum(axis=0)
    pairable_units = per_unit >= 2
    if not np.any(pairable_units):
        raise ValueError(
            "Krippendorff's alpha is undefined: no unit has at least 2 values (nothing pairable)"
        )
    unit_idx = np.broadcast_to(np.arange(arr.shape[1]), arr.shape)
    keep = present & pairable_units[None, :]
    values = arr[keep]
    units = unit_idx[keep]
    return values, units
