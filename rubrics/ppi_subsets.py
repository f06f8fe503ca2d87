"""People + judge on random human subsets of a fully judged set (issue 40, "Real data").

The experiment behind ``tests/rubrics/test_ppi_thumb.py`` and ``bench/ppi_thumb.py``: a
system's ``M`` units all carry a judge's prediction and a human score; people are
pretended to have answered only a random ``n`` of them (drawn without replacement), the
judge's predictions on the other ``N = M - n`` are the unlabeled set, and
:func:`rubrics.ppi.ppi_mean` (PPI++, power-tuned lambda) gives the combined interval for
the mean of the ``M`` human scores. Over many draws: how often the combined and the
people-only (:func:`rubrics.ppi.people_only`) intervals cover the full-data mean, and the
ratio of their mean widths, beside what the PPI++ variance formula predicts
(:func:`predicted_width_ratio`).

Real data: THumB 1.0 (``../shared/datasets/thumb-1.0``), 500 images x 5 systems, judged by
the metric lab's own scorer (:func:`rubrics.metrics.compute`, the function
``annotation/services/metrics.py`` calls, over all 2,500 captions in one call as the lab
does). A metric is not on the human scale (ROUGE-L in [0, 1], THumB's Total about 1-5),
and PPI++ clips the tuned lambda to [0, 1], which presumes the judge predicts the human
score itself: :func:`on_human_scale` maps the metric affinely onto the human scale with
the mean and spread of the *other* systems' captions, so no human score of the system
being estimated is used. An affine map changes nothing else: the intercept cancels in
``mean(yhat_unlabeled) - mean(yhat)`` and the slope is absorbed by the tuned lambda.
"""

from __future__ import annotations

import json
import statistics
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import metrics, ppi

__all__ = [
    "THUMB_SCORES",
    "ThumbData",
    "SubsetCell",
    "load_thumb",
    "on_human_scale",
    "predicted_width_ratio",
    "expected_coverage",
    "subset_draws",
    "subset_cell",
    "draw_seed",
]

#: THumB's human scores: the report's name -> the release's field.
THUMB_SCORES = {"Total": "human_score", "P": "P", "R": "R"}


@dataclass(frozen=True)
class ThumbData:
    """THumB 1.0 as ``systems x images`` matrices, images in sorted ``seg_id`` order.

    ``human[score][s, i]``: the human score of system ``systems[s]`` on image ``images[i]``;
    ``metric[name][s, i]``: the metric lab's score of that caption.
    """

    systems: list[str]
    images: list[str]
    human: dict[str, NDArray[np.float64]]
    metric: dict[str, NDArray[np.float64]]


