"""Prediction-powered Bradley-Terry: arena scores from people's battles plus a judge's.

The Bradley-Terry model, ``P(j beats i) = 1 / (1 + exp(theta_i - theta_j))``, is a
logistic regression on ``x = e_j - e_i`` without intercept. Its prediction-powered
version (Angelopoulos, Duchi and Zrnic, "PPI++", arXiv:2311.01453, 2023, section on
generalised linear models; applied to rankings by Chatzi et al., "Prediction-Powered
Ranking of Large Language Models", NeurIPS 2024) minimises the rectified loss

    L(theta) = 1/n sum_h w_h l(x_h, y_h) - lam/n sum_h w_h l(x_h, yhat_h)
               + lam/N sum_u l(x_u, yhat_u)

with ``l(x, y) = log(1 + exp(x.theta)) - y x.theta``: people's outcomes ``y`` on the n
battles they judged, the judge's answers ``yhat`` on the same battles and on N battles
people did not judge. ``lam = 0`` is the people-only fit, ``lam = 1`` plain PPI;
``lam=None`` is power tuned (PPI++), clipped to [0, 1]. For lam in [0, 1] the loss is
convex (the Hessian of ``l`` does not depend on y, so the labeled rows weigh
``(1 - lam) w / n >= 0``), and Newton's method with step halving finds the minimum.

Covariance (the PPI++ M-estimator CLT, as ppi-python's ``ppi_logistic_ci`` computes
it): ``H^-1 (Cov(g - lam ghat) + n/N Cov(lam ghat_u)) H^-1 / n``, with per-battle
gradients ``g`` (people), ``ghat`` (judge, same battles), ``ghat_u`` (judge, other
battles), and ``H`` the model's Hessian averaged over all n + N battles (over the n
only when lam = 0). The power-tuned lambda minimises the total variance of the
reported (sum-zero) scores, ppi-python's formula with the sum-zero map applied.

Scores are natural-log strengths with sum 0 (one system pinned while fitting, then
centred). Rank intervals come from the pairwise differences: system b is surely above
a when the interval of ``theta_b - theta_a`` (its variance from the covariance, not
from the two marginal intervals) lies above 0; ``rank_low = 1 + #surely above``,
``rank_high = k - #surely below`` (rank 1: the best). Each difference uses level
``1 - alpha`` (no correction for the many pairs). Valid when the battles people judged
are a random subset of the battles (or weighted by inverse probabilities through
``weights``).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks
from rubrics.resampling import z_value

__all__ = ["bradley_terry", "rank_bounds"]


def _rows(values: ArrayLike, name: str, n_systems: int, minimum: int) -> NDArray[np.float64]:
    """``values`` as an (m, 3) float array of (i, j, y) battles, checked."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be rows of numbers (i, j, y): {exc}") from exc
    if arr.size == 0:
        arr = arr.reshape(0, 3)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"{name} must be rows (i, j, y), got shape {arr.shape}")
    if arr.shape[0] < minimum:
        raise ValueError(f"{name} needs at least {minimum} battles, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity")
    ij = arr[:, :2]
    if np.any(ij != np.round(ij)) or np.any(ij < 0) or np.any(ij >= n_systems):
        raise ValueError(f"{name}: systems must be whole numbers from 0 to {n_systems - 1}")
    if np.any(arr[:, 0] == arr[:, 1]):
        raise ValueError(f"{name}: a battle of a system against itself")
    if np.any(arr[:, 2] < 0.0) or np.any(arr[:, 2] > 1.0):
        raise ValueError(f"{name}: outcomes must be in [0, 1] (the share won by j)")
    return arr


def _design(rows: NDArray, k: int) -> NDArray[np.float64]:
    """x = e_j - e_i without the last system's column (it is pinned at 0 while fitting)."""
    x = np.zeros((rows.shape[0], k))
    idx = np.arange(rows.shape[0])
    x[idx, rows[:, 1].astype(int)] += 1.0
    x[idx, rows[:, 0].astype(int)] -= 1.0
    return x[:, :-1]


