"""Bradley-Terry arena leaderboard (rubrics/arena.py) against independent code and hand cases."""

import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from rubrics import arena, arena_design, arena_style

ELO = 400 / math.log(10)
NAMES = [f"sys{i:02d}" for i in range(12)]


def simulate(seed, n, strengths, tie_share=0.15, pairs=None, probs=None, planted=None):
    """Battles from known natural strengths; a share of ties split between the two kinds.

    A tie happens with probability tie_share; otherwise A wins with the BT probability,
    so the expected score of A is tie/2 + (1 - tie) p, a BT model with shrunk strengths
    (the test compares fits with fits, and coverage with the shrunk truth below).
    """
    rng = np.random.default_rng(seed)
    k = len(strengths)
    if pairs is None:
        a = rng.integers(0, k, n)
        b = (a + rng.integers(1, k, n)) % k
    else:
        idx = rng.choice(len(pairs), size=n, p=probs)
        a = np.array([pairs[i][0] for i in idx])
        b = np.array([pairs[i][1] for i in idx])
        swap = rng.random(n) < 0.5
        a, b = np.where(swap, b, a), np.where(swap, a, b)
    eta = strengths[a] - strengths[b] + (0.0 if planted is None else planted(a, b))
    p = 1 / (1 + np.exp(-eta))
    u = rng.random(n)
    out = np.where(
        u < tie_share / 2,
        "tie",
        np.where(u < tie_share, "tie (bothbad)", np.where(rng.random(n) < p, "model_a", "model_b")),
    )
    return [NAMES[i] for i in a], [NAMES[i] for i in b], list(out), a, b


def mm_bradley_terry(a, b, y, k, tol=1e-14):
    """Hunter's (2004) MM algorithm, ties as half a win each: an independent fit."""
    wins = np.zeros((k, k))
    np.add.at(wins, (a, b), y)
    np.add.at(wins, (b, a), 1 - y)
    n = wins + wins.T
    w = wins.sum(axis=1)
    gamma = np.ones(k)
    for _ in range(100000):
        new = w / (n / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        new /= np.exp(np.log(new).mean())
        if np.max(np.abs(new - gamma)) < tol:
            gamma = new
            break
        gamma = new
    return np.log(gamma)


Y = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5}


def test_fit_equals_an_independent_mm_fit_to_1e6():
    strengths = np.linspace(-1.5, 1.5, 12)
    sa, sb, out, a, b = simulate(7, 24000, strengths)
    table = arena.count_table(sa, sb, out, systems=NAMES)
    fitted = arena.fit(table, anchor=("sys05", 1114.0))
    theta = mm_bradley_terry(a, b, np.array([Y[o] for o in out]), 12)
    expected = ELO * (theta - theta[5]) + 1114.0
    assert np.max(np.abs(fitted.scores - expected)) < 1e-6
    assert fitted.scores[5] == 1114.0
    # Without an anchor the scores average 1000 (LMArena's initial rating).
    assert arena.fit(table).scores.mean() == pytest.approx(1000.0, abs=1e-9)


def test_ties_are_half_wins_by_hand_and_bothbad_counts_the_same():
    # A beats B 3 times, loses once, ties twice: 4 wins to 2, P = 2/3, diff = 400 log10(2).
    out = ["model_a"] * 3 + ["model_b"] + ["tie", "tie (bothbad)"]
    table = arena.count_table(["A"] * 6, ["B"] * 6, out)
    s = arena.fit(table).scores
    assert s[0] - s[1] == pytest.approx(400 * math.log10(2), abs=1e-9)
    same = arena.count_table(["A"] * 6, ["B"] * 6, out[:4] + ["tie", "tie"])
    assert np.allclose(arena.fit(same).scores, s, atol=1e-9)


def test_bootstrap_and_sandwich_intervals_cover_the_truth_at_about_95_percent():
    """30 seeds x 11 non-anchor systems = 330 intervals per method (bootstrap: 200 rounds).

    Nominal 95%; accepted in [0.90, 0.99] (binomial SD about 1.2 points at 330, widened for
    the correlation between systems of one seed). The truth is the BT strength of the
    simulated process, which is exactly BT only without ties (ties drawn independently of
    the strengths shrink the expected score towards 1/2), so ties are switched off here.
    Seen at the time of writing: bootstrap 0.945, sandwich 0.958 (0.921 for the bootstrap
    with 100 rounds, hence 200).
    """
    strengths = np.linspace(-1.2, 1.2, 12)
    truth = ELO * (strengths - strengths[0]) + 1000.0
    hits_boot = hits_sand = total = 0
    for seed in range(30):
        sa, sb, out, _, _ = simulate(100 + seed, 20000, strengths, tie_share=0.0)
        table = arena.count_table(sa, sb, out, systems=NAMES)
        boot, _ = arena.bootstrap(table, anchor=("sys00", 1000.0), rounds=200, seed=seed)
        sand, _ = arena.sandwich(table, anchor=("sys00", 1000.0))
        hits_boot += int(np.sum((boot.low[1:] <= truth[1:]) & (truth[1:] <= boot.high[1:])))
        hits_sand += int(np.sum((sand.low[1:] <= truth[1:]) & (truth[1:] <= sand.high[1:])))
        total += 11
    assert 0.90 <= hits_boot / total <= 0.99, hits_boot / total
    assert 0.90 <= hits_sand / total <= 0.99, hits_sand / total


