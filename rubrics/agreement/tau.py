"""Kendall's tau-b and Stuart's tau-c, from raw values or contingency tables."""

from typing import Literal

import numpy as np

# scipy (about 60 MB) is imported in the function that uses it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from numpy.typing import ArrayLike, NDArray

from rubrics.agreement.inputs import count_array, finite_pair, first_bad

TauVariant = Literal["b", "c"]

_TAU_VARIANTS = ("b", "c")

# kendall_tau uses the contingency-table path when the table of distinct values has at
# most this many cells (always the case for ratings on small scales); otherwise it
# falls back to scipy.stats.kendalltau (O(n log n)).
_MAX_TABLE_CELLS = 1 << 18


def _concordance(tables: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Concordant and discordant pair counts of contingency tables (..., r, c) in O(r c)."""
    # q[i, j] = sum of t[i', j'] over i' >= i, j' >= j
    q = tables[..., ::-1, ::-1].cumsum(axis=-2).cumsum(axis=-1)[..., ::-1, ::-1]
    below_right = np.zeros_like(tables)
    below_right[..., :-1, :-1] = q[..., 1:, 1:]
    # p[i, j] = sum of t[i', j'] over i' >= i, j' <= j
    p = tables[..., ::-1, :].cumsum(axis=-2)[..., ::-1, :].cumsum(axis=-1)
    below_left = np.zeros_like(tables)
    below_left[..., :-1, 1:] = p[..., 1:, :-1]
    concordant = (tables * below_right).sum(axis=(-2, -1))
    discordant = (tables * below_left).sum(axis=(-2, -1))
    return concordant, discordant


def _check_variant(variant: str) -> None:
    if variant not in _TAU_VARIANTS:
        raise ValueError(f"unknown Kendall tau variant {variant!r}; expected 'b' or 'c'")


def batched_kendall_tau_from_tables(
    tables: ArrayLike, variant: TauVariant = "b"
) -> NDArray[np.float64]:
    """Kendall tau-b / Stuart tau-c of contingency tables (..., r, c), batched (Agresti 2010, 7.1).

    ``tables[..., i, j]`` counts observations with the i-th smallest x value and the
    j-th smallest y value (rows and columns must be in increasing order). Pair counts
    use cumulative sums, O(r c) per table. tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2));
    tau-c = 2 (C - D) / (n^2 (m - 1) / m) with m = min(non-empty rows, non-empty
    columns), i.e. the number of distinct observed values as in
    ``scipy.stats.kendalltau(variant="c")``. Returns an array of the batch shape.
    """
    _check_variant(variant)
    t = count_array(tables, "tables", min_ndim=2)
    n = t.sum(axis=(-2, -1))
    if np.any(n < 2):
        raise ValueError("Kendall tau needs at least 2 observations" + first_bad(n < 2))
    concordant, discordant = _concordance(t)
    s = (concordant - discordant).astype(np.float64)
    if variant == "b":
        rows = t.sum(axis=-1)
        cols = t.sum(axis=-2)
        n0 = n * (n - 1) // 2
        x_pairs = n0 - (rows * (rows - 1) // 2).sum(axis=-1)  # pairs not tied on x
        y_pairs = n0 - (cols * (cols - 1) // 2).sum(axis=-1)  # pairs not tied on y
        bad = (x_pairs == 0) | (y_pairs == 0)
        if np.any(bad):
            raise ValueError(
                "Kendall tau-b is undefined: one variable is constant" + first_bad(bad)
            )
        return s / np.sqrt(x_pairs.astype(np.float64) * y_pairs.astype(np.float64))
    m = np.minimum((t.sum(axis=-1) > 0).sum(axis=-1), (t.sum(axis=-2) > 0).sum(axis=-1))
    bad = m < 2
    if np.any(bad):
        raise ValueError("Kendall tau-c is undefined: one variable is constant" + first_bad(bad))
    nf = n.astype(np.float64)
    return 2.0 * s / (nf * nf * (m - 1) / m)


def kendall_tau_from_table(table: ArrayLike, variant: TauVariant = "b") -> float:
    """Kendall tau-b or Stuart tau-c of one r x c contingency table (Agresti 2010, section 7.1).

    See :func:`batched_kendall_tau_from_tables` for the conventions.
    """
    arr = np.asarray(table)
    if arr.ndim != 2:
        raise ValueError(f"table must be 2-D, got shape {arr.shape}")
    return float(batched_kendall_tau_from_tables(arr, variant))


def kendall_tau(x: ArrayLike, y: ArrayLike, variant: TauVariant = "b") -> float:
    """Kendall's tau-b (Kendall 1945) or Stuart's tau-c (Stuart 1953), as scipy.stats.kendalltau.

    Data with few distinct values (ratings) go through an exact contingency-table count
    of concordant/discordant pairs, O(n + kx ky); real-valued data with many distinct
    values fall back to ``scipy.stats.kendalltau``. Raises ValueError when x or y is
    constant (the statistic is 0/0).
    """
    _check_variant(variant)
    xa, ya = finite_pair(x, y)
    xv, xi = np.unique(xa, return_inverse=True)
    yv, yi = np.unique(ya, return_inverse=True)
    if xv.size < 2 or yv.size < 2:
        raise ValueError(f"Kendall tau-{variant} is undefined: x or y is constant")
    kx, ky = int(xv.size), int(yv.size)
    if kx * ky <= _MAX_TABLE_CELLS:
        table = np.bincount(xi * ky + yi, minlength=kx * ky).reshape(kx, ky)
        return kendall_tau_from_table(table, variant)
    import scipy.stats

    return float(scipy.stats.kendalltau(xa, ya, variant=variant).statistic)
