"""Rating profiles: the m-way table of the codes m raters gave each item."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics.agreement.inputs import check_codes

# With few raters and categories, (..., items, raters) codes reduce to
# counts of each profile (c_1, ..., c_m), k**m cells per batch element; W and Fleiss'
# kappa are then computed over the cells instead of the items.
MAX_PROFILE_CELLS = 4096


def profile_counts(flat: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    """(b, n, m) codes -> (b, k**m) profile counts; profile index = sum_j c_j k^(m-1-j)."""
    n_batch, _, m = flat.shape
    cells = k**m
    keys = flat[..., 0] * k if m > 1 else flat[..., 0].copy()
    for j in range(1, m):
        keys += flat[..., j]
        if j < m - 1:
            keys *= k
    keys += (np.arange(n_batch, dtype=np.int64) * cells)[:, None]
    return np.bincount(keys.ravel(), minlength=n_batch * cells).reshape(n_batch, cells)


def profile_grid(k: int, m: int) -> NDArray[np.int64]:
    """(k**m, m) array: row p lists the codes (c_1, ..., c_m) of profile p."""
    return np.stack(np.unravel_index(np.arange(k**m), (k,) * m), axis=-1).astype(np.int64)


def batched_joint_counts(codes: ArrayLike, n_categories: int) -> NDArray[np.int64]:
    """Rating-profile counts (m-way contingency table), batched: (..., n, m) -> (..., k, ..., k).

    ``out[..., c_1, ..., c_m]`` is the number of items whose m raters gave codes
    (c_1, ..., c_m); the result has shape ``(...,) + (k,) * m``. Summing out all but
    two rater axes gives their contingency table; only sensible when k**m is small.
    """
    arr = check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    k = int(n_categories)
    n_items, m = arr.shape[-2], arr.shape[-1]
    if k**m > 1 << 24:
        raise ValueError(f"k**m = {k}**{m} profile cells is too many for a joint table")
    batch_shape = arr.shape[:-2]
    n_batch = int(np.prod(batch_shape, dtype=np.int64))
    joint = profile_counts(arr.reshape(n_batch, n_items, m), k)
    return joint.reshape(batch_shape + (k,) * m)
