"""People plus a judge: prediction-powered estimates of means (pure numpy/scipy; no Django).

A judge (a model) answers every unit; people answer only some. Prediction-powered
inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, Science 2023) estimates
the people's mean from the judge's answers on all units, corrected by the judge's
measured error on the units people also answered (the *rectifier*):

    theta = lam * mean(yhat_unlabeled) + mean(y - lam * yhat)

with ``y`` the people's value and ``yhat`` the judge's on the ``n`` labeled units and
``yhat_unlabeled`` the judge's on the ``N`` others. ``lam = 1`` is PPI, ``lam = 0`` the
people-only mean. PPI++ (Angelopoulos, Duchi and Zrnic, "PPI++: Efficient
Prediction-Powered Inference", arXiv:2311.01453, 2023) picks ``lam`` from the data to
minimise the variance (power tuning), so a useless judge costs nothing and a good one
narrows the interval by up to sqrt(1 - rho^2). The interval is the CLT one,
``theta +- z * se`` with ``se^2 = var(lam yhat_unlabeled) / N + var(y - lam yhat) / n``;
``small_sample=True`` gives the small-sample interval the report uses: Student's t with
n - 1 degrees of freedom for z and Bessel's n / (n - 1) on the variance (``_interval``).

Active inference (Zrnic and Candes, "Active Statistical Inference", ICML 2024): people
answer unit ``i`` with a known probability ``pi_i``, larger where the judge is unsure;
inverse-probability weights keep the estimate unbiased (:func:`active_mean`).
:func:`sampling_probabilities` makes such a design, ``rubrics.ppi_power.sample_size``
plans how many human units a target width needs (the PPI power formula, as in
ppi-python's ``ppi_mean_power``), and :func:`bradley_terry` is the prediction-powered Bradley-Terry
fit for arena battles (the PPI++ logistic M-estimator; ``rubrics.ppi_ranking``).

When the intervals are valid: the people's units must be a uniformly random subset of
the judged units (:func:`ppi_mean`) or drawn with known, positive probabilities
(:func:`active_mean`). No assumption is made on the judge: a biased judge widens the
interval, never moves its coverage. If people chose which units to answer (or units were
dropped for reasons that depend on the answers), none of these intervals is valid.

Conventions. Each labeled unit is one observation (the caller averages a unit's
ratings: ratings of one unit are not independent). Variances use ``ddof=0`` as
ppi-python does, so ``ppi_mean`` equals ``ppi_py.ppi_mean_ci`` to rounding and
``lam=0`` gives exactly :func:`people_only`. ``alpha`` is the error level of two-sided
intervals (0.05: 95%). Bad input raises ``ValueError`` with a message naming the
argument (n < 2, lengths that differ, NaN, probabilities outside (0, 1]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks
from rubrics.ppi_ranking import bradley_terry
from rubrics.resampling import (
    Seed,
    as_generator,
    percentile_interval,
    resample_indices,
    z_value,
)

__all__ = [
    "Interval",
    "Combined",
    "people_only",
    "judge_only",
    "rectifier",
    "ppi_mean",
    "active_mean",
    "weighted_people_only",
    "bootstrap_mean",
    "sampling_probabilities",
    "bradley_terry",
    "z_value",
    "quantile",
    "VALID_WHEN",
]

VALID_WHEN = (
    "Valid when the units people answered are a random subset of the judged units, or were "
    "drawn with known probabilities (inverse-probability weights); not when people or the "
    "study chose them by their answers."
)


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided interval and standard error."""

    estimate: float
    low: float
    high: float
    se: float

    def as_dict(self) -> dict[str, float]:
        """``{"estimate", "low", "high", "se"}`` as plain floats (JSON-ready)."""
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "se": self.se}


