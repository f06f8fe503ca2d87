"""Planning people + judge studies: the PPI power formula (pure numpy/scipy; no Django).

How many human units reach a target interval half-width, without and with a judge's
answers, from a pilot where both answered the same units (:func:`sample_size`); the
planner's service (``annotation/services/planning.py``) calls it per system. Kept apart
from ``rubrics.ppi``, whose estimators it plans for and whose input checks and interval
quantile it shares, so that each module stays readable in one sitting.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics import checks

# The estimators' own checks and quantile: a plan reaches exactly the width they report.
from rubrics.ppi import _alpha, _labeled, quantile

__all__ = ["sample_size"]


def _planned_variance(n: float, s: dict[str, float], N: float | None) -> tuple[float, float]:
    """Smallest CLT variance over lam in [0, 1] with n labeled and N unlabeled units.

    V(lam) = (var_y - 2 lam cov + lam^2 var_f) / n + lam^2 var_f / N (N = None:
    infinity), from the pilot's moments ``s``; returns (variance, lam).
    """
    var_y, cov, var_f = s["var_y"], s["cov"], s["var_f"]
    curvature = var_f / n + (var_f / N if N else 0.0)
    lam = float(np.clip(cov / n / curvature, 0.0, 1.0)) if curvature > 0.0 else 0.0
    variance = (var_y - 2.0 * lam * cov + lam * lam * var_f) / n
    if N:
        variance += lam * lam * var_f / N
    return max(variance, 0.0), lam


def _smallest_n(
    half: float, alpha: float, s: dict[str, float], N: float | None, small_sample: bool
) -> int:
    """The smallest whole n >= 2 whose planned interval half-width is at most ``half``:
    ``z * sqrt(V(n))``, or the small-sample ``t(n - 1) * sqrt(V(n) * n / (n - 1))``
    (``_interval``); both shrink as n grows, so the search halves an interval."""

    def reaches(n: int) -> bool:
        variance = _planned_variance(n, s, N)[0]
        if small_sample:
            variance *= n / (n - 1)
        return quantile(alpha, n - 1 if small_sample else None) * math.sqrt(variance) <= half

    if reaches(2):
        return 2
    low, high = 2, 4
    while not reaches(high):
        low, high = high, high * 2
        if high > 10**12:
            raise ValueError("target_halfwidth is too small to reach")
    while high - low > 1:
        mid = (low + high) // 2
        if reaches(mid):
            high = mid
        else:
            low = mid
    return high


def sample_size(
    y: ArrayLike,
    yhat: ArrayLike,
    *,
    target_halfwidth: float,
    alpha: float = 0.05,
    unlabeled: int | None = None,
    small_sample: bool = False,
) -> dict[str, Any]:
    """Human units needed for a target interval half-width, without and with the judge.

    From a pilot of n units with both people (``y``) and judge (``yhat``). People only:
    the smallest n with ``z * sd(y) / sqrt(n) <= target_halfwidth``. With the judge:
    the smallest n whose PPI++ variance at the best lambda in [0, 1],
    ``(var_y - 2 lam cov + lam^2 var_f) / n + lam^2 var_f / N``, reaches it;
    ``unlabeled=None``: N = infinity (as many judge answers as you like, the bound
    ``n_people * (1 - rho^2)``), else N judge-answered units people do not answer.
    Unclipped this is PPI's power formula (ppi-python ``ppi_mean_power``; effective n
    ``n (n + N) / (n + (1 - rho^2) N)``). Moments with ddof=0. Every n is at least 2.
    ``small_sample``: the half-width of the report's small-sample interval (t with n - 1
    degrees of freedom, Bessel's n / (n - 1); ``_interval``) instead of z's, so the plan
    reaches the width the report will show.

    Returns ``{"people_only", "with_judge", "rho", "lam", "sd", "unlabeled", "pilot",
    "target_halfwidth", "alpha", "saving"}`` (``saving``: 1 - with_judge / people_only).
    """
    y_arr, f = _labeled(y, yhat)
    alpha = _alpha(alpha)
    h = float(target_halfwidth)
    if not (math.isfinite(h) and h > 0.0):
        raise ValueError(f"target_halfwidth must be a positive number, got {target_halfwidth!r}")
    if unlabeled is not None:
        unlabeled = checks.integer(unlabeled, "unlabeled", low=1)
    s = {
        "var_y": float(y_arr.var()),
        "cov": float(np.mean((y_arr - y_arr.mean()) * (f - f.mean()))),
        "var_f": float(f.var()),
    }
    denom = math.sqrt(s["var_y"] * s["var_f"])
    rho = s["cov"] / denom if denom > 0.0 else 0.0
    people = _smallest_n(h, alpha, {**s, "cov": 0.0, "var_f": 0.0}, None, small_sample)
    with_judge = _smallest_n(h, alpha, s, unlabeled, small_sample)
    return {
        "people_only": people,
        "with_judge": with_judge,
        "rho": float(rho),
        "lam": _planned_variance(with_judge, s, unlabeled)[1],
        "sd": math.sqrt(s["var_y"]),
        "unlabeled": unlabeled,
        "pilot": int(y_arr.shape[0]),
        "target_halfwidth": h,
        "alpha": alpha,
        "saving": 1.0 - with_judge / people,
    }
