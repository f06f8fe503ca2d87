"""Inverse-probability weighting under adaptive pairing (rubrics/arena.py).

Setup: 6 systems whose true preferences are not exactly Bradley-Terry (two upsets: the
strongest loses to the weakest more often than BT says, and 1 to 4 likewise), so the BT
leaderboard's estimand depends on how often each pair is played. The target is LMArena's:
the BT fit under uniform pairing, computed here from the exact win probabilities with an
independent MM fit. Battles are served adaptively, 10 rounds of 1,000: after each round
the weighted fit and sandwich covariance feed ``adaptive_pair_probabilities`` (explore 0.1) and
each battle keeps the probability of its pair when served. Over 20 seeds, the IPW scores'
mean lies within 3.5 standard errors of the target for every system; the unweighted
scores' mean misses it by more than 4 standard errors for at least one system (it is
pulled towards the BT fit of the adaptive pair mix).
"""

import numpy as np

from rubrics import arena, arena_design

K = 6
NAMES = [f"s{i}" for i in range(K)]
THETA = np.linspace(1.0, -1.0, K)
UPSET = np.zeros((K, K))
UPSET[0, 5], UPSET[5, 0] = -2.5, 2.5
UPSET[1, 4], UPSET[4, 1] = -1.5, 1.5
P = 1 / (1 + np.exp(-(THETA[:, None] - THETA[None, :] + UPSET)))
np.fill_diagonal(P, 0.0)


def mm_fit(wins):
    """Hunter's MM algorithm on a (fractional) win matrix; independent of the module."""
    n = wins + wins.T
    w = wins.sum(axis=1)
    gamma = np.ones(len(w))
    for _ in range(100000):
        new = w / (n / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        new /= np.exp(np.log(new).mean())
        if np.max(np.abs(new - gamma)) < 1e-14:
            return np.log(new)
        gamma = new
    raise AssertionError("MM did not converge")


def adaptive_run(seed, rounds=10, per_round=1000):
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
    probs = np.full(len(pairs), 1 / len(pairs))
    sa, sb, out, served = [], [], [], []
    for _ in range(rounds):
        idx = rng.choice(len(pairs), size=per_round, p=probs)
        a = np.array([pairs[i][0] for i in idx])
        b = np.array([pairs[i][1] for i in idx])
        swap = rng.random(per_round) < 0.5
        a, b = np.where(swap, b, a), np.where(swap, a, b)
        won = rng.random(per_round) < P[a, b]
        sa += [NAMES[i] for i in a]
        sb += [NAMES[i] for i in b]
        out += list(np.where(won, "model_a", "model_b"))
        served += list(probs[idx])
        table = arena.count_table(sa, sb, out, arena.ipw_weights(served), systems=NAMES)
        _, cov = arena.sandwich(table, anchor=("s0", 1000.0))
        scores = arena.fit(table, anchor=("s0", 1000.0)).scores
        pairs, probs = arena_design.adaptive_pair_probabilities(scores, cov, explore=0.1)
    weighted = arena.count_table(sa, sb, out, arena.ipw_weights(served), systems=NAMES)
    plain = arena.count_table(sa, sb, out, systems=NAMES)
    balanced = arena.count_table(sa, sb, out, arena.pair_balanced_weights(sa, sb), systems=NAMES)
    return (
        arena.fit(weighted, ("s0", 1000.0)).scores,
        arena.fit(plain, ("s0", 1000.0)).scores,
        np.array(served),
        arena.fit(balanced, ("s0", 1000.0)).scores,
    )


_RUNS: dict[int, tuple] = {}


def runs(n=20):
    """The 20 seeded adaptive runs, computed once for the tests of this module."""
    for seed in range(n):
        if seed not in _RUNS:
            _RUNS[seed] = adaptive_run(seed)
    return [_RUNS[seed] for seed in range(n)]


def test_ipw_scores_are_unbiased_under_adaptive_pairing_where_plain_ones_are_not():
    theta = mm_fit(P)
    target = arena.ELO_PER_NATURAL * (theta - theta[0]) + 1000.0
    done = runs()
    weighted = np.array([r[0] for r in done])
    plain = np.array([r[1] for r in done])
    served = np.concatenate([r[2] for r in done])
    assert served.max() / served.min() > 1.2  # the design really is unequal
    se_w = weighted[:, 1:].std(axis=0, ddof=1) / np.sqrt(len(done))
    se_p = plain[:, 1:].std(axis=0, ddof=1) / np.sqrt(len(done))
    z_weighted = (weighted[:, 1:].mean(axis=0) - target[1:]) / se_w
    z_plain = (plain[:, 1:].mean(axis=0) - target[1:]) / se_p
    assert np.all(np.abs(z_weighted) < 3.5), z_weighted
    assert np.max(np.abs(z_plain)) > 4.0, z_plain


def test_pair_balanced_scores_are_unbiased_under_adaptive_pairing():
    """The report's weighting (each pair weighted by 1 / its realised battle count) on the
    same adaptive logs: its mean over 20 seeds lies within 3.5 standard errors of the
    uniform design's target (the independent MM fit of the exact probabilities), for
    every system, where the unweighted fit misses it (previous test)."""
    theta = mm_fit(P)
    target = arena.ELO_PER_NATURAL * (theta - theta[0]) + 1000.0
    balanced = np.array([r[3] for r in runs()])
    se = balanced[:, 1:].std(axis=0, ddof=1) / np.sqrt(len(balanced))
    z = (balanced[:, 1:].mean(axis=0) - target[1:]) / se
    assert np.all(np.abs(z) < 3.5), z


def test_ipw_weights_are_inverse_probabilities_normalised_to_mean_one():
    w = arena.ipw_weights([0.5, 0.25, 0.25])
    assert np.allclose(w, np.array([2.0, 4.0, 4.0]) / (10 / 3))


def test_adaptive_probabilities_keep_the_exploration_floor_and_sum_to_one():
    """Every pair keeps at least explore / pairs (IPW needs every pair possible) and the
    probabilities are a distribution, on random fits of 3 to 9 systems, tight or loose."""
    rng = np.random.default_rng(23)
    for trial in range(60):
        k = int(rng.integers(3, 10))
        explore = float(rng.choice([0.01, 0.1, 0.2, 0.5, 1.0]))
        scores = 1000 + rng.normal(0, 80, k)
        root = rng.normal(size=(k, k)) * float(rng.choice([0.1, 10.0, 100.0]))
        pairs, p = arena_design.adaptive_pair_probabilities(scores, root @ root.T, explore=explore)
        assert len(pairs) == k * (k - 1) // 2
        assert np.all(p >= explore / len(pairs) - 1e-15), trial
        assert abs(p.sum() - 1.0) < 1e-12
        if explore == 1.0:
            assert np.allclose(p, 1 / len(pairs))


def test_pair_balanced_weights_by_hand():
    # Pairs x-y (twice, either side order) and x-z (once): raw weights 1/2, 1/2, 1, whose
    # mean is 2/3, so normalised 3/4, 3/4, 3/2: each pair's total weight is 3/2.
    w = arena.pair_balanced_weights(["x", "y", "x"], ["y", "x", "z"])
    assert np.allclose(w, [0.75, 0.75, 1.5])
    with np.testing.assert_raises(ValueError):
        arena.pair_balanced_weights([], [])