@dataclass(frozen=True)
class Combined:
    """A people + judge estimate: the interval, the lambda used and the sample sizes."""

    interval: Interval
    lam: float  # power-tuned lambda (PPI++), or the fixed one given
    n: int  # labeled units
    N: int  # unlabeled units
    effective_n: float  # n * var(people_only) / var(combined)


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


def _vector(values: ArrayLike, name: str, minimum: int = 2) -> NDArray[np.float64]:
    """``values`` as a finite 1-D float array of at least ``minimum`` entries."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {np.shape(arr)}")
    if arr.shape[0] < minimum:
        raise ValueError(f"{name} needs at least {minimum} values, got {arr.shape[0]}")
    if arr.shape[0] == 0:
        return np.zeros(0)
    return checks.finite_array(arr, name)


def _alpha(alpha: Any) -> float:
    return checks.confidence(alpha, "alpha")


def _lam(lam: Any) -> float | None:
    if lam is None:
        return None
    if isinstance(lam, bool) or not isinstance(lam, int | float | np.integer | np.floating):
        raise ValueError(f"lam must be a number or None, got {lam!r}")
    if not math.isfinite(float(lam)):
        raise ValueError(f"lam must be finite, got {lam!r}")
    return float(lam)


def quantile(alpha: float, df: float | None = None) -> float:
    """The half-width of a two-sided interval in standard errors: the normal quantile
    (``df`` None: the CLT, as ppi-python uses it), or Student's t with ``df`` degrees of
    freedom (``small_sample``; ``df`` > 0, not necessarily whole)."""
    if df is None:
        return z_value(alpha)
    if not df > 0:
        raise ValueError(f"a t interval needs positive degrees of freedom, got {df}")
    from scipy.special import stdtrit  # scipy loaded only when an interval is made

    return float(stdtrit(df, 1.0 - _alpha(alpha) / 2.0))


def _interval(
    estimate: float, se: float, alpha: float, n: int | None = None, df: float | None = None
) -> Interval:
    """``estimate +- z * se``; with ``n`` (``small_sample``), the small-sample interval
    ``estimate +- t(df) * se * sqrt(n / (n - 1))``, ``df`` = n - 1 unless given.

    Why: through the services, with about 25 people per system (500 seeds, 1,000
    intervals each), the normal quantile's 95% intervals covered 0.921 (people-only) and
    0.923 (combined) under the uniform design, 0.919 under the uncertainty design
    (``bench/results-ppi.md``, section 1): the CLT interval is a large-sample one. With
    every weight equal, t with n - 1 degrees of freedom and Bessel's n / (n - 1) on the
    variance is the textbook interval of a mean (``scipy.stats.t.interval`` on the sample
    standard deviation); for the combined estimates, whose variance has a judge part
    with more degrees of freedom, it is conservative. ``se`` stays the CLT standard
    error (``ddof=0``), so variances and effective n compare across estimates as before.
    """
    if n is None:
        half = z_value(alpha) * se
    else:
        if n < 2:
            raise ValueError(f"a small-sample interval needs at least 2 units, got {n}")
        half = quantile(alpha, n - 1 if df is None else df) * se * math.sqrt(n / (n - 1))
    return Interval(float(estimate), float(estimate - half), float(estimate + half), float(se))


# ---------------------------------------------------------------------------
# Single-source intervals
# ---------------------------------------------------------------------------


def people_only(y: ArrayLike, *, alpha: float = 0.05, small_sample: bool = False) -> Interval:
    """CLT interval of the people's mean: ``mean(y) +- z * std(y) / sqrt(n)`` (n >= 2).

    ``std`` with ``ddof=0``, as ppi-python's ``classical_mean_ci``; ``small_sample``:
    the t interval on the sample standard deviation (``_interval``).
    """
    arr = _vector(y, "y")
    n = arr.shape[0] if small_sample else None
    return _interval(arr.mean(), arr.std() / math.sqrt(arr.shape[0]), alpha, n)


def judge_only(yhat_all: ArrayLike, *, alpha: float = 0.05) -> Interval:
    """Naive CLT interval of the judge's mean over all units it answered.

    It treats the judge as if it were the people: its width is honest about the judge's
    own noise but blind to its bias, so it covers the people's mean only by luck.
    """
    arr = _vector(yhat_all, "yhat_all")
    return _interval(arr.mean(), arr.std() / math.sqrt(arr.shape[0]), alpha)


def rectifier(
    y: ArrayLike, yhat: ArrayLike, *, alpha: float = 0.05, small_sample: bool = False
) -> Interval:
    """The judge's error on the labeled units, ``mean(y - yhat)``, with its CLT interval
    (``small_sample``: the t interval, ``_interval``).

    An interval away from 0 says the judge is biased on this system's units.
    """
    y_arr, yhat_arr = _labeled(y, yhat)
    diff = y_arr - yhat_arr
    n = diff.shape[0] if small_sample else None
    return _interval(diff.mean(), diff.std() / math.sqrt(diff.shape[0]), alpha, n)


def _labeled(y: ArrayLike, yhat: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    y_arr = _vector(y, "y")
    yhat_arr = _vector(yhat, "yhat")
    if y_arr.shape != yhat_arr.shape:
        raise ValueError(
            f"y and yhat must have the same length (one judge answer per labeled unit), "
            f"got {y_arr.shape[0]} and {yhat_arr.shape[0]}"
        )
    return y_arr, yhat_arr


# ---------------------------------------------------------------------------
# PPI++ mean
# ---------------------------------------------------------------------------


def _tuned_lam(y: NDArray, yhat: NDArray, yhat_u: NDArray) -> float:
    """PPI++'s power-tuned lambda for the mean, clipped to [0, 1] (ppi-python's formula).

    lam = Cov(y, yhat) / ((1 + n / N) Var(yhat over labeled and unlabeled)), with the
    covariance over the labeled units (ddof=0) and the variance over all judged units
    (ddof=1), exactly as ``ppi_py.ppi._calc_lam_glm`` computes it for the mean. It
    minimises the CLT variance of the estimate.
    """
    n, N = y.shape[0], yhat_u.shape[0]
    if N < 2:
        return 0.0  # one judge-only unit has no measurable spread: people only
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_u]), ddof=1))
    if var <= 0.0:
        return 0.0  # a constant judge carries no information
    return float(np.clip(cov / ((1.0 + n / N) * var), 0.0, 1.0))


def ppi_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabeled: ArrayLike,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
    small_sample: bool = False,
) -> Combined:
    """PPI++ mean (Angelopoulos et al. 2023) with its CLT interval (``small_sample``:
    t with n - 1 degrees of freedom and n / (n - 1) on the variance, ``_interval``).

    ``y``, ``yhat``: people's and judge's values on the n labeled units (same order);
    ``yhat_unlabeled``: the judge on the N units people did not answer (fewer than 2:
    lambda is 0 and the result is the people-only interval). ``lam=None``: power
    tuned and clipped to [0, 1] exactly as ``ppi_py.ppi_mean_ci(..., lhat=None)``;
    a number: used as given (1 is plain PPI, 0 people only).
    """
    y_arr, yhat_arr = _labeled(y, yhat)
    yhat_u = _vector(yhat_unlabeled, "yhat_unlabeled", minimum=0)
    lam_value = _lam(lam)
    alpha = _alpha(alpha)
    n, N = y_arr.shape[0], yhat_u.shape[0]
    if lam_value is None:
        lam_value = _tuned_lam(y_arr, yhat_arr, yhat_u)
    if N < 2 and lam_value != 0.0:
        raise ValueError("lam must be 0 with fewer than 2 judge-only units (yhat_unlabeled)")
    residual = y_arr - lam_value * yhat_arr
    imputed = lam_value * yhat_u.mean() if N else 0.0
    var = residual.var() / n + ((lam_value * yhat_u).var() / N if N else 0.0)
    estimate = imputed + residual.mean()
    return Combined(
        interval=_interval(estimate, math.sqrt(var), alpha, n if small_sample else None),
        lam=lam_value,
        n=n,
        N=N,
        effective_n=_effective_n(n, y_arr.var() / n, var),
    )


def _effective_n(n: int, var_people: float, var_combined: float) -> float:
    """n * var(people only) / var(combined): the human units the combined estimate is worth."""
    if var_combined <= 0.0:
        return float(n) if var_people <= 0.0 else math.inf
    return float(n * var_people / var_combined)


# ---------------------------------------------------------------------------
# Active inference
# ---------------------------------------------------------------------------


def _active_terms(
    yhat: ArrayLike, y: ArrayLike, labeled: ArrayLike, probabilities: ArrayLike
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Checked arrays: yhat, y (0 where unlabeled), labeled mask, probabilities."""
    f = _vector(yhat, "yhat")
    m = f.shape[0]
    mask = np.asarray(labeled)
    if mask.shape != (m,) or mask.dtype != np.bool_:
        raise ValueError(f"labeled must be {m} booleans (one per unit), got shape {mask.shape}")
    pi = np.asarray(probabilities, dtype=np.float64)
    if pi.shape != (m,):
        raise ValueError(f"probabilities must have {m} values, got shape {pi.shape}")
    if not np.all(np.isfinite(pi)) or np.any(pi <= 0.0) or np.any(pi > 1.0):
        raise ValueError("probabilities must be in (0, 1] (every unit a chance of people)")
    y_arr = np.asarray(y, dtype=np.float64)
    if y_arr.shape != (m,):
        raise ValueError(f"y must have {m} values (NaN where not labeled), got {y_arr.shape}")
    if not np.all(np.isfinite(y_arr[mask])):
        raise ValueError("y is NaN or infinite on a labeled unit")
    if int(mask.sum()) < 2:
        raise ValueError(f"active_mean needs at least 2 labeled units, got {int(mask.sum())}")
    return f, np.where(mask, y_arr, 0.0), mask, pi


