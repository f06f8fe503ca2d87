"""What any static pairing design can save over uniform pairing, asymptotically (issue 23,
its optimiser fixed in issue 47).

    .venv/bin/python bench/arena_bound.py

No crowd and no platform: the variance formulas at known true strengths, so the adaptive
targets of ``bench/arena.py`` can be read against what is possible at all. For each crowd
(systems evenly spaced over [-spread, spread] natural log-odds, and the audit's uneven
14-system crowd given in Elo), the share of uniform pairing's battles that the best
static design needs for the same precision of the adjacent orders:

- ``ipw_sum``: the inverse-probability-weighted fit (what an adaptive arena study reports),
  sum of the adjacent variances, Neyman's closed form (``arena.design_bound``: exact);
- ``mle_sum``: the plain maximum-likelihood fit (no weights; unbiased only when the
  Bradley-Terry model holds exactly), sum of the adjacent variances;
- ``ipw_minimax`` and ``mle_minimax``: the worst adjacent variance.

Each criterion is convex in the pair probabilities q (a sum or maximum of matrix-fractional
functions c' H(q)^-1 c with H linear in q, or of sum_p a_p / q_p), so the optimum is
found, not searched for: the sums by Torsney's multiplicative algorithm, the minimax by
its dual (max over contrast weights w of the sum's optimum, by exponentiated-gradient
ascent). Each figure prints with a certified interval [lower, upper]: ``upper`` is a design
that exists; ``lower`` bounds every static design (the Frank-Wolfe gap of a convex
function on the simplex, 2 F(q) - max_p g_p here since F is homogeneous of degree -1, and
weak duality for the minimax). The Nelder-Mead search this replaced had stopped short of
the optimum (the audit: 0.753 printed where 0.658 is reached).

The weighted variance of a contrast c is ``sum_p (c' H^-1 x_p)^2 I_p / q_p`` per battle,
``H`` the uniform design's information; the plain fit's is ``c' (sum_p q_p I_p x_p x_p')^-1
c``. Results print as JSON.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arena import design_bound, design_matrices  # noqa: E402  (the bench's own bound)

#: (name, true strengths in natural log-odds, strongest first).
ELO_PER_NATURAL = 400 / math.log(10)
#: The audit's uneven crowd (issue 47): some neighbours 6-7 Elo apart, one gap of 235.
UNEVEN_ELO = [1127, 1108, 1096, 1090, 1075, 1068, 1050, 1043, 1030, 1005, 998, 975, 955, 720]
CROWDS = [
    *(
        (f"{k} even over [-{spread:g}, {spread:g}]", np.linspace(spread, -spread, k))
        for k, spread in [(6, 1.5), (6, 3.0), (12, 1.5), (12, 3.0), (14, 3.0)]
    ),
    ("14 uneven (the audit's Elo)", (np.array(UNEVEN_ELO) - 1000) / ELO_PER_NATURAL),
]
#: Stop when the certified interval is this narrow (relative), or after this many steps.
TOLERANCE = 1e-4
MAX_STEPS = 20_000


def _reduced(s: np.ndarray):
    """The pair rows without the last system (the fit's free parameters: the scores are
    determined up to a shift), the information per battle and the adjacent contrasts."""
    x, info, adjacent = design_matrices(s)
    return x[:, :-1], info, adjacent[:, :-1]


def _mle_terms(x, info, contrasts, w, q):
    """F(q) = sum_c w_c c' H(q)^-1 c and g_p = -dF/dq_p = I_p sum_c w_c (c' H^-1 x_p)^2."""
    h_inv = np.linalg.inv(x.T @ ((q * info)[:, None] * x))
    lever = contrasts @ h_inv @ x.T  # (contrasts, pairs)
    variances = np.einsum("ci,ij,cj->c", contrasts, h_inv, contrasts)
    return float(w @ variances), info * (w @ lever**2), variances


def _ipw_terms(a, w, q):
    """The weighted fit: v_c(q) = sum_p a_cp / q_p, F = w'v, g_p = sum_c w_c a_cp / q_p^2."""
    variances = (a / q).sum(axis=1)
    return float(w @ variances), (w @ a) / q**2, variances


