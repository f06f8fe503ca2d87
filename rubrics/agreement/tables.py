"""Category codes, contingency tables and per-item category counts."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics.agreement.inputs import check_codes, label_array


def encode_categories(
    values: ArrayLike, categories: ArrayLike | None = None
) -> tuple[NDArray[np.int64], NDArray[np.generic]]:
    """Map category labels to integer codes 0..k-1 (positions in the ordered category list).

    ``values`` may have any shape; the returned codes have the same shape. Without
    ``categories`` the categories are the sorted distinct values. With ``categories``
    (distinct labels, in the order that defines the scale) every value must be one of
    them. Returns ``(codes, categories)``. NaN and None are rejected (no missing values).
    """
    arr = label_array(values, "values")
    try:
        if categories is None:
            cats, inverse = np.unique(arr.ravel(), return_inverse=True)
            return inverse.reshape(arr.shape).astype(np.int64), cats
        cats = np.asarray(categories)
        if cats.ndim != 1 or cats.size == 0:
            raise ValueError("categories must be a non-empty 1-D sequence")
        if cats.dtype.kind in "fc" and not np.all(np.isfinite(cats)):
            raise ValueError("categories contain NaN or infinity")
        order = np.argsort(cats, kind="stable")
        sorted_cats = cats[order]
        if np.any(sorted_cats[1:] == sorted_cats[:-1]):
            raise ValueError("categories contain duplicates")
        flat = arr.ravel()
        pos = np.searchsorted(sorted_cats, flat)
        pos_clipped = np.minimum(pos, cats.size - 1)
        found = (pos < cats.size) & (sorted_cats[pos_clipped] == flat)
    except TypeError as exc:  # e.g. comparing strings with numbers
        raise ValueError(f"values and categories cannot be compared: {exc}") from exc
    if not np.all(found):
        unknown = np.unique(flat[~found])[:5]
        raise ValueError(f"values not in categories: {unknown.tolist()}")
    return order[pos_clipped].reshape(arr.shape).astype(np.int64), cats


def contingency_table(
    x: ArrayLike, y: ArrayLike, categories: ArrayLike | None = None
) -> NDArray[np.int64]:
    """Square k x k cross-tabulation of two raters (rows = x, columns = y) over shared categories.

    ``categories`` defaults to the sorted union of the values of x and y; pass it to fix
    the scale (rows/columns follow its order, unused categories give zero rows/columns).
    """
    xa = label_array(x, "x")
    ya = label_array(y, "y")
    if xa.ndim != 1 or ya.ndim != 1:
        raise ValueError("x and y must be 1-D")
    if (xa.dtype.kind in "biufc") != (ya.dtype.kind in "biufc"):
        raise ValueError(f"x and y hold labels of different kinds ({xa.dtype}, {ya.dtype})")
    if xa.size != ya.size:
        raise ValueError(f"x and y have different lengths ({xa.size} and {ya.size})")
    try:
        both = np.concatenate([xa, ya])
    except TypeError as exc:
        raise ValueError(f"x and y hold incompatible labels: {exc}") from exc
    codes, cats = encode_categories(both, categories)
    return batched_contingency_tables(codes[: xa.size], codes[xa.size :], int(cats.size))


def batched_contingency_tables(
    x_codes: ArrayLike, y_codes: ArrayLike, n_categories: int
) -> NDArray[np.int64]:
    """Contingency tables of integer codes, batched over leading axes (bincount cross-tabulation).

    ``x_codes`` and ``y_codes``: integer arrays of the same shape ``(..., n)`` with
    values in ``[0, n_categories)``. Returns counts of shape ``(..., k, k)`` with
    ``table[..., i, j]`` = number of positions where x == i and y == j.
    """
    xc = check_codes(x_codes, n_categories, "x_codes")
    yc = check_codes(y_codes, n_categories, "y_codes")
    if xc.shape != yc.shape:
        raise ValueError(f"x_codes and y_codes have different shapes ({xc.shape}, {yc.shape})")
    if xc.ndim < 1:
        raise ValueError("codes must have at least 1 dimension")
    k = int(n_categories)
    batch_shape = xc.shape[:-1]
    n_batch = int(np.prod(batch_shape, dtype=np.int64))
    keys = xc * k
    keys += yc
    keys += (np.arange(n_batch, dtype=np.int64) * (k * k)).reshape(batch_shape + (1,))
    return np.bincount(keys.ravel(), minlength=n_batch * k * k).reshape(batch_shape + (k, k))


def category_counts(ratings: ArrayLike, categories: ArrayLike | None = None) -> NDArray[np.int64]:
    """Items x categories count matrix from an items x raters label array (Fleiss 1971 n_ij).

    Same result as ``statsmodels.stats.inter_rater.aggregate_raters`` (columns in
    category order; ``categories`` defaults to the sorted distinct labels).
    """
    arr = label_array(ratings, "ratings")
    if arr.ndim != 2:
        raise ValueError(f"ratings must be 2-D (items x raters), got shape {arr.shape}")
    codes, cats = encode_categories(arr, categories)
    return batched_category_counts(codes, int(cats.size))


def batched_category_counts(codes: ArrayLike, n_categories: int) -> NDArray[np.int64]:
    """Per-item category counts of integer codes, batched: (..., items, raters) -> (..., items, k).

    ``codes`` values must lie in ``[0, n_categories)``; ``out[..., i, c]`` is the number
    of raters who put item i in category c.
    """
    arr = check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    k = int(n_categories)
    lead = arr.shape[:-1]  # (..., items)
    n_rows = int(np.prod(lead, dtype=np.int64))
    keys = (np.arange(n_rows, dtype=np.int64) * k).reshape(lead + (1,)) + arr
    return np.bincount(keys.ravel(), minlength=n_rows * k).reshape(lead + (k,))