def test_sandwich_equals_the_inverse_hessian_of_a_plain_two_system_case():
    # Two systems, n battles, k A wins, no ties: theta-hat = logit(k/n) and the robust
    # variance of a single binomial logit equals the model one, 1 / (n p (1 - p)).
    out = ["model_a"] * 70 + ["model_b"] * 30
    table = arena.count_table(["A"] * 100, ["B"] * 100, out)
    iv, cov = arena.sandwich(table, anchor=("B", 1000.0))
    var_natural = 1 / (100 * 0.7 * 0.3)
    assert cov[0, 0] == pytest.approx(ELO**2 * var_natural, rel=1e-9)
    half = 1.959963984540054 * ELO * math.sqrt(var_natural)
    centre = 1000 + ELO * math.log(0.7 / 0.3)
    assert iv.low[0] == pytest.approx(centre - half, rel=1e-9)
    assert iv.high[1] == iv.low[1] == 1000.0


def test_rank_intervals_by_lmarena_rule_hand_case():
    low = np.array([1100, 1050, 1040, 900])
    high = np.array([1200, 1110, 1060, 1000])
    best, worst = arena.rank_intervals(low, high)
    # sys0 overlaps sys1 only; sys1 overlaps sys0 and sys2; sys2 is surely below sys0.
    assert best.tolist() == [1, 1, 2, 4]
    assert worst.tolist() == [2, 3, 3, 4]


def test_win_rate_and_count_matrices_by_hand():
    sa = ["A", "A", "B", "A", "C"]
    sb = ["B", "B", "A", "C", "A"]
    out = ["model_a", "tie", "model_a", "model_b", "tie (bothbad)"]
    table = arena.count_table(sa, sb, out)
    counts = arena.battle_count_matrix(table)
    assert counts.tolist() == [[0, 3, 2], [3, 0, 0], [2, 0, 0]]
    rate = arena.win_rate_matrix(table)
    assert rate[0, 1] == pytest.approx(1.5 / 3)  # a win, a tie, a loss
    assert rate[0, 2] == pytest.approx(0.5 / 2)  # a loss and a tie
    assert rate[1, 0] == pytest.approx(1.5 / 3)
    assert rate.mask[1, 2] and rate.mask[0, 0]


def test_position_bias_share_and_wilson_interval_by_hand():
    out = ["model_a"] * 60 + ["model_b"] * 40 + ["tie"] * 10
    bias = arena.position_bias(out)
    assert bias.left_share == 0.6 and bias.decisive == 100
    z, n, p = 1.959963984540054, 100, 0.6
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert bias.low == pytest.approx(centre - half, rel=1e-9)
    assert bias.high == pytest.approx(centre + half, rel=1e-9)
    with pytest.raises(ValueError, match="no decisive"):
        arena.position_bias(["tie"])


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(ValueError, match="outcome 'A' is not one of"):
        arena.count_table(["x"], ["y"], ["A"])
    with pytest.raises(ValueError, match="against itself"):
        arena.count_table(["x"], ["x"], ["tie"])
    # x always beats y: the estimate does not exist (unbounded), not NaN.
    with pytest.raises(ValueError, match="does not exist"):
        arena.fit(arena.count_table(["x", "x"], ["y", "y"], ["model_a", "model_a"]))
    with pytest.raises(ValueError, match="anchor system 'z'"):
        arena.fit(arena.count_table(["x", "x"], ["y", "y"], ["model_a", "model_b"]), ("z", 1.0))
    with pytest.raises(ValueError, match="probability"):
        arena.ipw_weights([0.5, 0.0])


