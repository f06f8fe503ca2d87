"""Adaptive pairing for a goal (issue 47): the contrasts each goal needs, where each sends
the battles, and the plain fit's design is the optimum (by the equivalence theorem)."""

import numpy as np
import pytest

from rubrics import arena_design

# Elo-like scores: 0 and 1 far apart at the top, 2 and 3 nearly tied, 4 far below.
SCORES = np.array([1300.0, 1150.0, 1010.0, 1000.0, 800.0])
COV = np.eye(5) * 400.0


def probabilities(**goal):
    pairs, p = arena_design.adaptive_pair_probabilities(SCORES, COV, explore=0.1, **goal)
    return dict(zip(pairs, p, strict=True))


def test_each_goal_names_its_contrasts():
    order = arena_design.goal_contrasts(SCORES, "order")
    assert [tuple(np.flatnonzero(row)) for row in order] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    top = arena_design.goal_contrasts(SCORES, "top", top=2)
    assert sorted(tuple(sorted(np.flatnonzero(r))) for r in top) == [
        (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)
    ]  # fmt: skip
    one = arena_design.goal_contrasts(SCORES, "system", system=3)
    assert sorted(int(np.flatnonzero(r == -1)[0]) for r in one) == [0, 1, 2, 4]
    assert all(r[3] == 1 for r in one)
    with pytest.raises(ValueError, match="top must be from 1 to 4"):
        arena_design.goal_contrasts(SCORES, "top", top=5)
    with pytest.raises(ValueError, match="needs the index"):
        arena_design.goal_contrasts(SCORES, "system")


@pytest.mark.parametrize("fit", ["plain", "ipw"])
def test_the_goal_decides_where_battles_go(fit):
    # The whole order: the near tie (2, 3) is the doubt.
    order = probabilities(goal="order", fit=fit)
    assert max(order, key=order.get) == (2, 3)
    # The best two: 1 against 2 and 3 decides it, the tie between 2 and 3 does not.
    top = probabilities(goal="top", top=2, fit=fit)
    assert top[(1, 2)] + top[(1, 3)] > top[(2, 3)]
    assert top[(2, 3)] < order[(2, 3)]
    # System 2 against each other: its near tie with 3 first, and its own pairs most.
    named = probabilities(goal="system", system=2, fit=fit)
    assert max(named, key=named.get) == (2, 3)
    assert sum(p for pair, p in named.items() if 2 in pair) > 0.5
    for design in (order, top, named):
        assert sum(design.values()) == pytest.approx(1.0)
        assert min(design.values()) >= 0.1 / len(design) - 1e-12


def _pairs_x_info(scores):
    k = len(scores)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    x = np.zeros((len(pairs), k))
    for row, (i, j) in enumerate(pairs):
        x[row, i], x[row, j] = 1.0, -1.0
    win = 1 / (1 + 10 ** (-(x @ scores) / 400))
    return pairs, x, win * (1 - win)


def test_the_plain_design_meets_the_equivalence_theorem():
    """A design q is L-optimal iff no pair's gradient g_p exceeds F(q) = sum_c w_c Var_c."""
    pairs, x, info = _pairs_x_info(SCORES)
    contrasts = arena_design.goal_contrasts(SCORES, "order")
    weight = np.array([0.1, 0.3, 0.5, 0.05])
    q = arena_design._plain_design(x, info, contrasts, weight)
    h_inv = np.linalg.pinv(x.T @ ((q * info)[:, None] * x))
    value = weight @ np.einsum("ci,ij,cj->c", contrasts, h_inv, contrasts)
    g = info * (weight @ (contrasts @ h_inv @ x.T) ** 2)
    assert g.max() <= value * 1.01
    # and it beats the uniform design
    u = np.full(len(pairs), 1 / len(pairs))
    h_u = np.linalg.pinv(x.T @ ((u * info)[:, None] * x))
    assert value < weight @ np.einsum("ci,ij,cj->c", contrasts, h_u, contrasts)