def active_mean(
    yhat: ArrayLike,
    y: ArrayLike,
    labeled: ArrayLike,
    probabilities: ArrayLike,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
    small_sample: bool = False,
) -> Combined:
    """Active inference (Zrnic and Candes 2024): the mean with inverse-probability weights.

    All M units have a judge answer ``yhat``; ``labeled[i]`` is True where people
    answered, ``probabilities[i]`` the known chance that unit i was sent to people.
    Per-unit terms ``z_i = lam*yhat_i + (y_i - lam*yhat_i) * labeled_i / pi_i``; the
    estimate is their mean and the CLT interval uses ``std(z) / sqrt(M)``. Writing
    ``z = a + lam * b`` with ``a = y*xi/pi`` and ``b = yhat*(1 - xi/pi)``, the variance
    is smallest at ``lam = -Cov(a, b) / Var(b)``; ``lam=None`` uses it, clipped to
    [0, 1] as PPI++ does. ``n`` is the labeled count, ``N = M - n``; ``effective_n``
    compares with the plain CLT variance of the n labeled values (``var(y) / n``).
    ``small_sample``: t with n - 1 degrees of freedom and n / (n - 1) on the variance
    (``_interval``), n the labeled units.
    """
    f, y_arr, mask, pi = _active_terms(yhat, y, labeled, probabilities)
    lam_value = _lam(lam)
    alpha = _alpha(alpha)
    weight = mask / pi
    a = y_arr * weight
    b = f * (1.0 - weight)
    if lam_value is None:
        var_b = float(b.var())
        cov_ab = float(np.mean((a - a.mean()) * (b - b.mean())))
        lam_value = float(np.clip(-cov_ab / var_b, 0.0, 1.0)) if var_b > 0.0 else 0.0
    z = a + lam_value * b
    m = z.shape[0]
    var = float(z.var()) / m
    n = int(mask.sum())
    people = y_arr[mask]
    return Combined(
        interval=_interval(z.mean(), math.sqrt(var), alpha, n if small_sample else None),
        lam=lam_value,
        n=n,
        N=m - n,
        effective_n=_effective_n(n, float(people.var()) / n, var),
    )