def test_adaptive_probabilities_by_hand_neyman_for_the_one_unsettled_contrast():
    """Three systems: 0 is 400 log10(3) points above 1 and 2, which are level.

    Worked by hand: win probabilities 0.75 for 0 against 1 and 2, 0.5 for 1 against 2, so
    one battle's information I = 3/16, 3/16, 1/4 for pairs 01, 02, 12. The covariance is
    tiny, so the order 0 > 1 is settled (flip probability 0) and 1 vs 2 is a coin flip
    (d = 0: flip 1/2). With H = sum_p I_p x_p x_p', H x_12 = (3/16 + 2/4) x_12, so
    c' H^-1 x_p = x_12' x_p / (11/16) = (-1, 1, 2) x 16/11 for p = 01, 02, 12. Neyman:
    p ~ sqrt(I_p) |c' H^-1 x_p| ~ sqrt(3)/4, sqrt(3)/4, 1, i.e. sqrt(3) - 3/2 for 01 and 02
    and 4 - 2 sqrt(3) for 12; then 80% of that plus 20% uniform.
    """
    gap = 400 * np.log10(3)
    scores = np.array([1000 + gap, 1000.0, 1000.0])
    cov = np.eye(3)
    pairs, p = arena_design.adaptive_pair_probabilities(scores, cov, explore=0.2)
    assert pairs == [(0, 1), (0, 2), (1, 2)]
    greedy = np.array([np.sqrt(3) - 1.5, np.sqrt(3) - 1.5, 4 - 2 * np.sqrt(3)])
    assert np.allclose(p, 0.8 * greedy + 0.2 / 3, atol=1e-12)
    assert p.sum() == pytest.approx(1.0)


def test_adaptive_probabilities_by_hand_two_systems_and_settled_orders():
    # One pair: it is the whole design, settled or not.
    _, p = arena_design.adaptive_pair_probabilities([1100.0, 1000.0], np.eye(2) * 400.0)
    assert np.allclose(p, [1.0])
    # Every adjacent order settled (gaps of 1000 points, sd about 1.4): uniform.
    pairs, p = arena_design.adaptive_pair_probabilities([3000.0, 2000.0, 1000.0], np.eye(3))
    assert np.allclose(p, np.full(3, 1 / 3))


def test_adaptive_probabilities_minimise_the_flip_weighted_ipw_variance():
    """Against scipy's SLSQP: over the simplex with the explore floor, the rule's greedy part
    minimises sum_c f_c sum_p (c' H^-1 x_p)^2 I_p / p_p, the quantity it claims to minimise
    (H^-1 from numpy's lstsq on the grounded Laplacian, not the module's pinv)."""
    from scipy import optimize, stats

    rng = np.random.default_rng(5)
    k = 5
    scores = np.sort(rng.normal(1000, 60, k))[::-1]
    root = rng.normal(size=(k, k)) * 15
    cov = root @ root.T
    pairs, p = arena_design.adaptive_pair_probabilities(scores, cov, explore=0.2)
    x = np.zeros((len(pairs), k))
    for r, (i, j) in enumerate(pairs):
        x[r, i], x[r, j] = 1.0, -1.0
    win = 1 / (1 + 10 ** (-(x @ scores) / 400))
    info = win * (1 - win)
    lap = x.T @ (info[:, None] * x)
    order = np.argsort(-scores)
    objective_rows = []
    for top, below in zip(order[:-1], order[1:], strict=True):
        c = np.zeros(k)
        c[top], c[below] = 1.0, -1.0
        flip = stats.norm.cdf(-abs(c @ scores) / np.sqrt(c @ cov @ c))
        # Solve H y = c with the last system grounded (y_k = 0): y differs from H^+ c by a
        # constant, which x_p (summing to 0) ignores.
        y = np.append(np.linalg.lstsq(lap[:-1, :-1], c[:-1], rcond=None)[0], 0.0)
        objective_rows.append(flip * (x @ y) ** 2)
    need = info * np.sum(objective_rows, axis=0)

    def variance(q):
        return float(np.sum(need / q))

    n = len(pairs)
    floor = 0.2 / n
    best = optimize.minimize(
        variance,
        np.full(n, 1 / n),
        method="SLSQP",
        bounds=[(floor, 1.0)] * n,
        constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1.0}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    greedy = (p - floor) / 0.8
    # The greedy part alone is the unconstrained optimum (Neyman) ...
    q = np.sqrt(need) / np.sqrt(need).sum()
    assert np.allclose(greedy, q, atol=1e-10)
    # ... and with the floor it is within 2% of the constrained optimum found by SLSQP,
    # and no worse than the uniform design (a feasible point).
    assert variance(p) <= 1.02 * best.fun
    assert variance(p) < variance(np.full(n, 1 / n))


