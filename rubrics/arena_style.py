"""Length (style) control for the arena leaderboard (pure numpy/scipy; no Django).

PROTOCOLS.md section 5, LMArena's style control: the Bradley-Terry logistic model of
:mod:`rubrics.arena` with the normalised length difference of the two captions as a
covariate beside the system indicators. The system coefficients are the length-controlled
scores (same scale and anchoring as :func:`rubrics.arena.fit`); the covariate's coefficient
is the length effect. choix fits no covariates, so this is a plain Newton logistic fit.
Kept apart from :mod:`rubrics.arena` to keep each module under about 600 lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from rubrics.arena import (
    _Y,
    ELO_PER_NATURAL,
    _anchor,
    _check_connected,
    _outcome_codes,
    _system_codes,
    count_table,
    logistic,
)

#: No caption pair is this far apart (natural log-odds: a win probability of 1 - 1e-13).
#: A fit that walks past it is climbing towards a maximum at infinity, or to one so far
#: out that its probabilities round to 0 and 1 and its intervals mean nothing.
_DIVERGED = 30.0


def _log_likelihood(eta: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return -float((w * (y * np.logaddexp(0.0, -eta) + (1.0 - y) * np.logaddexp(0.0, eta))).sum())


def _newton(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The maximum-likelihood coefficients, by Newton steps halved while they lower the
    log-likelihood (as :func:`rubrics.arena._newton`).

    A full step from 0 overshoots when the outcomes are nearly separated (a system that
    never loses, captions whose longer side nearly always wins) and diverged until the
    Hessian was singular: the report showed "Singular matrix" instead of the length
    leaderboard. When the outcomes are separated no finite maximum exists, and when it
    lies past ``_DIVERGED`` it is no estimate to show: either is said in words.
    """
    t = np.zeros(x.shape[1])
    ll = _log_likelihood(x @ t, y, w)
    for _ in range(200):
        p = logistic(x @ t)
        grad = x.T @ (w * (y - p))
        hess = (x * (w * p * (1.0 - p))[:, None]).T @ x
        try:
            delta = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            delta = np.full_like(t, np.inf)  # a singular Hessian: some p is exactly 0 or 1
        if not np.all(np.isfinite(delta)) or np.max(np.abs(t)) > _DIVERGED:
            break
        scale = 1.0
        while _log_likelihood(x @ (t + scale * delta), y, w) < ll - 1e-12 * (1.0 + abs(ll)):
            scale /= 2.0
            if scale < 1e-18:
                break
        t = t + scale * delta
        ll = _log_likelihood(x @ t, y, w)
        if np.max(np.abs(scale * delta)) < 1e-12:
            if np.max(np.abs(t)) <= _DIVERGED:
                return t
            break
    raise ValueError(
        "the length-controlled fit has no usable estimate: the battles are (nearly) "
        "separated, for example the longer caption won every battle that was not a tie, "
        "or a system never lost once length is taken into account; more battles are needed"
    )


def length_feature(len_a: Sequence[float], len_b: Sequence[float]) -> np.ndarray:
    """LMArena's style feature: (len_a - len_b) / (len_a + len_b), before standardising."""
    a = np.asarray(len_a, dtype=float)
    b = np.asarray(len_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("len_a and len_b must be 1-d of the same length")
    if np.any(a < 0) or np.any(b < 0) or np.any(a + b == 0):
        raise ValueError("lengths must be non-negative and not both zero")
    return (a - b) / (a + b)


@dataclass(frozen=True)
class StyleControl:
    systems: tuple[str, ...]
    scores: np.ndarray  # controlled scores, anchored like fit()
    low: np.ndarray
    high: np.ndarray
    coefficient: float  # natural log-odds per standard deviation of the length feature
    coefficient_low: float
    coefficient_high: float
    feature_mean: float
    feature_std: float  # the root mean square of the feature, the unit of the coefficient


def style_control(
    systems_a: Sequence[str],
    systems_b: Sequence[str],
    outcomes: Sequence[str],
    len_a: Sequence[float],
    len_b: Sequence[float],
    weights: Sequence[float] | None = None,
    anchor: tuple[str, float] | None = None,
    level: float = 0.95,
    systems: Sequence[str] | None = None,
) -> StyleControl:
    """Bradley-Terry with the standardised length difference as a covariate.

    logit P(a wins) = theta_a - theta_b + beta * z, z = feature / rms(feature). LMArena
    standardises with (feature - mean) / std, but its sides are in random order, so the
    mean is about 0 there. Here side ``a`` may be a fixed system (a canonical order):
    subtracting the mean would then add beta * mean to every battle, a constant the
    model (no intercept) can only absorb into the strengths of whichever systems sit on
    side ``a``, biasing them. Scaling by the root mean square keeps z = 0 meaning equal
    lengths and equals the std whenever the mean is 0. The system coefficients are the
    length-controlled strengths; beta is the length effect. Intervals are sandwich
    intervals. Battles are not aggregated (z is per battle), so this costs O(n k^2).
    """
    names, a, b = _system_codes(systems_a, systems_b, systems)
    codes = _outcome_codes(outcomes)
    f = length_feature(len_a, len_b)
    n = len(a)
    if not (len(codes) == n == len(f)):
        raise ValueError("systems, outcomes and lengths must have the same length")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,) or np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be finite, positive, one per battle")
    if float(np.ptp(f)) == 0.0:
        raise ValueError("the length difference is constant: its effect cannot be estimated")
    std = float(np.sqrt(np.mean(f**2)))
    z = f / std
    table = count_table([names[i] for i in a], [names[i] for i in b], outcomes, w, names)
    _check_connected(table)
    k = len(names)
    x = np.zeros((n, k + 1))
    x[np.arange(n), a] = 1.0
    x[np.arange(n), b] = -1.0
    x[:, k] = z
    x = np.delete(x, k - 1, axis=1)  # last system pinned at 0
    y = _Y[codes]
    t = _newton(x, y, w)
    p = logistic(x @ t)
    hess = (x * (w * p * (1.0 - p))[:, None]).T @ x
    bread = np.linalg.inv(hess)
    sc = x * (w * (y - p))[:, None]
    cov_free = bread @ (sc.T @ sc) @ bread
    theta = np.append(t[: k - 1], 0.0)
    scores, _ = _anchor(names, theta, anchor)
    to_full = np.zeros((k, k))
    to_full[: k - 1, : k - 1] = np.eye(k - 1)
    if anchor is None:
        to_anchor = np.eye(k) - 1.0 / k
    else:
        to_anchor = np.eye(k)
        to_anchor[:, names.index(anchor[0])] -= 1.0
    m = ELO_PER_NATURAL * to_anchor @ to_full[:, : k - 1]
    cov = m @ cov_free[: k - 1, : k - 1] @ m.T
    from scipy import stats

    zq = stats.norm.ppf(0.5 + level / 2.0)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    beta = float(t[-1])
    beta_se = float(np.sqrt(cov_free[-1, -1]))
    return StyleControl(
        names,
        scores,
        scores - zq * se,
        scores + zq * se,
        beta,
        beta - zq * beta_se,
        beta + zq * beta_se,
        float(f.mean()),
        std,
    )