def _sigmoid(eta: NDArray) -> NDArray:
    return np.exp(-np.logaddexp(0.0, -eta))


def _loss(theta: NDArray, x: NDArray, t: NDArray, c: NDArray) -> float:
    eta = x @ theta
    return float(np.sum(c * (np.logaddexp(0.0, eta) - t * eta)))


def _minimise(x: NDArray, t: NDArray, c: NDArray) -> NDArray[np.float64]:
    """Newton's method with step halving on sum c * l(x, t); c may be negative per row."""
    d = x.shape[1]
    curvature = (x.T * np.clip(c, 0.0, None)) @ x / 4.0  # positive part at theta = 0
    hess0 = (x.T * c) @ x / 4.0
    if np.linalg.eigvalsh(hess0).min() <= 1e-12 * max(1.0, np.abs(curvature).max()):
        raise ValueError("the battles do not connect all systems (no unique Bradley-Terry fit)")
    theta = np.zeros(d)
    loss = _loss(theta, x, t, c)
    for _ in range(200):
        p = _sigmoid(x @ theta)
        grad = x.T @ (c * (p - t))
        hess = (x.T * (c * p * (1.0 - p))) @ x
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError as exc:
            raise ValueError("the Bradley-Terry fit has a singular Hessian (separated)") from exc
        scale = 1.0
        for _ in range(60):
            new = _loss(theta - scale * step, x, t, c)
            if new <= loss + 1e-13 * (1.0 + abs(loss)):
                break
            scale /= 2.0
        else:
            break  # no step lowers the loss: numerically stuck, not at the minimum
        theta = theta - scale * step
        loss = new
        if np.max(np.abs(scale * step)) < 1e-12:
            return theta
        if np.max(np.abs(theta)) > 40.0:
            # A strength ratio of e^40: the minimum is at infinity (a system that never
            # wins or never loses), so stop early rather than after every iteration.
            break
    raise ValueError("the Bradley-Terry fit did not converge (nearly separated battles)")


