"""Input checks shared by the agreement statistics (messages name the argument)."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks


def finite_1d(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = checks.finite_array(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def finite_pair(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    xa = finite_1d(x, "x")
    ya = finite_1d(y, "y")
    if xa.shape != ya.shape:
        raise ValueError(f"x and y have different lengths ({xa.size} and {ya.size})")
    if xa.size < 2:
        raise ValueError("need at least 2 observations")
    return xa, ya


def check_constant(arr: NDArray[np.float64], name: str, what: str) -> None:
    if arr.min() == arr.max():
        raise ValueError(f"{what} is undefined: {name} is constant (zero variance)")


def label_array(values: ArrayLike, name: str) -> NDArray[np.generic]:
    arr = np.asarray(values)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity; missing ratings are not supported")
    if arr.dtype.kind == "O":
        for v in arr.ravel():
            if v is None or (isinstance(v, float) and not np.isfinite(v)):
                raise ValueError(f"{name} contains a missing value ({v!r})")
    return arr


def check_codes(codes: ArrayLike, n_categories: int, name: str) -> NDArray[np.int64]:
    n_categories = checks.integer(n_categories, "n_categories")
    arr = np.asarray(codes)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array of codes, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n_categories:
        raise ValueError(
            f"{name} must lie in [0, {n_categories - 1}] (n_categories={n_categories}); "
            f"found values in [{lo}, {hi}]"
        )
    return arr.astype(np.int64, copy=False)


def count_array(counts: ArrayLike, name: str, min_ndim: int) -> NDArray[np.int64]:
    raw = np.asarray(counts)
    if raw.dtype.kind in "iu":  # fast path: no float round trip
        arr_i = raw.astype(np.int64, copy=False)
        if arr_i.size == 0:
            raise ValueError(f"{name} is empty")
    else:
        arr = checks.finite_array(raw, name)
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold whole-number counts")
        arr_i = arr.astype(np.int64)
    if arr_i.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {arr_i.shape}"
        )
    if arr_i.min() < 0:
        raise ValueError(f"{name} contains negative counts")
    return arr_i


def first_bad(mask: NDArray[np.bool_]) -> str:
    if mask.ndim == 0:
        return ""
    return f" (first at batch index {tuple(int(i) for i in np.argwhere(mask)[0])})"