def _sequential_value(q, x, info, contrasts, weight, fixed, scale):
    m_inv = np.linalg.pinv(fixed + scale * (x.T @ ((q * info)[:, None] * x)))
    return float(weight @ np.einsum("ci,ij,cj->c", contrasts, m_inv, contrasts))


# Battles already held: plenty of the near tie (2, 3), none beyond the uniform start elsewhere.
HELD = np.array([20.0, 20, 20, 20, 20, 20, 20, 20, 20, 400])  # pairs in (i < j) order


def test_the_design_that_counts_what_is_held_meets_the_equivalence_theorem():
    """With a fixed part the criterion is still convex in q: q is optimal iff no pair's
    gradient g_p exceeds sum_r q_r g_r; and it is the optimum an independent solver finds."""
    from scipy.optimize import minimize

    pairs, x, info = _pairs_x_info(SCORES)
    contrasts = arena_design.goal_contrasts(SCORES, "order")
    weight = np.array([0.1, 0.3, 0.5, 0.05])
    fixed = x.T @ ((HELD * info)[:, None] * x)
    scale = 200.0
    q = arena_design._plain_design(x, info, contrasts, weight, fixed=fixed, scale=scale)
    assert q.sum() == pytest.approx(1.0) and q.min() >= 0
    m_inv = np.linalg.pinv(fixed + scale * (x.T @ ((q * info)[:, None] * x)))
    g = scale * info * (weight @ (contrasts @ m_inv @ x.T) ** 2)
    assert g.max() <= (q @ g) * 1.01
    # SciPy's SLSQP over the simplex, from the uniform design: the same value.
    n = len(pairs)
    solved = minimize(
        _sequential_value,
        np.full(n, 1 / n),
        args=(x, info, contrasts, weight, fixed, scale),
        method="SLSQP",
        bounds=[(0, 1)] * n,
        constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1}],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    assert solved.success
    ours = _sequential_value(q, x, info, contrasts, weight, fixed, scale)
    assert ours == pytest.approx(solved.fun, rel=2e-3)
    assert ours <= solved.fun * (1 + 2e-3)


def test_what_is_held_moves_the_next_battles_to_what_is_missing():
    """Two doubts of the whole order, the near ties (0, 1) and (2, 3): the stationary design
    splits the battles between them. With (0, 1) already held 400 times and the rest only
    at the uniform start, the next battles go to (2, 3), the information still missing;
    with every pair held alike, they split as before."""
    scores = np.array([1100.0, 1090.0, 1000.0, 990.0, 800.0])
    pairs, _, _ = _pairs_x_info(scores)
    first, second = pairs.index((0, 1)), pairs.index((2, 3))

    def design(**held):
        _, p = arena_design.adaptive_pair_probabilities(
            scores, COV, explore=0.1, goal="order", fit="plain", **held
        )
        return p

    stationary = design()
    assert stationary[first] == pytest.approx(stationary[second], abs=0.01)
    assert stationary[first] + stationary[second] > 0.8
    rich = np.full(len(pairs), 20.0)
    rich[first] = 400
    caught_up = design(served=rich, coming=200)
    assert caught_up[second] > 0.8 and caught_up[first] < stationary[first] / 4
    even = design(served=np.full(len(pairs), 20.0), coming=200)
    assert even[first] == pytest.approx(even[second], abs=0.05)
    for p in (caught_up, even):
        assert p.sum() == pytest.approx(1.0)
        assert p.min() >= 0.1 / len(pairs) - 1e-12


def test_the_held_battles_are_checked():
    with pytest.raises(ValueError, match="3 battle counts for 10 pairs"):
        arena_design.adaptive_pair_probabilities(SCORES, COV, served=[1, 2, 3], coming=5)
    with pytest.raises(ValueError, match="not negative"):
        arena_design.adaptive_pair_probabilities(SCORES, COV, served=-HELD, coming=5)
    with pytest.raises(ValueError, match="coming must be a positive"):
        arena_design.adaptive_pair_probabilities(SCORES, COV, served=HELD, coming=0)