def _stats(
    theta: NDArray, lab: dict[str, NDArray], unl: dict[str, NDArray], pooled: bool
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Per-battle gradients (people, judge, judge unlabeled) and the inverse Hessian.

    As ppi-python's ``_logistic_get_stats``: the Hessian is averaged over all n + N
    battles when ``pooled`` (lam != 0), over the n labeled ones otherwise.
    """
    x, w = lab["x"], lab["w"]
    mu = _sigmoid(x @ theta)
    grads = (w * (mu - lab["y"]))[:, None] * x
    grads_hat = (w * (mu - lab["yhat"]))[:, None] * x
    hess = (x.T * (w * mu * (1.0 - mu))) @ x
    xu = unl["x"]
    mu_u = _sigmoid(xu @ theta)
    grads_u = (mu_u - unl["yhat"])[:, None] * xu
    if pooled:
        hess = (hess + (xu.T * (mu_u * (1.0 - mu_u))) @ xu) / (x.shape[0] + xu.shape[0])
    else:
        hess = hess / x.shape[0]
    return grads, grads_hat, grads_u, np.linalg.inv(hess)


def _centre_map(k: int) -> NDArray[np.float64]:
    """(k, k-1): free strengths (last pinned at 0) to the sum-zero scores."""
    to_full = np.vstack([np.eye(k - 1), np.zeros((1, k - 1))])
    return (np.eye(k) - 1.0 / k) @ to_full


def _cov2(a: NDArray) -> NDArray:
    """np.cov of rows as observations (ddof=1), always 2-D."""
    d = a.shape[1]
    return np.cov(a.T).reshape(d, d)


def _tune(lab: dict[str, NDArray], unl: dict[str, NDArray], k: int) -> float:
    """PPI++ lambda: ppi-python's ``_calc_lam_glm`` for the trace of the sum-zero covariance.

    Computed at the lam = 1 estimate, clipped to [0, 1].
    """
    n, N = lab["x"].shape[0], unl["x"].shape[0]
    theta = _fit_free(lab, unl, 1.0)
    grads, grads_hat, grads_u, inv_h = _stats(theta, lab, unl, pooled=True)
    g_c = grads - grads.mean(axis=0)
    gh_c = grads_hat - grads_hat.mean(axis=0)
    cov_grads = (g_c.T @ gh_c + gh_c.T @ g_c) / n
    var_hat = _cov2(np.concatenate([grads_hat, grads_u], axis=0))
    v = _centre_map(k) @ inv_h
    num = float(np.trace(v @ cov_grads @ v.T))
    denom = float(2.0 * (1.0 + n / N) * np.trace(v @ var_hat @ v.T))
    if denom <= 0.0:
        return 0.0
    return float(np.clip(num / denom, 0.0, 1.0))


def _fit_free(lab: dict[str, NDArray], unl: dict[str, NDArray], lam: float) -> NDArray:
    """The rectified-loss minimiser in the free parameterisation (last system at 0)."""
    n, N = lab["x"].shape[0], unl["x"].shape[0]
    w = lab["w"]
    parts_x = [lab["x"]]
    parts_t = [lab["y"]]
    parts_c = [w / n]
    if lam != 0.0:
        parts_x += [lab["x"], unl["x"]]
        parts_t += [lab["yhat"], unl["yhat"]]
        parts_c += [-lam * w / n, np.full(N, lam / N)]
    return _minimise(np.concatenate(parts_x), np.concatenate(parts_t), np.concatenate(parts_c))


def rank_bounds(
    scores: ArrayLike, cov: ArrayLike, *, alpha: float = 0.05
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Best and worst rank of each system (1: highest score) from pairwise differences.

    b is surely above a when ``s_b - s_a - z * sd(s_b - s_a) > 0`` with
    ``var(s_b - s_a) = C_aa + C_bb - 2 C_ab``; ``rank_low = 1 + #surely above``,
    ``rank_high = k - #surely below``.
    """
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(cov, dtype=np.float64)
    k = s.shape[0]
    if c.shape != (k, k):
        raise ValueError(f"cov must be {k} x {k}, got {c.shape}")
    var = np.diag(c)[:, None] + np.diag(c)[None, :] - 2.0 * c
    diff = s[None, :] - s[:, None]  # [a, b] = s_b - s_a
    above = diff - z_value(alpha) * np.sqrt(np.clip(var, 0.0, None)) > 0.0  # [a, b]: b above a
    rank_low = 1 + above.sum(axis=1)
    rank_high = k - above.sum(axis=0)
    return rank_low.astype(np.int64), rank_high.astype(np.int64)


def _result(
    lab: dict[str, NDArray], unl: dict[str, NDArray], k: int, lam: float, alpha: float
) -> dict[str, Any]:
    """Fit at ``lam`` and lay out scores, intervals, ranks (plain lists for JSON)."""
    n, N = lab["x"].shape[0], unl["x"].shape[0]
    theta = _fit_free(lab, unl, lam)
    grads, grads_hat, grads_u, inv_h = _stats(theta, lab, unl, pooled=lam != 0.0)
    var = _cov2(grads - lam * grads_hat)
    if lam != 0.0:
        var = var + n / N * _cov2(lam * grads_u)
    m = _centre_map(k)
    cov = m @ (inv_h @ var @ inv_h / n) @ m.T
    scores = m @ theta
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    z = z_value(alpha)
    rank_low, rank_high = rank_bounds(scores, cov, alpha=alpha)
    return {
        "scores": scores.tolist(),
        "low": (scores - z * se).tolist(),
        "high": (scores + z * se).tolist(),
        "se": se.tolist(),
        "rank_low": rank_low.tolist(),
        "rank_high": rank_high.tolist(),
        "lam": float(lam),
        "n": int(n),
        "N": int(N),
        "cov": cov.tolist(),
    }


def bradley_terry(
    human: ArrayLike,
    judge_labeled: ArrayLike,
    judge_unlabeled: ArrayLike,
    n_systems: int,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
    weights: ArrayLike | None = None,
) -> dict[str, Any]:
    """Prediction-powered Bradley-Terry scores, intervals and rank intervals.

    ``human``: rows (i, j, y), y in [0, 1] the share of the battle won by j;
    ``judge_labeled``: the judge's (i, j, yhat) on the same battles, same order;
    ``judge_unlabeled``: (i, j, yhat) on battles people did not judge (may be empty:
    then lambda is 0). ``weights``: per human battle (e.g. inverse sampling
    probabilities), normalised to mean 1 as ppi-python does; they weigh the labeled
    rows of both people and judge. ``lam=None``: power tuned; else in [0, 1].

    Returns ``{"scores", "low", "high", "se", "rank_low", "rank_high", "lam", "n", "N",
    "cov", "people_only", "judge_only"}``: scores are sum-zero natural-log strengths;
    ``people_only`` is the same without the judge (lam = 0) and ``judge_only`` the plain
    fit on the judge's answers alone (labeled and unlabeled battles, unweighted, its
    sandwich interval), both with the same keys but the last two; ``judge_only`` is
    ``{"error": why}`` when the judge's battles alone have no fit (separated).
    """
    k = checks.integer(n_systems, "n_systems", low=2)
    alpha = checks.confidence(alpha, "alpha")
    if lam is not None and (isinstance(lam, bool) or not isinstance(lam, numbers.Real)):
        raise ValueError(f"lam must be a number in [0, 1] or None, got {lam!r}")
    lam_value = None if lam is None else float(lam)
    if lam_value is not None and not 0.0 <= lam_value <= 1.0:  # also False for NaN
        raise ValueError(f"lam must be in [0, 1] (the loss is convex only there), got {lam}")
    h = _rows(human, "human", k, 2)
    j = _rows(judge_labeled, "judge_labeled", k, 2)
    u = _rows(judge_unlabeled, "judge_unlabeled", k, 0)
    if h.shape[0] != j.shape[0] or np.any(h[:, :2] != j[:, :2]):
        raise ValueError("judge_labeled must hold the human battles, same systems, same order")
    n, N = h.shape[0], u.shape[0]
    if weights is None:
        w = np.ones(n)
    else:
        w = checks.finite_array(weights, "weights")
        if w.shape != (n,) or np.any(w <= 0.0):
            raise ValueError(f"weights must be {n} positive numbers (one per human battle)")
        w = w / w.sum() * n
    lab = {"x": _design(h, k), "y": h[:, 2], "yhat": j[:, 2], "w": w}
    unl = {"x": _design(u, k), "yhat": u[:, 2]}
    if N < 2:
        if lam_value not in (None, 0.0):
            raise ValueError("lam must be 0 with fewer than 2 judge-only battles")
        lam_value = 0.0
    elif lam_value is None:
        lam_value = _tune(lab, unl, k)
    both = np.concatenate([j, u])
    judge = {"x": _design(both, k), "y": both[:, 2], "yhat": both[:, 2], "w": np.ones(n + N)}
    fits = (("combined", lab, lam_value), ("people-only", lab, 0.0), ("judge-only", judge, 0.0))
    results: list[dict[str, Any]] = []
    for name, rows, lam_fit in fits:
        try:
            results.append(_result(rows, unl, k, lam_fit, alpha))
        except ValueError as exc:
            if name != "judge-only":
                raise ValueError(f"{name} Bradley-Terry: {exc}") from exc
            # The judge-only fit is shown for comparison, never used: a judge that always
            # prefers one system separates its battles, and the valid fits still stand.
            results.append({"error": f"{name} Bradley-Terry: {exc}"})
    result, result["people_only"], result["judge_only"] = results[0], results[1], results[2]
    return result
