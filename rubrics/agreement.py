"""Inter-rater agreement and correlation statistics (pure numpy; no Django).

Public statistics (each returns a Python ``float``):

- :func:`cohen_kappa` -- Cohen's kappa, unweighted, linear or quadratic weights.
- :func:`fleiss_kappa` -- Fleiss' kappa for a fixed number of raters per item.
- :func:`kendall_w` -- Kendall's coefficient of concordance W with tie correction.
- :func:`kendall_tau` -- Kendall's tau-b or Stuart's tau-c.
- :func:`krippendorff_alpha` -- Krippendorff's alpha (nominal, ordinal, interval), NaN = missing.
- :func:`pearson`, :func:`spearman` -- product-moment and rank correlation.

Building blocks for small-integer ratings (ratings on a 1-5 scale reduce to small
contingency tables, so these run in O(n + k^2) instead of O(n^2)):

- :func:`encode_categories` -- labels to integer codes ``0..k-1``.
- :func:`contingency_table` / :func:`batched_contingency_tables`.
- :func:`kendall_tau_from_table` / :func:`batched_kendall_tau_from_tables`.
- :func:`category_counts` / :func:`batched_category_counts` (items x categories counts).
- :func:`fleiss_kappa_from_counts` / :func:`batched_fleiss_kappa_from_counts`, and
  :func:`batched_fleiss_kappa_from_codes` (no count matrix; fastest for few raters).
- :func:`batched_kendall_w_from_codes` (bincount-based midranks).
- :func:`batched_joint_counts` (m-way table of rating profiles).

The ``batched_*`` functions take arrays with any number of leading batch axes (for
example 100 virtual-rater repetitions) and return one value per batch element.
Example, VICR virtual raters (PROTOCOLS.md section 2) with ``codes`` of shape
(100, n_pairs, 3) holding the sorted ratings minus 1 (so X, Y, Z = codes[..., 0/1/2])::

    joint = batched_joint_counts(codes, 5)  # (100, 5, 5, 5): one bincount
    t_xy, t_xz, t_yz = joint.sum(axis=3), joint.sum(axis=2), joint.sum(axis=1)
    # "method A": the candidate repeated per reference rater, the references
    # concatenated; tabulating those flattened vectors = summing the pairwise tables.
    tau_x_yz = batched_kendall_tau_from_tables(t_xy + t_xz, "c")  # shape (100,)
    tau_y_xz = batched_kendall_tau_from_tables(t_xy.swapaxes(-1, -2) + t_yz, "c")
    tau_z_xy = batched_kendall_tau_from_tables((t_xz + t_yz).swapaxes(-1, -2), "c")
    w = batched_kendall_w_from_codes(codes, 5)  # shape (100,)
    kappa = batched_fleiss_kappa_from_codes(np.minimum(codes, 3), 4)  # 4 and 5 merged

Undefined statistics are never returned as NaN: when a statistic is 0/0 (a constant
rater, all ratings in one category, no pairable unit...) a ``ValueError`` says why.
A batched function raises if any batch element is undefined and names the first one.
Input checks shared with the other rubrics modules live in :mod:`rubrics.checks`.
"""

from typing import Literal

import numpy as np

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from numpy.typing import ArrayLike, NDArray

from rubrics import checks

__all__ = [
    "TauVariant",
    "Weights",
    "AlphaLevel",
    "encode_categories",
    "contingency_table",
    "batched_contingency_tables",
    "kendall_tau_from_table",
    "batched_kendall_tau_from_tables",
    "category_counts",
    "batched_category_counts",
    "fleiss_kappa_from_counts",
    "batched_fleiss_kappa_from_counts",
    "batched_fleiss_kappa_from_codes",
    "batched_kendall_w_from_codes",
    "batched_joint_counts",
    "cohen_kappa",
    "fleiss_kappa",
    "kendall_w",
    "kendall_tau",
    "krippendorff_alpha",
    "pearson",
    "spearman",
]

TauVariant = Literal["b", "c"]
Weights = Literal["linear", "quadratic"] | None
AlphaLevel = Literal["nominal", "ordinal", "interval"]

