"""Pearson's r, Spearman's rho and the midranks they share with Kendall's W."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics.agreement.inputs import check_constant, finite_pair


def midranks(values: NDArray[np.float64]) -> tuple[NDArray[np.float64], int]:
    """Midranks (1-based, ties averaged) of a 1-D array and the tie sum sum(t^3 - t)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts).astype(np.float64)
    mid = upper - (counts - 1) / 2.0
    return mid[inverse], int((counts**3 - counts).sum())


def _pearson_checked(x: NDArray[np.float64], y: NDArray[np.float64], what: str) -> float:
    check_constant(x, "x", what)
    check_constant(y, "y", what)
    # Scale first so that sums cannot overflow, then centre.
    x = x / np.abs(x).max()
    y = y / np.abs(y).max()
    xm = x - x.mean()
    ym = y - y.mean()
    nx = np.linalg.norm(xm)
    ny = np.linalg.norm(ym)
    if nx == 0 or ny == 0:
        raise ValueError(f"{what} is undefined: zero variance after centring")
    return float(np.clip((xm / nx) @ (ym / ny), -1.0, 1.0))


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson product-moment correlation coefficient r (as scipy.stats.pearsonr).

    Raises ValueError for fewer than 2 pairs, non-finite values or a constant variable.
    """
    xa, ya = finite_pair(x, y)
    return _pearson_checked(xa, ya, "Pearson's r")


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation rho: Pearson's r of midranks (as scipy.stats.spearmanr).

    Raises ValueError for fewer than 2 pairs, non-finite values or a constant variable.
    """
    xa, ya = finite_pair(x, y)
    check_constant(xa, "x", "Spearman's rho")
    check_constant(ya, "y", "Spearman's rho")
    return _pearson_checked(midranks(xa)[0], midranks(ya)[0], "Spearman's rho")
