"""Adaptive pairing: which system pairs to serve next, for the study's goal (pure numpy).

An adaptive arena study serves the battles that most reduce the chance of getting its goal
wrong (issue 23; goals and the plain fit, issue 47). The goal is one of:

- ``order``: the whole order (Kendall tau); the contrasts that decide it are the adjacent
  ones in the current order;
- ``top``: the set of the ``top`` best systems; the contrasts are every system inside the
  set against every system outside it;
- ``system``: one named system against the rest; its contrast with every other system.

Each contrast ``c = e_i - e_j`` is weighted by its flip probability ``f_c = Phi(-|s_i -
s_j| / sd(s_i - s_j))`` from the current scores and covariance: a settled order (f near 0)
asks for nothing, a coin flip (f = 1/2) for the most. The design then minimises ``sum_c f_c
Var_c`` over the pair probabilities, for the fit the leaderboard reports:

- ``fit="plain"``: the plain Bradley-Terry fit, ``Var_c = c' (sum_p q_p I_p x_p x_p')^-1 c``
  (``x_p = e_a - e_b``, ``I_p = pi_p (1 - pi_p)`` one battle's information): an L-optimal
  design, found by Torsney's multiplicative algorithm (the criterion is convex in q);
- ``fit="ipw"``: the inverse-probability-weighted fit, whose variance is ``sum_p (c' H^-1
  x_p)^2 I_p / q_p`` with ``H`` the uniform design's information (the weights pull the fit
  back to the uniform design's): Neyman's allocation ``q_p ~ sqrt(I_p sum_c f_c (c' H^-1
  x_p)^2)`` in closed form.

A share ``explore`` is spread uniformly, so every pair keeps probability at least ``explore
/ len(pairs)`` (the weighted fit, the robustness check beside the plain one, needs every
pair served). When every order the goal needs is settled (all f = 0) the draw is uniform.

**Counting the battles already served** (``served``, ``coming``; the plain fit). A design
for ``H(q)`` alone is the best *stationary* allocation: the one to run from the start had
the current fit been known then. It ignores that the study already holds ``n_p`` battles
of each pair, most of them drawn before the fit knew where the doubt is, so the variance
that matters lags (traced in ``bench/results-arena.md``: the pair at the top-4 boundary had
2.4% of a study's battles while the last design asked 11%). Given ``served`` and the
``coming`` battles until the design is next refitted, the plain design instead minimises
``sum_c f_c c' (H_past + m e H(u) + m (1 - e) H(q))^+ c``, with ``H_past = sum_p n_p I_p x_p
x_p'`` the information already held, ``m`` = ``coming``, ``e`` = ``explore`` and ``u`` the
uniform draw it still mixes in: the next battles go where the information is missing, so
the cumulative allocation catches up with the current doubt within one refit rather than
drifting towards it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rubrics.arena import ELO_PER_NATURAL, logistic

GOALS = ("order", "top", "system")
FITS = ("plain", "ipw")
#: Torsney steps for the plain fit's design: the criterion falls fast, and the draw needs
#: no more than two decimals of each probability.
PLAIN_STEPS = 300


def goal_contrasts(
    scores: np.ndarray, goal: str, *, top: int = 4, system: int | None = None
) -> np.ndarray:
    """The contrasts that decide ``goal`` at the current ``scores`` (rows ``e_i - e_j``)."""
    k = len(scores)
    order = np.argsort(-scores, kind="stable")
    pairs: list[tuple[int, int]]
    if goal == "order":
        pairs = [(int(order[r]), int(order[r + 1])) for r in range(k - 1)]
    elif goal == "top":
        if not 1 <= top < k:
            raise ValueError(f"top must be from 1 to {k - 1} (the systems but one)")
        pairs = [(int(i), int(j)) for i in order[:top] for j in order[top:]]
    elif goal == "system":
        if system is None or not 0 <= system < k:
            raise ValueError("goal 'system' needs the index of one of the systems")
        pairs = [(system, j) for j in range(k) if j != system]
    else:
        raise ValueError(f"goal must be one of {GOALS}")
    contrasts = np.zeros((len(pairs), k))
    for row, (i, j) in enumerate(pairs):
        contrasts[row, i], contrasts[row, j] = 1.0, -1.0
    return contrasts


def adaptive_pair_probabilities(
    scores: Sequence[float] | np.ndarray,
    cov: np.ndarray,
    explore: float = 0.2,
    pairs: Sequence[tuple[int, int]] | None = None,
    *,
    goal: str = "order",
    top: int = 4,
    system: int | None = None,
    fit: str = "ipw",
    served: Sequence[float] | np.ndarray | None = None,
    coming: float = 0.0,
) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Sampling probabilities over pairs for ``goal`` (see the module docstring).

    ``scores`` and ``cov`` are the current fit on LMArena's scale (``rubrics.arena.fit``,
    ``rubrics.arena.sandwich``). ``served``: the battles already held of each pair (in the
    pairs' order) and ``coming``: how many are expected before the next refit; with both,
    the plain fit's design counts what is held (the module docstring). Returns the pairs
    (i < j, or as given) and their probabilities, summing to 1.
    """
    s = np.asarray(scores, dtype=float)
    c = np.asarray(cov, dtype=float)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 2:
        raise ValueError("cov must be a square matrix over at least two systems")
    k = c.shape[0]
    if s.shape != (k,):
        raise ValueError(f"{s.size} scores for a {k} x {k} covariance")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(s))):
        raise ValueError("scores or cov have a non-finite entry")
    if not 0.0 < explore <= 1.0:
        raise ValueError("explore must be in (0, 1]")
    if fit not in FITS:
        raise ValueError(f"fit must be one of {FITS}")
    if pairs is None:
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    else:
        pairs = list(pairs)
        for i, j in pairs:
            if not (0 <= i < k and 0 <= j < k) or i == j:
                raise ValueError(f"pair {(i, j)} is not two distinct systems")
    if not pairs:
        raise ValueError("no pairs to choose from")
    held = None
    if served is not None:
        held = np.asarray(served, dtype=float)
        if held.shape != (len(pairs),):
            raise ValueError(f"{held.size} battle counts for {len(pairs)} pairs")
        if not (np.all(np.isfinite(held)) and np.all(held >= 0)):
            raise ValueError("battle counts must be finite and not negative")
        if not (np.isfinite(coming) and coming > 0):
            raise ValueError("coming must be a positive number of battles")
    ii = np.array([p[0] for p in pairs])
    jj = np.array([p[1] for p in pairs])
    x = np.zeros((len(pairs), k))
    x[np.arange(len(pairs)), ii] = 1.0
    x[np.arange(len(pairs)), jj] = -1.0
    # Information of one battle of each pair at the current scores (natural log-odds).
    win = logistic((s[ii] - s[jj]) / ELO_PER_NATURAL)
    info = win * (1.0 - win)
    contrasts = goal_contrasts(s, goal, top=top, system=system)
    gap = contrasts @ s
    sd = np.sqrt(np.clip(np.einsum("ci,ij,cj->c", contrasts, c, contrasts), 0.0, None))
    from scipy import stats  # lazily, as every scipy use here (the export path's budget)

    flip = np.where(sd > 0, stats.norm.cdf(-np.abs(gap) / np.where(sd > 0, sd, 1.0)), 0.0)
    uniform = np.full(len(pairs), 1.0 / len(pairs))
    if flip.sum() <= 1e-12:
        return pairs, uniform
    if fit == "ipw":
        # H^-1 on the contrasts (scores sum-free): the pseudo-inverse of the Laplacian.
        lever = contrasts @ np.linalg.pinv(x.T @ (info[:, None] * x)) @ x.T
        need = np.sqrt(info * (flip[:, None] * lever**2).sum(axis=0))
        greedy = need / need.sum() if need.sum() > 1e-12 else uniform
    elif held is None:
        greedy = _plain_design(x, info, contrasts, flip)
    else:
        # What is held and the uniform share still to come are fixed; the rest is chosen.
        fixed = x.T @ (((held + coming * explore * uniform) * info)[:, None] * x)
        greedy = _plain_design(x, info, contrasts, flip, fixed=fixed, scale=coming * (1 - explore))
    return pairs, (1.0 - explore) * greedy + explore * uniform


