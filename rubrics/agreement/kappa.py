"""Fleiss' kappa (many raters per item) and Cohen's kappa (two raters)."""

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics.agreement import profiles
from rubrics.agreement.inputs import check_codes, count_array, first_bad, label_array
from rubrics.agreement.tables import batched_category_counts, category_counts, contingency_table

Weights = Literal["linear", "quadratic"] | None

_KAPPA_WEIGHTS = (None, "linear", "quadratic")


def batched_fleiss_kappa_from_counts(counts: ArrayLike) -> NDArray[np.float64]:
    """Fleiss' kappa (Fleiss 1971) from count matrices (..., items, categories), batched.

    ``counts[..., i, j]`` = number of raters who assigned item i to category j. Within a
    batch element every item must have the same number of ratings n >= 2. Raises
    ValueError when all ratings of a batch element fall in one category (P_e = 1).
    """
    c = count_array(counts, "counts", min_ndim=2)
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
            + first_bad(single)
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
    arr = check_codes(codes, n_categories, "codes")
    if arr.ndim < 2:
        raise ValueError(f"codes must be at least 2-D (items x raters), got shape {arr.shape}")
    n_items, m = arr.shape[-2], arr.shape[-1]
    if m < 2:
        raise ValueError("Fleiss' kappa needs at least 2 ratings per item")
    k = int(n_categories)
    batch_shape = arr.shape[:-2]
    if k**m <= profiles.MAX_PROFILE_CELLS:
        # one bincount of rating profiles; agreement and marginals per profile cell
        n_batch = int(np.prod(batch_shape, dtype=np.int64))
        joint = profiles.profile_counts(arr.reshape(n_batch, n_items, m), k)  # (b, k**m)
        grid = profiles.profile_grid(k, m)  # (k**m, m)
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
            + first_bad(single)
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
    arr = label_array(ratings, "ratings")
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
