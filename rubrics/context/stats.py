"""The context report's estimators: rater-clustered means, group differences, ordinal alpha.

Why rater-clustered: one rater gives many ratings, and a rater's ratings are not
independent (a lenient rater is lenient on every item). Treating the n ratings of G raters
as n independent draws understates the variance of a mean, most of all when few raters
give many ratings each, so intervals would be too narrow and a BLV-sighted difference
would look significant when it is one or two raters' habits. The intervals here therefore
use the cluster-robust (sandwich) variance with raters as clusters:

    var(mean) = G / (G - 1) * sum_r (sum_{i in r} (y_i - mean))^2 / n^2

(Liang and Zeger 1986; the G / (G - 1) factor is the small-sample correction of Stata's
``vce(cluster)`` and statsmodels' ``cov_type="cluster"`` for a regression on a constant),
and a t quantile with G - 1 degrees of freedom (Cameron and Miller 2015, "A
Practitioner's Guide to Cluster-Robust Inference", section VI: with few clusters, use
t(G - 1), not the normal). The difference of two groups with disjoint raters adds the
two variances (the groups are independent samples of raters); its degrees of freedom are
Welch-Satterthwaite's with G_a - 1 and G_b - 1 per group.

Undefined values are None with a ``note`` saying why, never NaN and never an exception:
no ratings (no mean), one rater (a clustered variance needs two clusters), a standard
error of 0 (all ratings equal, or every rater's residuals summing to 0: a zero-width
interval would claim certainty the data do not give).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics.agreement import krippendorff_alpha

__all__ = ["Agreement", "Estimate", "clustered_mean", "group_difference", "ordinal_alpha"]

NO_RATINGS = "no ratings"
ONE_RATER = "one rater: a rater-clustered interval needs ratings from at least two raters"
ALL_EQUAL = "all ratings are equal: the standard error is 0, so there is no interval"
ZERO_SE = (
    "every rater's ratings average to the overall mean: the clustered standard error is 0, "
    "so there is no interval"
)


def _r(value: float | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Estimate:
    """A mean (or a difference of means) with its rater-clustered interval.

    ``n``: ratings (pairs, for a before/after change; both groups' ratings, for a
    difference); ``n_raters``: distinct raters (clusters). ``mean`` is None without
    ratings; ``se``, ``df``, ``low`` and ``high`` are None when undefined (``note`` says why).
    """

    n: int
    n_raters: int
    mean: float | None
    se: float | None
    df: float | None
    low: float | None
    high: float | None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_raters": self.n_raters,
            "mean": _r(self.mean),
            "se": _r(self.se),
            "df": _r(self.df),
            "low": _r(self.low),
            "high": _r(self.high),
            "note": self.note,
        }


def _interval(
    n: int, n_raters: int, mean: float, se: float, df: float, confidence: float, note: str
) -> Estimate:
    """``mean`` +- t_df * se, or no interval (``note``) when ``se`` is 0."""
    if se <= 0.0:
        return Estimate(n, n_raters, mean, se, df, None, None, note)
    # scipy (about 60 MB) is imported here, as in rubrics/agreement/tau.py: the mode's
    # protocol imports this package and the export path must not load it.
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
    return Estimate(n, n_raters, mean, se, df, mean - half, mean + half)


def clustered_mean(values: ArrayLike, raters: ArrayLike, *, confidence: float) -> Estimate:
    """The mean of ``values`` with a t(G - 1) interval from the rater-clustered variance.

    ``raters``: one rater id per value (the clusters). See the module docstring for the
    formula and why; empty input, one rater and a zero standard error give None intervals.
    """
    y = np.asarray(values, dtype=np.float64)
    if y.size == 0:
        return Estimate(0, 0, None, None, None, None, None, NO_RATINGS)
    _, cluster = np.unique(np.asarray(raters), return_inverse=True)
    n, g = int(y.size), int(cluster.max()) + 1
    mean = float(y.mean())
    if g < 2:
        return Estimate(n, g, mean, None, None, None, None, ONE_RATER)
    # n * (rater r's residual sum) = n * S_r - n_r * T: exact for integer ratings, so a
    # standard error that is 0 in exact arithmetic is 0 here too (not 1e-17: an interval).
    scaled = n * np.bincount(cluster, weights=y, minlength=g) - np.bincount(cluster) * y.sum()
    variance = g / (g - 1) * float(scaled @ scaled) / float(n) ** 4
    note = ALL_EQUAL if np.all(y == y[0]) else ZERO_SE
    return _interval(n, g, mean, math.sqrt(variance), g - 1.0, confidence, note)


def group_difference(a: Estimate, b: Estimate, *, confidence: float) -> Estimate:
    """``a.mean - b.mean`` for groups with disjoint raters: variances add (independent groups).

    Degrees of freedom (Welch-Satterthwaite with G - 1 per group):
    ``(v_a + v_b)^2 / (v_a^2 / (G_a - 1) + v_b^2 / (G_b - 1))``.
    """
    n, n_raters = a.n + b.n, a.n_raters + b.n_raters
    if a.mean is None or b.mean is None:
        return Estimate(n, n_raters, None, None, None, None, None, "a group has no ratings")
    mean = a.mean - b.mean
    if a.se is None or b.se is None:
        note = "a group has one rater: the difference's interval needs two raters in each group"
        return Estimate(n, n_raters, mean, None, None, None, None, note)
    va, vb = a.se * a.se, b.se * b.se
    se = math.sqrt(va + vb)
    if se <= 0.0:
        note = "both groups' standard errors are 0, so there is no interval"
        return Estimate(n, n_raters, mean, se, None, None, None, note)
    df = (va + vb) ** 2 / (va * va / (a.n_raters - 1) + vb * vb / (b.n_raters - 1))
    return _interval(n, n_raters, mean, se, df, confidence, "")


@dataclass(frozen=True)
class Agreement:
    """Krippendorff's alpha (ordinal) of one dimension within one group, items as units.

    ``n_items``: items with at least two ratings (pairable units); ``n_ratings``: their
    ratings. ``alpha`` is None when undefined (``note`` says why).
    """

    alpha: float | None
    n_items: int
    n_ratings: int
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "alpha": _r(self.alpha),
            "n_items": self.n_items,
            "n_ratings": self.n_ratings,
            "note": self.note,
        }


def ordinal_alpha(values: ArrayLike, items: ArrayLike) -> Agreement:
    """Krippendorff's ordinal alpha of ``values`` with ``items`` as units.

    Alpha depends only on which values share a unit, not on who gave them, so the
    ratings are packed into a (most ratings of one item) x items matrix instead of
    raters x items: the same alpha (``rubrics.agreement.krippendorff_alpha``), with a
    matrix as small as the data. A rater rates an item once (``context_report`` checks).
    """
    y = np.asarray(values, dtype=np.float64)
    if y.size == 0:
        return Agreement(None, 0, 0, NO_RATINGS)
    _, unit = np.unique(np.asarray(items), return_inverse=True)
    counts = np.bincount(unit)
    pairable = counts[unit] >= 2
    n_items, n_ratings = int((counts >= 2).sum()), int(pairable.sum())
    order = np.argsort(unit, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    slot = np.empty_like(unit)
    slot[order] = np.arange(unit.size) - starts[unit[order]]
    matrix = np.full((int(counts.max()), counts.size), np.nan)
    matrix[slot, unit] = y
    try:
        alpha = krippendorff_alpha(matrix, "ordinal")
    except ValueError as exc:  # no pairable item, or no disagreement expected
        return Agreement(None, n_items, n_ratings, str(exc))
    return Agreement(alpha, n_items, n_ratings)