def weighted_people_only(
    y: ArrayLike, probabilities: ArrayLike, *, alpha: float = 0.05, small_sample: bool = False
) -> Interval:
    """People's mean under a design that drew units with known probabilities, without the
    judge: the self-normalised (Hajek) inverse-probability mean of the ``n`` labeled
    values, ``sum(y / pi) / sum(1 / pi)``, with its linearised standard error
    ``sqrt(sum((y - theta)^2 / pi^2)) / sum(1 / pi)``.

    The plain inverse-probability mean (``active_mean`` at ``lam = 0``) is unbiased too,
    but its variance carries the level of the scores (about 3 on a 1-5 scale) times the
    spread of ``1 / pi``, so its interval was 2.6-3 times wider than the people's data
    warrant (``bench/results-ppi.md``); normalising by the weights removes the level.
    With every ``pi`` equal it is :func:`people_only` exactly (``small_sample`` too).
    ``small_sample``: the t interval with Kish's effective sample size
    ``sum(w)^2 / sum(w^2)`` minus 1 as the degrees of freedom: unequal weights carry less
    information about the spread than n equal ones (through the services, t with n - 1
    left the uncertainty design's people-only interval at 0.919; ``bench/results-ppi.md``).
    """
    values = _vector(y, "y")
    pi = _vector(probabilities, "probabilities")
    if pi.shape != values.shape:
        raise ValueError("y and probabilities must have the same length")
    if np.any(pi <= 0.0) or np.any(pi > 1.0):
        raise ValueError("probabilities must be in (0, 1]")
    weight = 1.0 / pi
    total = float(weight.sum())
    estimate = float(np.dot(weight, values)) / total
    se = math.sqrt(float(np.sum((weight * (values - estimate)) ** 2))) / total
    if not small_sample:
        return _interval(estimate, se, _alpha(alpha))
    kish = total**2 / float(np.sum(weight**2))
    return _interval(estimate, se, _alpha(alpha), values.shape[0], df=kish - 1.0)