_TAU_VARIANTS = ("b", "c")
_KAPPA_WEIGHTS = (None, "linear", "quadratic")
_ALPHA_LEVELS = ("nominal", "ordinal", "interval")

# kendall_tau uses the contingency-table path when the table of distinct values has at
# most this many cells (always the case for ratings on small scales); otherwise it
# falls back to scipy.stats.kendalltau (O(n log n)).
_MAX_TABLE_CELLS = 1 << 18
# kendall_w uses the bincount fast path for integer-valued ratings spanning at most this
# many distinct values.
_MAX_W_FAST_RANGE = 4096


# ---------------------------------------------------------------------------
# Input validation helpers
# ---------------------------------------------------------------------------


def _finite_1d(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = checks.finite_array(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def _finite_pair(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    xa = _finite_1d(x, "x")
    ya = _finite_1d(y, "y")
    if xa.shape != ya.shape:
        raise ValueError(f"x and y have different lengths ({xa.size} and {ya.size})")
    if xa.size < 2:
        raise ValueError("need at least 2 observations")
    return xa, ya


def _check_constant(arr: NDArray[np.float64], name: str, what: str) -> None:
    if arr.min() == arr.max():
        raise ValueError(f"{what} is undefined: {name} is constant (zero variance)")


def _label_array(values: ArrayLike, name: str) -> NDArray[np.generic]:
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


def _check_codes(codes: ArrayLike, n_categories: int, name: str) -> NDArray[np.int64]:
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


def _count_array(counts: ArrayLike, name: str, min_ndim: int) -> NDArray[np.int64]:
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


def _first_bad(mask: NDArray[np.bool_]) -> str:
    if mask.ndim == 0:
        return ""
    return f" (first at batch index {tuple(int(i) for i in np.argwhere(mask)[0])})"


# ---------------------------------------------------------------------------
# Categories, contingency tables and counts
# ---------------------------------------------------------------------------


def encode_categories(
    values: ArrayLike, categories: ArrayLike | None = None
) -> tuple[NDArray[np.int64], NDArray[np.generic]]:
    """Map category labels to integer codes 0..k-1 (positions in the ordered category list).

    ``values`` may have any shape; the returned codes have the same shape. Without
    ``categories`` the categories are the sorted distinct values. With ``categories``
    (distinct labels, in the order that defines the scale) every value must be one of
    them. Returns ``(codes, categories)``. NaN and None are rejected (no missing values).
    """
    arr = _label_array(values, "values")
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
    xa = _label_array(x, "x")
    ya = _label_array(y, "y")
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
    xc = _check_codes(x_codes, n_categories, "x_codes")
    yc = _check_codes(y_codes, n_categories, "y_codes")
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
    arr = _label_array(ratings, "ratings")
    if arr.ndim != 2:
        raise ValueError(f"ratings must be 2-D (items x raters), got shape {arr.shape}")
    codes, cats = encode_categories(arr, categories)
    return batched_category_counts(codes, int(cats.size))


def batched_category_counts(codes: ArrayLike, n_categories: int) -> NDArray[np.int64]:
    """Per-item category counts of integer codes, batched: (..., items, raters) -> (..., items, k).

    ``codes`` values must lie in ``[0, n_categories)``; ``out[..., i, c]`` is the number
    of raters who put item i in category c.
    """
    arr = _check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    k = int(n_categories)
    lead = arr.shape[:-1]  # (..., items)
    n_rows = int(np.prod(lead, dtype=np.int64))
    keys = (np.arange(n_rows, dtype=np.int64) * k).reshape(lead + (1,)) + arr
    return np.bincount(keys.ravel(), minlength=n_rows * k).reshape(lead + (k,))


# Rating profiles: with few raters and categories, (..., items, raters) codes reduce to
# counts of each profile (c_1, ..., c_m), k**m cells per batch element; W and Fleiss'
# kappa are then computed over the cells instead of the items.
_MAX_PROFILE_CELLS = 4096


def _profile_counts(flat: NDArray[np.int64], k: int) -> NDArray[np.int64]:
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


def _profile_grid(k: int, m: int) -> NDArray[np.int64]:
    """(k**m, m) array: row p lists the codes (c_1, ..., c_m) of profile p."""
    return np.stack(np.unravel_index(np.arange(k**m), (k,) * m), axis=-1).astype(np.int64)


def batched_joint_counts(codes: ArrayLike, n_categories: int) -> NDArray[np.int64]:
    """Rating-profile counts (m-way contingency table), batched: (..., n, m) -> (..., k, ..., k).

    ``out[..., c_1, ..., c_m]`` is the number of items whose m raters gave codes
    (c_1, ..., c_m); the result has shape ``(...,) + (k,) * m``. Summing out all but
    two rater axes gives their contingency table; only sensible when k**m is small.
    """
    arr = _check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    k = int(n_categories)
    n_items, m = arr.shape[-2], arr.shape[-1]
    if k**m > 1 << 24:
        raise ValueError(f"k**m = {k}**{m} profile cells is too many for a joint table")
    batch_shape = arr.shape[:-2]
    n_batch = int(np.prod(batch_shape, dtype=np.int64))
    joint = _profile_counts(arr.reshape(n_batch, n_items, m), k)
    return joint.reshape(batch_shape + (k,) * m)


# ---------------------------------------------------------------------------
# Kendall's tau
# ---------------------------------------------------------------------------


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
    t = _count_array(tables, "tables", min_ndim=2)
    n = t.sum(axis=(-2, -1))
    if np.any(n < 2):
        raise ValueError("Kendall tau needs at least 2 observations" + _first_bad(n < 2))
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
                "Kendall tau-b is undefined: one variable is constant" + _first_bad(bad)
            )
        return s / np.sqrt(x_pairs.astype(np.float64) * y_pairs.astype(np.float64))
    m = np.minimum((t.sum(axis=-1) > 0).sum(axis=-1), (t.sum(axis=-2) > 0).sum(axis=-1))
    bad = m < 2
    if np.any(bad):
        raise ValueError("Kendall tau-c is undefined: one variable is constant" + _first_bad(bad))
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
    xa, ya = _finite_pair(x, y)
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


# ---------------------------------------------------------------------------
# Fleiss' kappa and Cohen's kappa
# ---------------------------------------------------------------------------


def batched_fleiss_kappa_from_counts(counts: ArrayLike) -> NDArray[np.float64]:
    """Fleiss' kappa (Fleiss 1971) from count matrices (..., items, categories), batched.

    ``counts[..., i, j]`` = number of raters who assigned item i to category j. Within a
    batch element every item must have the same number of ratings n >= 2. Raises
    ValueError when all ratings of a batch element fall in one category (P_e = 1).
    """
    c = _count_array(counts, "counts", min_ndim=2)
    # einsum: much faster than .sum(axis=-1) over a short last axis
    per_item = np.einsum("...ik->...i", c)
    n = per_item[..., 0]
    if np.any(per_item != n[..., None]):
        raise ValueError("every item must have the same number of ratings")
    if np.any(n < 2):
        raise ValueError("Fleiss' kappa needs at least 2 ratings per item")
    n_items = c.shape[-2]
    totals = np.einsum("...ik->...k", c)
    single = (totals > 0).sum(axis=-1) == 1
    if np.any(single):
        raise ValueError(
            "Fleiss' kappa is undefined: all ratings fall in one category (expected agreement 1)"
            + _first_bad(single)
        )
    nf = n.astype(np.float64)
    # P_i = (sum_j n_ij^2 - n) / (n (n - 1)); P_bar = mean_i P_i
    sq = np.einsum("...ik,...ik->...", c, c).astype(np.float64)
    p_bar = (sq - n_items * nf) / (n_items * nf * (nf - 1))
    p_cat = totals / (n_items * nf)[..., None]
    p_e = (p_cat * p_cat).sum(axis=-1)
    return (p_bar - p_e) / (1.0 - p_e)


def batched_fleiss_kappa_from_codes(codes: ArrayLike, n_categories: int) -> NDArray[np.float64]:
    """Fleiss' kappa (Fleiss 1971) from integer codes (..., items, raters), batched.

    Equal to ``batched_fleiss_kappa_from_counts(batched_category_counts(codes, k))``
    but faster for few raters: per-item agreement comes from pairwise equality of the
    raters' codes (sum_j n_ij^2 = m + 2 * agreeing rater pairs), counted once per
    rating profile when k**m <= 4096. Collapse categories before calling (e.g.
    ``np.minimum(codes, 3)`` merges codes 3 and 4).
    """
    arr = _check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    n_items, m = arr.shape[-2], arr.shape[-1]
    if m < 2:
        raise ValueError("Fleiss' kappa needs at least 2 ratings per item")
    k = int(n_categories)
    batch_shape = arr.shape[:-2]
    if k**m <= _MAX_PROFILE_CELLS:
        # one bincount of rating profiles; agreement and marginals per profile cell
        n_batch = int(np.prod(batch_shape, dtype=np.int64))
        joint = _profile_counts(arr.reshape(n_batch, n_items, m), k)  # (b, k**m)
        grid = _profile_grid(k, m)  # (k**m, m)
        pairs_per_cell = sum(
            (grid[:, j] == grid[:, j2]).astype(np.int64) for j in range(m) for j2 in range(j + 1, m)
        )
        agreeing = (joint @ pairs_per_cell).reshape(batch_shape)
        in_cat = (grid[:, :, None] == np.arange(k)).sum(axis=1)  # (k**m, k) ratings in c
        totals = (joint @ in_cat).reshape(batch_shape + (k,))
    elif m > 8:
        return batched_fleiss_kappa_from_counts(batched_category_counts(arr, n_categories))
    else:
        agreeing = np.zeros(batch_shape, dtype=np.int64)
        for j in range(m):
            for j2 in range(j + 1, m):
                agreeing += np.count_nonzero(arr[..., j] == arr[..., j2], axis=-1)
        totals = np.stack(
            [np.count_nonzero(arr == c, axis=(-2, -1)) for c in range(k)], axis=-1
        )  # (..., k)
    single = (totals > 0).sum(axis=-1) == 1
    if np.any(single):
        raise ValueError(
            "Fleiss' kappa is undefined: all ratings fall in one category (expected agreement 1)"
            + _first_bad(single)
        )
    p_bar = 2.0 * agreeing / (n_items * m * (m - 1))
    p_cat = totals / float(n_items * m)
    p_e = (p_cat * p_cat).sum(axis=-1)
    return (p_bar - p_e) / (1.0 - p_e)


def fleiss_kappa_from_counts(counts: ArrayLike) -> float:
    """Fleiss' kappa (Fleiss 1971) from an items x categories count matrix.

    Same as ``statsmodels.stats.inter_rater.fleiss_kappa(counts, method="fleiss")``.
    """
    arr = np.asarray(counts)
    if arr.ndim != 2:
        raise ValueError(f"counts must be 2-D (items x categories), got shape {arr.shape}")
    return float(batched_fleiss_kappa_from_counts(arr))


def fleiss_kappa(ratings: ArrayLike, categories: ArrayLike | None = None) -> float:
    """Fleiss' kappa (Fleiss 1971) of an items x raters array of category labels.

    Every item must have the same number (>= 2) of ratings; no missing values.
    ``categories`` (optional) lists the allowed labels: a label outside it raises
    ValueError; unused categories do not change kappa.
    """
    arr = _label_array(ratings, "ratings")
    if arr.ndim != 2:
        raise ValueError(f"ratings must be 2-D (items x raters), got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError("Fleiss' kappa needs at least 2 raters (columns)")
    return fleiss_kappa_from_counts(category_counts(arr, categories))


def cohen_kappa(
    a: ArrayLike,
    b: ArrayLike,
    weights: Weights = None,
    *,
    categories: ArrayLike | None = None,
) -> float:
    """Cohen's kappa (Cohen 1960) or weighted kappa (Cohen 1968) of two raters' labels.

    ``weights``: None (unweighted), "linear" (|i - j|, Cicchetti-Allison) or
    "quadratic" ((i - j)^2, Fleiss-Cohen), where i, j are positions 0..k-1 in the
    ordered category list, as in statsmodels ``cohens_kappa(wt=...)`` and scikit-learn.
    ``categories`` defaults to the sorted union of observed labels; pass the full scale
    (e.g. ``range(1, 6)``) so that an unused level still counts in weighted distances.
    kappa = 1 - sum(w * observed) / sum(w * expected). Raises ValueError when both
    raters use one and the same category throughout (expected disagreement 0).
    """
    if weights not in _KAPPA_WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; expected None, 'linear' or 'quadratic'")
    table = contingency_table(a, b, categories).astype(np.float64)
    k = table.shape[0]
    idx = np.arange(k, dtype=np.float64)
    diff = idx[:, None] - idx[None, :]
    if weights is None:
        w = (diff != 0).astype(np.float64)
    elif weights == "linear":
        w = np.abs(diff)
    else:
        w = diff * diff
    n = table.sum()
    observed = (w * table).sum() / n
    expected = (w * np.outer(table.sum(axis=1), table.sum(axis=0))).sum() / (n * n)
    if expected == 0:
        raise ValueError(
            "Cohen's kappa is undefined: both raters use the same single category "
            "(expected disagreement is 0)"
        )
    return float(1.0 - observed / expected)


# ---------------------------------------------------------------------------
# Ranks, Kendall's W, Pearson, Spearman
# ---------------------------------------------------------------------------


def _midranks(values: NDArray[np.float64]) -> tuple[NDArray[np.float64], int]:
    """Midranks (1-based, ties averaged) of a 1-D array and the tie sum sum(t^3 - t)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts).astype(np.float64)
    mid = upper - (counts - 1) / 2.0
    return mid[inverse], int((counts**3 - counts).sum())


def batched_kendall_w_from_codes(codes: ArrayLike, n_categories: int) -> NDArray[np.float64]:
    """Kendall's W with tie correction (Kendall & Babington Smith 1939) from integer codes, batched.

    ``codes``: integer array ``(..., n_items, m_raters)`` with values in
    ``[0, n_categories)``; each rater's column is ranked over the items with midranks
    computed by bincount (O(n + k)); when k**m <= 4096 items are grouped by rating
    profile first (one bincount). W = 12 S / (m^2 (n^3 - n) - m sum_T) with
    sum_T = sum over raters and tie groups of t^3 - t. Returns one W per batch element.
    Raises ValueError when every rater is constant (W is 0/0).
    """
    arr = _check_codes(codes, n_categories, "codes")
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
    if k**m <= _MAX_PROFILE_CELLS:
        # One bincount of rating profiles (c_1..c_m); items sharing a profile share their
        # rank sum, so S = sum over profiles of count * (R_profile - mean)^2.
        joint = _profile_counts(flat, k)  # (b, k**m)
        grid = _profile_grid(k, m)  # (k**m, m)
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
            + _first_bad(bad.reshape(batch_shape))
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
        ranks, t = _midranks(arr[:, j])
        rank_sums += ranks
        ties += t
    denom = m * m * float(n**3 - n) - m * float(ties)
    if denom <= 0:
        raise ValueError("Kendall's W is undefined: every rater gives all items the same rating")
    dev = rank_sums - m * (n + 1) / 2.0
    return float(12.0 * (dev @ dev) / denom)


def _pearson_checked(x: NDArray[np.float64], y: NDArray[np.float64], what: str) -> float:
    _check_constant(x, "x", what)
    _check_constant(y, "y", what)
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
    xa, ya = _finite_pair(x, y)
    return _pearson_checked(xa, ya, "Pearson's r")


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation rho: Pearson's r of midranks (as scipy.stats.spearmanr).

    Raises ValueError for fewer than 2 pairs, non-finite values or a constant variable.
    """
    xa, ya = _finite_pair(x, y)
    _check_constant(xa, "x", "Spearman's rho")
    _check_constant(ya, "y", "Spearman's rho")
    return _pearson_checked(_midranks(xa)[0], _midranks(ya)[0], "Spearman's rho")


# ---------------------------------------------------------------------------
# Krippendorff's alpha
# ---------------------------------------------------------------------------


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
