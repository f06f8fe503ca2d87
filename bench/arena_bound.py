"""What any static pairing design can save over uniform pairing, asymptotically (issue 23).

    .venv/bin/python bench/arena_bound.py

No crowd and no platform: the variance formulas at known true strengths, so the adaptive
target of ``bench/arena.py`` can be read against what is possible at all. For systems
evenly spaced over [-spread, spread] natural log-odds, the share of uniform pairing's
battles that the best static design needs for the same precision of the adjacent orders:

- ``ipw_sum``: the inverse-probability-weighted fit (what an adaptive arena study reports),
  sum of the adjacent variances, Neyman's closed form (``arena.design_bound``);
- ``ipw_minimax`` and ``mle_minimax``: the worst adjacent variance, minimised numerically
  over the pair probabilities, for the weighted fit and for the plain maximum-likelihood
  fit (no weights; unbiased only when the Bradley-Terry model holds exactly).

The weighted variance of a contrast c is ``sum_p (c' H^-1 x_p)^2 I_p / q_p`` per battle,
``H`` the uniform design's information; the plain fit's is ``c' (sum_p q_p I_p x_p x_p')^-1
c``. Results print as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arena import design_bound, design_matrices  # noqa: E402  (the bench's own bound)

SETTINGS = [(6, 1.5), (6, 3.0), (12, 1.5), (12, 3.0), (14, 3.0)]


def minimax_share(s: np.ndarray, weighted: bool) -> float:
    """Worst adjacent variance of the best static design / of the uniform design."""
    x, info, c = design_matrices(s)
    n = len(info)
    lever = c @ np.linalg.pinv(x.T @ (info[:, None] * x / n)) @ x.T

    def worst(q: np.ndarray) -> float:
        if weighted:
            return float((((lever / n) ** 2) * info / q).sum(axis=1).max())
        h_inv = np.linalg.pinv(x.T @ ((q * info)[:, None] * x))
        return float(np.einsum("ci,ij,cj->c", c, h_inv, c).max())

    def objective(z: np.ndarray) -> float:
        return worst(np.exp(z) / np.exp(z).sum())

    best = minimize(objective, np.zeros(n), method="Nelder-Mead", options={"maxiter": 40_000})
    for _ in range(3):  # restarts: Nelder-Mead stalls in 15+ dimensions
        best = minimize(objective, best.x, method="Nelder-Mead", options={"maxiter": 40_000})
    return round(best.fun / worst(np.full(n, 1.0 / n)), 3)


def main() -> None:
    rows = []
    for k, spread in SETTINGS:
        s = np.linspace(-spread, spread, k)[::-1]  # strongest first
        row = {"systems": k, "spread": spread, "ipw_sum": design_bound(s)["all_adjacent"]}
        if k <= 6:  # the numerical minimax is slow beyond 15 pairs
            row["ipw_minimax"] = minimax_share(s, weighted=True)
            row["mle_minimax"] = minimax_share(s, weighted=False)
        rows.append(row)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
