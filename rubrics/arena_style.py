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
    t = np.zeros(x.shape[1])
    for _ in range(100):
        p = logistic(x @ t)
        grad = x.T @ (w * (y - p))
        hess = (x * (w * p * (1.0 - p))[:, None]).T @ x
        delta = np.linalg.solve(hess, grad)
        t = t + delta
        if np.max(np.abs(delta)) < 1e-12:
            break
    else:
        raise ValueError("the style-controlled fit did not converge")
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