def _sum_optimum(terms, pairs: int) -> tuple[float, float, np.ndarray]:
    """min over the simplex of a convex F homogeneous of degree -1 in q: (F at the design
    found, a lower bound on every design's F, the design). Torsney's multiplicative step
    q_p <- q_p sqrt(g_p / F) keeps q on the simplex and decreases F; the Frank-Wolfe gap
    max_p g_p - q'g = max_p g_p - F bounds the distance to the optimum."""
    q = np.full(pairs, 1.0 / pairs)
    best, lower = math.inf, 0.0
    for _ in range(MAX_STEPS):
        value, g, _ = terms(q)
        best = min(best, value)
        lower = max(lower, 2 * value - float(g.max()))
        if best - lower <= TOLERANCE * best:
            break
        q = q * np.sqrt(g / value)
        q /= q.sum()
    return best, lower, q


def sum_share(s: np.ndarray, *, weighted: bool) -> dict[str, float]:
    """The best static design's share of uniform's battles for the sum of the adjacent
    variances, as [lower, upper]."""
    x, info, contrasts = _reduced(s)
    w = np.ones(len(contrasts))
    terms = _terms(x, info, contrasts, weighted)
    uniform = terms(w, np.full(len(info), 1.0 / len(info)))[0]
    upper, lower, _ = _sum_optimum(lambda q: terms(w, q), len(info))
    return {"lower": round(lower / uniform, 3), "upper": round(upper / uniform, 3)}


def minimax_share(s: np.ndarray, *, weighted: bool, steps: int = 300) -> dict[str, float]:
    """The best static design's share for the worst adjacent variance, as [lower, upper]:
    min_q max_c v_c(q) = max_w min_q w'v(q) (convex in q, linear in w). Each w's inner
    optimum's lower bound is a lower bound of the minimax (weak duality); each inner
    design's worst variance is an upper one. w climbs by exponentiated gradient (v_c)."""
    x, info, contrasts = _reduced(s)
    terms = _terms(x, info, contrasts, weighted)
    n = len(info)
    uniform = float(terms(np.ones(len(contrasts)), np.full(n, 1.0 / n))[2].max())
    w = np.full(len(contrasts), 1.0 / len(contrasts))
    upper, lower = math.inf, 0.0
    for step in range(steps):
        _, inner_lower, q = _sum_optimum(lambda q, w=w: terms(w, q), n)
        variances = terms(w, q)[2]
        upper = min(upper, float(variances.max()))
        lower = max(lower, inner_lower)
        if upper - lower <= 1e-3 * upper:
            break
        w = w * np.exp(2.0 * variances / variances.max() / math.sqrt(step + 1))
        w /= w.sum()
    return {"lower": round(lower / uniform, 3), "upper": round(upper / uniform, 3)}


def _terms(x, info, contrasts, weighted: bool):
    """``(w, q) -> (F, g, each contrast's variance)`` for the chosen fit."""
    if not weighted:
        return lambda w, q: _mle_terms(x, info, contrasts, w, q)
    # The weighted fit's leverage is the uniform design's, fixed: a_cp = (c' H0^-1 x_p)^2 I_p
    # per battle at q_p = 1 (so v_c(q) is per battle, like the plain fit's).
    h0 = x.T @ (info[:, None] * x) / len(info)
    a = (contrasts @ np.linalg.inv(h0) @ x.T) ** 2 * info / len(info) ** 2
    return lambda w, q: _ipw_terms(a, w, q)


def main() -> None:
    rows = []
    for name, s in CROWDS:
        rows.append(
            {
                "crowd": name,
                "ipw_sum_exact": design_bound(np.asarray(s))["all_adjacent"],
                "ipw_sum": sum_share(s, weighted=True),
                "mle_sum": sum_share(s, weighted=False),
                "ipw_minimax": minimax_share(s, weighted=True),
                "mle_minimax": minimax_share(s, weighted=False),
            }
        )
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