def sampling_probabilities(
    uncertainty: ArrayLike, *, share: float, floor: float
) -> NDArray[np.float64]:
    """Chances of sending each unit to people: proportional to the judge's uncertainty.

    ``pi_i = min(1, max(floor, c * u_i))`` with ``c`` such that ``mean(pi) == share``
    (the human budget as a share of the units); every ``pi_i`` in ``[floor, 1]``, and
    all-equal uncertainty gives ``pi_i == share`` (the uniform design). The floor keeps
    every unit reachable, so inverse-probability weights stay bounded. When the
    uncertain units alone cannot use the budget (many units with uncertainty 0), they
    all get 1 and the others share the rest equally. Needs ``0 < floor <= share <= 1``.
    """
    u = _vector(uncertainty, "uncertainty", minimum=1)
    if np.any(u < 0.0):
        raise ValueError("uncertainty must be non-negative")
    share = checks.confidence(share, "share") if share != 1 else 1.0
    floor = checks.confidence(floor, "floor") if floor != 1 else 1.0
    if floor > share:
        raise ValueError(f"floor ({floor}) must not exceed share ({share})")
    m = u.shape[0]
    if share >= 1.0 or np.all(u == u[0]):
        return np.full(m, share)
    # Only ratios matter; scaled to max 1, a ratio below the smallest float counts as 0.
    u = u / u.max()
    positive = u > 0.0
    if floor * (m - positive.sum()) + positive.sum() <= share * m:
        # Even c = infinity falls short: the uncertain units all go to people and the
        # zero-uncertainty ones share what is left (still >= floor, <= 1).
        rest = (share * m - positive.sum()) / (m - positive.sum())
        return np.where(positive, 1.0, rest)
    return _solve_scale(u, share, floor)