def test_length_control_recovers_the_true_order_and_finds_no_effect_without_one():
    """Planted: logit += 1.5 x normalised length difference; the weakest systems write the
    longest captions, so the raw ranking is distorted (tau < 0.9) and the controlled one is
    not (tau >= 0.9)."""
    strengths = np.linspace(-0.6, 0.6, 12)
    rng = np.random.default_rng(3)
    mean_len = np.linspace(300, 80, 12)  # longest for the weakest
    n = 30000
    lengths = {}

    def planted(a, b):
        la = rng.normal(mean_len[a], 30).clip(20)
        lb = rng.normal(mean_len[b], 30).clip(20)
        lengths["a"], lengths["b"] = la, lb
        return 1.5 * (la - lb) / (la + lb) / 0.5

    sa, sb, out, _, _ = simulate(11, n, strengths, tie_share=0.1, planted=planted)
    raw = arena.fit(arena.count_table(sa, sb, out, systems=NAMES)).scores
    controlled = arena_style.style_control(sa, sb, out, lengths["a"], lengths["b"], systems=NAMES)
    raw_tau = kendalltau(raw, strengths).statistic
    tau = kendalltau(controlled.scores, strengths).statistic
    assert raw_tau < 0.9
    assert tau >= 0.9
    assert controlled.coefficient_low > 0

    # The same captions, outcomes without the planted preference: beta's interval covers 0.
    sa, sb, out, a, b = simulate(12, n, strengths, tie_share=0.1)
    la = rng.normal(mean_len[a], 30).clip(20)
    lb = rng.normal(mean_len[b], 30).clip(20)
    plain = arena_style.style_control(sa, sb, out, la, lb, systems=NAMES)
    assert plain.coefficient_low <= 0 <= plain.coefficient_high
    assert kendalltau(plain.scores, strengths).statistic >= 0.9


def test_length_control_is_unbiased_when_side_a_is_always_the_same_system():
    # The arena mode stores battles in a canonical order (system A sorts first), so side A
    # is not random as on LMArena. Here A is always the shorter-captioned system. Centring
    # the feature (LMArena's standardisation) made a constant shift that the fit put into
    # the systems' strengths (alpha 930 instead of 1122); scaling without centring does not.
    rng = np.random.default_rng(0)
    base = {"alpha": 100, "beta": 170, "gamma": 300}
    truth = {"alpha": 0.7, "beta": 0.0, "gamma": -0.7}
    sa, sb, out, la, lb = [], [], [], [], []
    for _ in range(3000):
        for a, b in (("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")):
            len_a, len_b = (int(base[s] * rng.uniform(0.3, 1.7)) for s in (a, b))
            logit = truth[a] - truth[b] + 5 * (len_a - len_b) / (len_a + len_b)
            won = rng.random() < 1 / (1 + np.exp(-logit))
            sa.append(a)
            sb.append(b)
            out.append("model_a" if won else "model_b")
            la.append(len_a)
            lb.append(len_b)

    controlled = arena_style.style_control(sa, sb, out, la, lb)

    expected = {s: 1000 + arena.ELO_PER_NATURAL * t for s, t in truth.items()}
    # 9,000 battles give a standard error of about 10 points; the bias was about 190.
    for i, system in enumerate(controlled.systems):
        assert controlled.scores[i] == pytest.approx(expected[system], abs=30)


def test_a_lopsided_log_bootstraps_without_error_or_warning():
    """A strong favourite (it never loses; one tie): the estimate exists, but some
    resamples are nearly separated. A full Newton step overshot there and diverged: exp
    overflowed, then the Hessian was singular and the report lost its whole leaderboard
    ("Singular matrix"). The step is now halved while it lowers the likelihood."""
    import warnings

    rng = np.random.default_rng(3)
    a, b, w = [], [], []
    for i in range(4):
        for j in range(i + 1, 4):
            for _ in range(int(rng.integers(3, 12))):
                a.append(f"s{i}")
                b.append(f"s{j}")
                w.append("model_a" if rng.random() < 0.93 else str(rng.choice(["model_b", "tie"])))
    table = arena.count_table(a, b, w)
    point = arena.fit(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        intervals, scores = arena.bootstrap(table, rounds=200, seed=3)
        _, cov = arena.sandwich(table)
    assert np.isfinite(scores).all() and np.isfinite(cov).all()
    assert (intervals.low <= point.scores).all() and (point.scores <= intervals.high).all()
    assert list(np.argsort(-point.scores)) == [0, 1, 2, 3]


def test_separated_lengths_give_a_clear_error_not_singular_matrix():
    """The longer caption wins every battle: the raw leaderboard exists (each system wins
    and loses), but the length effect has no finite estimate. Full Newton steps ran until
    the Hessian was singular, and the report's length section said only "Singular
    matrix"; it now says what is wrong."""
    rng = np.random.default_rng(11)
    sa, sb, out, la, lb = [], [], [], [], []
    for i in range(4):
        for j in range(i + 1, 4):
            for _ in range(8):
                len_a, len_b = rng.choice(np.arange(50, 300), size=2, replace=False)
                sa.append(f"s{i}")
                sb.append(f"s{j}")
                la.append(int(len_a))
                lb.append(int(len_b))
                out.append("model_a" if len_a > len_b else "model_b")
    raw = arena.fit(arena.count_table(sa, sb, out))
    assert np.isfinite(raw.scores).all()
    with pytest.raises(ValueError, match="separated"):
        arena_style.style_control(sa, sb, out, la, lb)