def load_thumb(folder: Path, metric_names: Sequence[str]) -> ThumbData:
    """Read the THumB 1.0 release and its references in ``folder`` and score every caption.

    The captions are scored in one call of :func:`rubrics.metrics.compute` with the four
    references of ``mscoco_references.json`` (not the Human caption), as the metric lab
    scores a study (CIDEr's document frequencies then come from the 500 reference sets).
    Raises ValueError when a system lacks a caption of some image.
    """
    with (folder / "mscoco_THumB-1.0.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    with (folder / "mscoco_references.json").open(encoding="utf-8") as handle:
        refs = {o["seg_id"]: o["refs"] for o in map(json.loads, handle) if o}
    scores = metrics.compute(
        [r["hyp"] for r in rows], [refs[r["seg_id"]] for r in rows], list(metric_names)
    )
    systems = sorted({r["SYS"] for r in rows})
    images = sorted({r["seg_id"] for r in rows})
    if len(rows) != len(systems) * len(images):
        raise ValueError(f"{len(rows)} rows for {len(systems)} systems x {len(images)} images")
    s_index = {s: k for k, s in enumerate(systems)}
    i_index = {i: k for k, i in enumerate(images)}
    where = (
        np.array([s_index[r["SYS"]] for r in rows]),
        np.array([i_index[r["seg_id"]] for r in rows]),
    )

    def grid(values: ArrayLike) -> NDArray[np.float64]:
        out = np.full((len(systems), len(images)), np.nan)
        out[where] = values
        if np.isnan(out).any():
            raise ValueError("a system lacks a caption of some image")
        return out

    return ThumbData(
        systems=systems,
        images=images,
        human={k: grid([r[f] for r in rows]) for k, f in THUMB_SCORES.items()},
        metric={name: grid(scores[name]) for name in metric_names},
    )


def on_human_scale(
    metric: ArrayLike, human: ArrayLike, fit: ArrayLike, apply: ArrayLike
) -> NDArray[np.float64]:
    """``metric[apply]`` mapped affinely so that, on the units ``fit``, its mean and
    standard deviation are those of ``human[fit]`` (``fit``: the other systems' captions)."""
    x, h = np.asarray(metric, float), np.asarray(human, float)
    fit, apply = np.asarray(fit, bool), np.asarray(apply, bool)
    spread = x[fit].std()
    if spread == 0:
        raise ValueError("the metric is constant on the fitting units")
    return h[fit].mean() + h[fit].std() * (x[apply] - x[fit].mean()) / spread


def _moments(y: NDArray[np.float64], yhat: NDArray[np.float64]) -> tuple[float, float, float]:
    """Population variance of y, of yhat and their covariance (divisor M - 1)."""
    c = np.cov(y, yhat)
    return float(c[0, 0]), float(c[1, 1]), float(c[0, 1])


def predicted_width_ratio(y: ArrayLike, yhat: ArrayLike, n: int) -> float:
    """Combined over people-only standard error predicted by the PPI++ variance formula.

    With ``N = M - n`` unlabeled units, ``Var(lam) = [S_y^2 - 2 lam S_yh + lam^2 S_h^2
    (1 + n / N)] / n`` and the tuned ``lam* = S_yh / ((1 + n / N) S_h^2)``, clipped to
    [0, 1] as PPI++ clips it; at an unclipped ``lam*`` the ratio is
    ``sqrt(1 - rho^2 N / (n + N))``. Moments are the full data's (``y``, ``yhat`` over all M).
    """
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    big_n = len(y) - n
    if n < 2 or big_n < 1:
        raise ValueError(f"need 2 <= n < M, got n={n}, M={len(y)}")
    s_y, s_h, s_yh = _moments(y, yhat)
    lam = min(max(s_yh / ((1 + n / big_n) * s_h), 0.0), 1.0)
    return float(np.sqrt((s_y - 2 * lam * s_yh + lam**2 * s_h * (1 + n / big_n)) / s_y))


def expected_coverage(y: ArrayLike, yhat: ArrayLike, n: int, *, alpha: float = 0.05) -> dict:
    """Coverage of the full-data mean when the ``n`` units are drawn without replacement.

    The CLT interval estimates the i.i.d. variance ``V``; without replacement from the M
    units the estimate's variance is ``V - S_y^2 / M`` (any fixed lambda, see the test's
    docstring), so the interval is wider than it needs: coverage
    ``2 Phi(z sqrt(V / (V - S_y^2 / M))) - 1``, for people-only (lambda 0) and combined
    (the clipped ``lam*``).
    """
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    m = len(y)
    big_n = m - n
    s_y, s_h, s_yh = _moments(y, yhat)
    lam = min(max(s_yh / ((1 + n / big_n) * s_h), 0.0), 1.0)
    normal = statistics.NormalDist()
    z = normal.inv_cdf(1 - alpha / 2)
    out = {}
    for name, value in (("people", 0.0), ("combined", lam)):
        iid = (s_y - 2 * value * s_yh + value**2 * s_h * (1 + n / big_n)) / n
        out[name] = 2 * normal.cdf(z * float(np.sqrt(iid / (iid - s_y / m)))) - 1
    return out


def draw_seed(*parts: object) -> int:
    """A seed from stable things (names, sizes), never an id or a row order."""
    return zlib.crc32("/".join(map(str, parts)).encode())


def subset_draws(m: int, n: int, subsets: int, seed: int) -> NDArray[np.intp]:
    """``subsets x m`` index rows: each a random permutation of ``range(m)``; the first ``n``
    of a row are the units people answered, the rest the judge-only units."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((subsets, m)), axis=1)


@dataclass(frozen=True)
class SubsetCell:
    """One system, one human score, one subset size, over ``subsets`` draws."""

    n: int
    N: int
    subsets: int
    rho: float
    mu: float
    coverage: float
    people_coverage: float
    combined_width: float
    people_width: float
    ratio: float
    predicted: float
    lam: float
    lam_clipped: float
    spread_ratio: float


def subset_cell(
    y: ArrayLike, yhat: ArrayLike, draws: NDArray[np.intp], n: int, *, alpha: float = 0.05
) -> SubsetCell:
    """Coverage of ``mean(y)`` and mean widths over the draws (rows of :func:`subset_draws`).

    ``ratio`` = mean combined width / mean people-only width; ``predicted`` =
    :func:`predicted_width_ratio`; ``lam`` the mean tuned lambda and ``lam_clipped`` the
    share of draws where it sat on 0 or 1; ``spread_ratio`` the standard deviation of the
    combined estimates over that of the people-only ones across the draws (without
    replacement and at a fixed lam*, exactly ``sqrt(1 - rho^2)`` whatever n; with lambda
    tuned per draw, about that).
    """
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    mu = float(y.mean())
    labeled, unlabeled = draws[:, :n], draws[:, n:]
    ys, hs, us = y[labeled], yhat[labeled], yhat[unlabeled]
    comb = [ppi.ppi_mean(a, b, c, alpha=alpha) for a, b, c in zip(ys, hs, us, strict=True)]
    people = [ppi.people_only(a, alpha=alpha) for a in ys]
    c_low = np.array([c.interval.low for c in comb])
    c_high = np.array([c.interval.high for c in comb])
    p_low = np.array([p.low for p in people])
    p_high = np.array([p.high for p in people])
    lams = np.array([c.lam for c in comb])
    c_est = np.array([c.interval.estimate for c in comb])
    p_est = np.array([p.estimate for p in people])
    return SubsetCell(
        n=n,
        N=len(y) - n,
        subsets=len(draws),
        rho=float(np.corrcoef(y, yhat)[0, 1]),
        mu=mu,
        coverage=float(np.mean((c_low <= mu) & (mu <= c_high))),
        people_coverage=float(np.mean((p_low <= mu) & (mu <= p_high))),
        combined_width=float(np.mean(c_high - c_low)),
        people_width=float(np.mean(p_high - p_low)),
        ratio=float(np.mean(c_high - c_low) / np.mean(p_high - p_low)),
        predicted=predicted_width_ratio(y, yhat, n),
        lam=float(lams.mean()),
        lam_clipped=float(np.mean((lams <= 0) | (lams >= 1))),
        spread_ratio=float(c_est.std() / p_est.std()),
    )