def _plain_design(
    x: np.ndarray,
    info: np.ndarray,
    contrasts: np.ndarray,
    weight: np.ndarray,
    *,
    fixed: np.ndarray | None = None,
    scale: float = 1.0,
) -> np.ndarray:
    """The L-optimal design for the plain fit: min over the simplex of ``F(q) = sum_c w_c
    c' M(q)^+ c``, ``M(q) = fixed + scale H(q)`` (``fixed`` = 0, ``scale`` = 1: the
    stationary design), by Torsney's step ``q_p <- q_p sqrt(g_p / sum_r q_r g_r)`` (``g_p =
    -dF/dq_p``), which stays on the simplex; at the optimum no ``g_p`` exceeds that sum (the
    equivalence theorem). F is convex in q; the best q met is returned, so a step that
    overshoots (possible once ``fixed`` breaks F's homogeneity) costs nothing. Starts from
    the uniform design (every pair, so M is a connected graph's Laplacian and the
    pseudo-inverse is the fit's variance)."""
    q = np.full(len(info), 1.0 / len(info))
    best, best_value = q, np.inf
    base = np.zeros((x.shape[1], x.shape[1])) if fixed is None else fixed
    for _ in range(PLAIN_STEPS):
        m_inv = np.linalg.pinv(base + scale * (x.T @ ((q * info)[:, None] * x)))
        lever = contrasts @ m_inv @ x.T
        value = float(weight @ np.einsum("ci,ij,cj->c", contrasts, m_inv, contrasts))
        if value < best_value:
            best, best_value = q, value
        g = scale * info * (weight @ lever**2)
        total = float(q @ g)
        if value <= 0 or total <= 0:
            break
        q = q * np.sqrt(g / total)
        q /= q.sum()
    return best
