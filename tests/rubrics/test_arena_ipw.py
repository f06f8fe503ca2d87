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

from rubrics import arena

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
        pairs, probs = arena.adaptive_pair_probabilities(scores, cov, explore=0.1)
    weighted = arena.count_table(sa, sb, out, arena.ipw_weights(served), systems=NAMES)
    plain = arena.count_table(sa, sb, out, systems=NAMES)
    return (
        arena.fit(weighted, ("s0", 1000.0)).scores,
        arena.fit(plain, ("s0", 1000.0)).scores,
        np.array(served),
    )


def test_ipw_scores_are_unbiased_under_adaptive_pairing_where_plain_ones_are_not():
    theta = mm_fit(P)
    target = arena.ELO_PER_NATURAL * (theta - theta[0]) + 1000.0
    runs = [adaptive_run(seed) for seed in range(20)]
    weighted = np.array([r[0] for r in runs])
    plain = np.array([r[1] for r in runs])
    served = np.concatenate([r[2] for r in runs])
    assert served.max() / served.min() > 1.2  # the design really is unequal
    se_w = weighted[:, 1:].std(axis=0, ddof=1) / np.sqrt(len(runs))
    se_p = plain[:, 1:].std(axis=0, ddof=1) / np.sqrt(len(runs))
    z_weighted = (weighted[:, 1:].mean(axis=0) - target[1:]) / se_w
    z_plain = (plain[:, 1:].mean(axis=0) - target[1:]) / se_p
    assert np.all(np.abs(z_weighted) < 3.5), z_weighted
    assert np.max(np.abs(z_plain)) > 4.0, z_plain


def test_ipw_weights_are_inverse_probabilities_normalised_to_mean_one():
    w = arena.ipw_weights([0.5, 0.25, 0.25])
    assert np.allclose(w, np.array([2.0, 4.0, 4.0]) / (10 / 3))