def _solve_scale(u: NDArray, share: float, floor: float) -> NDArray[np.float64]:
    """pi = clip(c * u, floor, 1) with mean share: bisection on log c, then the exact c.

    ``u`` is scaled to max 1; working on log u, no uncertainty overflows.
    """
    m = u.shape[0]
    with np.errstate(divide="ignore"):
        log_u = np.log(u)  # u has max 1: log u <= 0, -inf for u = 0

    def chances(log_c: float) -> NDArray[np.float64]:
        return np.clip(np.exp(np.minimum(log_c + log_u, 0.0)), floor, 1.0)

    # At log c = log(floor) every unit sits at the floor (mean <= share); at
    # -min(log u > -inf) every positive unit is at 1 (mean >= share, checked by the caller).
    low, high = math.log(floor), float(-log_u[np.isfinite(log_u)].min())
    for _ in range(200):
        mid = (low + high) / 2.0
        if chances(mid).mean() < share:
            low = mid
        else:
            high = mid
        if high - low <= 1e-15:
            break
    pi = chances(high)
    # The units strictly inside (floor, 1) decide the exact scale: solve for it, so that
    # the mean is the share to rounding, not to the bisection's tolerance.
    free = (pi > floor) & (pi < 1.0)
    if free.any():
        scale = (share * m - pi[~free].sum()) / pi[free].sum()
        exact = pi[free] * scale
        if np.all((exact >= floor) & (exact <= 1.0)):
            pi[free] = exact
    return pi


# ---------------------------------------------------------------------------
# Bootstrap check
# ---------------------------------------------------------------------------


def bootstrap_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabeled: ArrayLike,
    *,
    lam: float | None,
    alpha: float = 0.05,
    resamples: int = 1000,
    seed: Seed = 0,
) -> Interval:
    """Percentile bootstrap of the combined estimate at a fixed lambda.

    The labeled pairs (y, yhat) and the unlabeled judge answers are resampled
    independently (two samples), from one stream: the labeled draws of a resample
    first, then its unlabeled draws, batch by batch (see ``rubrics.resampling``).
    ``lam=None`` tunes lambda once on the full data (as :func:`ppi_mean`) and keeps it.
    ``se`` is the standard deviation of the replicates. The check beside the CLT interval.
    """
    y_arr, yhat_arr = _labeled(y, yhat)
    yhat_u = _vector(yhat_unlabeled, "yhat_unlabeled", minimum=0)
    resamples = checks.integer(resamples, "resamples", low=20)
    alpha = _alpha(alpha)
    lam_value = _lam(lam)
    if lam_value is None:
        lam_value = _tuned_lam(y_arr, yhat_arr, yhat_u)
    n, N = y_arr.shape[0], yhat_u.shape[0]
    if N < 2 and lam_value != 0.0:
        raise ValueError("lam must be 0 with fewer than 2 judge-only units (yhat_unlabeled)")
    residual = y_arr - lam_value * yhat_arr
    imputed = lam_value * yhat_u
    estimate = residual.mean() + (imputed.mean() if N else 0.0)
    rng = as_generator(seed)
    # Batches keep the index matrices small when N is large (1000 x 10^5 is 800 MB).
    batch = max(1, min(resamples, 2_000_000 // max(n + N, 1)))
    reps = np.empty(resamples)
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        value = residual[resample_indices(n, size, rng)].mean(axis=1)
        if N:
            value = value + imputed[resample_indices(N, size, rng)].mean(axis=1)
        reps[start : start + size] = value
    low, high = percentile_interval(reps, 1.0 - alpha)
    return Interval(float(estimate), float(low), float(high), float(reps.std(ddof=1)))
