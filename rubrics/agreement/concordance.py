"""Kendall's coefficient of concordance W, with tie correction."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks
from rubrics.agreement import profiles
from rubrics.agreement.correlation import midranks
from rubrics.agreement.inputs import check_codes, first_bad

# kendall_w uses the bincount fast path for integer-valued ratings spanning at most this
# many distinct values.
_MAX_W_FAST_RANGE = 4096


def batched_kendall_w_from_codes(codes: ArrayLike, n_categories: int) -> NDArray[np.float64]:
    """Kendall's W with tie correction (Kendall & Babington Smith 1939) from integer codes, batched.

    ``codes``: integer array ``(..., n_items, m_raters)`` with values in
    ``[0, n_categories)``; each rater's column is ranked over the items with midranks
    computed by bincount (O(n + k)); when k**m <= 4096 items are grouped by rating
    profile first (one bincount). W = 12 S / (m^2 (n^3 - n) - m sum_T) with
    sum_T = sum over raters and tie groups of t^3 - t. Returns one W per batch element.
    Raises ValueError when every rater is constant (W is 0/0).
    """
    arr = check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    n_items, m = arr.shape[-2], arr.shape[-1]
    if n_items < 2:
        raise ValueError("Kendall's W needs at least 2 items")
    if m < 2:
        raise ValueError("Kendall's W needs at least 2 raters")
    k = int(n_categories)
    batch_shape = arr.shape[:-2]
    n_batch = int(np.prod(batch_shape, dtype=np.int64))
    flat = arr.reshape(n_batch, n_items, m)
    mean_rank_sum = m * (n_items + 1) / 2.0
    if k**m <= profiles.MAX_PROFILE_CELLS:
        # One bincount of rating profiles (c_1..c_m); items sharing a profile share their
        # rank sum, so S = sum over profiles of count * (R_profile - mean)^2.
        joint = profiles.profile_counts(flat, k)  # (b, k**m)
        grid = profiles.profile_grid(k, m)  # (k**m, m)
        onehot = grid[:, :, None] == np.arange(k)  # (k**m, m, k)
        # counts[b, j, c] = items rater j put in category c
        counts = np.einsum("bp,pjc->bjc", joint, onehot.astype(np.int64))
        below = np.cumsum(counts, axis=-1) - counts
        midrank = below + (counts + 1) / 2.0  # (b, m, k)
        profile_rank_sum = np.einsum("bjc,pjc->bp", midrank, onehot.astype(np.float64))
        dev = profile_rank_sum - mean_rank_sum
        s = np.einsum("bp,bp->b", joint.astype(np.float64), dev * dev)
    else:
        # counts[b, j, c] = number of items rater j put in category c (in batch element b);
        # key (b * m + j) * k + code indexes counts[b, j, code] in a flat array
        keys = (np.arange(n_batch * m, dtype=np.int64) * k).reshape(n_batch, 1, m) + flat
        keys = keys.ravel()
        counts = np.bincount(keys, minlength=n_batch * m * k).reshape(n_batch, m, k)
        below = np.cumsum(counts, axis=-1) - counts
        midrank = (below + (counts + 1) / 2.0).ravel()  # midrank of code c, rater j, batch b
        ranks = midrank[keys].reshape(n_batch, n_items, m)
        rank_sums = ranks[..., 0].copy()  # (b, n); column sums beat sum(axis=-1) for small m
        for j in range(1, m):
            rank_sums += ranks[..., j]
        dev = rank_sums - mean_rank_sum
        s = (dev * dev).sum(axis=-1)
    ties = (counts**3 - counts).sum(axis=(-2, -1)).astype(np.float64)
    denom = m * m * float(n_items**3 - n_items) - m * ties
    bad = denom <= 0
    if np.any(bad):
        raise ValueError(
            "Kendall's W is undefined: every rater gives all items the same rating"
            + first_bad(bad.reshape(batch_shape))
        )
    return (12.0 * s / denom).reshape(batch_shape)


def kendall_w(ratings: ArrayLike) -> float:
    """Kendall's coefficient of concordance W with tie correction (Kendall & Babington Smith 1939).

    ``ratings``: items x raters (n x m, n >= 2, m >= 2), finite numbers, no missing
    values. Each rater ranks the items (midranks for ties); with R_i the rank sum of
    item i and S = sum (R_i - mean R)^2, W = 12 S / (m^2 (n^3 - n) - m sum_T), sum_T =
    sum of t^3 - t over all tie groups of all raters. Integer ratings use the bincount
    fast path. Raises ValueError when every rater is constant (0/0).
    """
    arr = checks.finite_array(ratings, "ratings")
    if arr.ndim != 2:
        raise ValueError(f"ratings must be 2-D (items x raters), got shape {arr.shape}")
    n, m = arr.shape
    if n < 2:
        raise ValueError("Kendall's W needs at least 2 items")
    if m < 2:
        raise ValueError("Kendall's W needs at least 2 raters")
    lo, hi = arr.min(), arr.max()
    if np.all(arr == np.round(arr)) and hi - lo < _MAX_W_FAST_RANGE:
        codes = (arr - lo).astype(np.int64)
        return float(batched_kendall_w_from_codes(codes, int(hi - lo) + 1))
    rank_sums = np.zeros(n)
    ties = 0
    for j in range(m):
        ranks, t = midranks(arr[:, j])
        rank_sums += ranks
        ties += t
    denom = m * m * float(n**3 - n) - m * float(ties)
    if denom <= 0:
        raise ValueError("Kendall's W is undefined: every rater gives all items the same rating")
    dev = rank_sums - m * (n + 1) / 2.0
    return float(12.0 * (dev @ dev) / denom)
