"""Tests for rubrics.ppi_ranking: prediction-powered Bradley-Terry against independent fits.

References: a weighted logistic fit written here with scipy.optimize, rubrics.arena's
Bradley-Terry fit (choix + Newton) for lam = 0, and ppi-python's logistic PPI++.
"""

import os

# ppi-python compiles its helpers with numba on first call (a minute on a busy machine);
# these reference computations are small, so run them as plain Python. Read by numba
# at import, hence before ppi_py is imported (by whichever of the PPI tests runs first).
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ppi_py import ppi_logistic_ci, ppi_logistic_pointestimate
from scipy.optimize import minimize
from scipy.stats import norm

from rubrics import arena, ppi
from rubrics.ppi_ranking import rank_bounds

# ppi-python's logistic start (scikit-learn's LogisticRegression(penalty=None)) warns
# that the argument is deprecated; the fit is unaffected.
pytestmark = pytest.mark.filterwarnings("ignore:'penalty' was deprecated:FutureWarning")

STRENGTH = np.array([0.6, 0.0, -0.4, 0.25])


def _battles(rng, m, k=4, noise=0.15, ties=False):
    """Rows (i, j) of random battles, people's outcome y (share won by j) and a judge."""
    i = rng.integers(0, k, m)
    j = (i + rng.integers(1, k, m)) % k
    p = 1.0 / (1.0 + np.exp(STRENGTH[i] - STRENGTH[j]))
    u = rng.random(m)
    y = (u < p).astype(float)
    if ties:
        y[np.abs(u - p) < 0.1] = 0.5
    yhat = np.clip(p + 0.3 * (y - p) + noise * rng.normal(size=m), 0.0, 1.0)
    return i, j, y, yhat


def _data(seed=0, n=200, N=1500, k=4, ties=False):
    rng = np.random.default_rng(seed)
    i, j, y, yhat = _battles(rng, n, k, ties=ties)
    iu, ju, _, yhat_u = _battles(rng, N, k)
    human = np.c_[i, j, y]
    return human, np.c_[i, j, yhat], np.c_[iu, ju, yhat_u]


def _x(rows, k, drop):
    x = np.zeros((len(rows), k))
    x[np.arange(len(rows)), rows[:, 1].astype(int)] += 1.0
    x[np.arange(len(rows)), rows[:, 0].astype(int)] -= 1.0
    return np.delete(x, drop, axis=1)


def _scipy_fit(human, judge, unlabeled, k, lam, w=None):
    """The rectified loss with weights 1/n (people), -lam/n (judge, same battles), lam/N.

    Fitted by BFGS with the first system pinned at 0 (the module pins the last), then
    centred.
    """
    n, N = len(human), len(unlabeled)
    w = np.ones(n) if w is None else w / w.sum() * n
    x = np.vstack([_x(human, k, 0), _x(judge, k, 0), _x(unlabeled, k, 0)])
    t = np.concatenate([human[:, 2], judge[:, 2], unlabeled[:, 2]])
    c = np.concatenate([w / n, -lam * w / n, np.full(N, lam / max(N, 1))])

    def loss(theta):
        eta = x @ theta
        return np.sum(c * (np.logaddexp(0.0, eta) - t * eta))

    def grad(theta):
        eta = x @ theta
        return x.T @ (c * (1.0 / (1.0 + np.exp(-eta)) - t))

    theta = minimize(loss, np.zeros(k - 1), jac=grad, method="BFGS", options={"gtol": 1e-12}).x
    full = np.concatenate([[0.0], theta])
    return full - full.mean()


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_independent_weighted_logistic_fit(lam, weighted):
    human, judge, unlabeled = _data(1, ties=True)
    w = np.random.default_rng(9).uniform(0.5, 3.0, len(human)) if weighted else None
    got = ppi.bradley_terry(human, judge, unlabeled, 4, lam=lam, weights=w)
    want = _scipy_fit(human, judge, unlabeled, 4, lam, w)
    np.testing.assert_allclose(got["scores"], want, rtol=0, atol=1e-6)
    assert sum(got["scores"]) == pytest.approx(0.0, abs=1e-12)
    assert got["lam"] == lam and (got["n"], got["N"]) == (200, 1500)


def test_lambda_zero_equals_arena_bradley_terry():
    # arena's A/B battle: y is the share won by B (= our j); ties as half a win.
    human, judge, unlabeled = _data(2, ties=True)
    names = [f"s{s}" for s in range(4)]
    outcome = {0.0: "model_a", 1.0: "model_b", 0.5: "tie"}
    table = arena.count_table(
        [names[int(a)] for a in human[:, 0]],
        [names[int(b)] for b in human[:, 1]],
        [outcome[v] for v in human[:, 2]],
        systems=names,
    )
    # arena's model is P(a beats b) = logistic(theta_a - theta_b): the same strengths.
    want = arena.fit(table).theta
    got = ppi.bradley_terry(human, judge, unlabeled, 4, lam=0.0)
    np.testing.assert_allclose(got["scores"], want, rtol=0, atol=1e-8)
    tuned = ppi.bradley_terry(human, judge, unlabeled, 4)
    np.testing.assert_allclose(tuned["people_only"]["scores"], want, rtol=0, atol=1e-8)
    assert tuned["people_only"]["lam"] == 0.0
    # lam = 0: the interval is arena's sandwich interval on the natural scale
    intervals, _ = arena.sandwich(table)
    half = (intervals.high - intervals.low) / 2.0 / arena.ELO_PER_NATURAL
    np.testing.assert_allclose(np.array(got["se"]) * norm.ppf(0.975), half, rtol=2e-2)


@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_ppi_python_logistic_with_a_reference_system(lam, weighted):
    # ppi-python fits theta on x = e_j - e_i without the last column (the last system is
    # the reference, strength 0); its interval is that of theta_a - theta_last.
    human, judge, unlabeled = _data(3)
    k = 4
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(human)) if weighted else None
    got = ppi.bradley_terry(human, judge, unlabeled, k, lam=lam, weights=w)
    args = (_x(human, k, k - 1), human[:, 2], judge[:, 2], _x(unlabeled, k, k - 1))
    theta = ppi_logistic_pointestimate(*args, unlabeled[:, 2], lam=lam, w=w)
    full = np.concatenate([theta, [0.0]])
    np.testing.assert_allclose(got["scores"], full - full.mean(), rtol=0, atol=1e-6)
    low, high = ppi_logistic_ci(*args, unlabeled[:, 2], lam=lam, alpha=0.05, w=w)
    cov = np.array(got["cov"])
    diff_var = np.diag(cov)[:-1] + cov[-1, -1] - 2.0 * cov[:-1, -1]
    np.testing.assert_allclose(
        norm.ppf(0.975) * np.sqrt(diff_var), (high - low) / 2.0, rtol=0, atol=1e-6
    )


def test_two_systems_tuned_lambda_equals_ppi_python():
    # With two systems the sum-zero and the reference parameterisations differ by a
    # scale factor, which cancels in PPI++'s lambda: ppi-python's tuned fit must agree.
    rng = np.random.default_rng(6)
    n, N = 150, 300
    p = 1.0 / (1.0 + np.exp(-0.4))
    y = (rng.random(n) < p).astype(float)
    yhat = np.clip(0.4 * y + 0.3 + 0.3 * rng.normal(size=n), 0, 1)
    yhat_u = np.clip(0.4 * (rng.random(N) < p) + 0.3 + 0.3 * rng.normal(size=N), 0, 1)
    flip = rng.random(n) < 0.5  # half the battles listed (1, 0)
    i = np.where(flip, 1, 0)
    human = np.c_[i, 1 - i, np.where(flip, 1 - y, y)]
    judge = np.c_[i, 1 - i, np.where(flip, 1 - yhat, yhat)]
    unlabeled = np.c_[np.zeros(N), np.ones(N), yhat_u]
    got = ppi.bradley_terry(human, judge, unlabeled, 2)
    assert 0.3 < got["lam"] < 1.0
    theta = ppi_logistic_pointestimate(
        _x(human, 2, 1), human[:, 2], judge[:, 2], _x(unlabeled, 2, 1), yhat_u, lam=None
    )
    np.testing.assert_allclose(got["scores"], [theta[0] / 2, -theta[0] / 2], atol=1e-6)


def test_tuned_lambda_follows_the_judge():
    human, judge, unlabeled = _data(5)
    good = ppi.bradley_terry(human, judge, unlabeled, 4)
    assert 0.0 < good["lam"] <= 1.0
    fixed = ppi.bradley_terry(human, judge, unlabeled, 4, lam=good["lam"])
    assert fixed["scores"] == pytest.approx(good["scores"], abs=1e-12)
    rng = np.random.default_rng(0)
    noise = judge.copy()
    noise[:, 2] = rng.random(len(noise))
    noise_u = unlabeled.copy()
    noise_u[:, 2] = rng.random(len(noise_u))
    useless = ppi.bradley_terry(human, noise, noise_u, 4)
    assert useless["lam"] < 0.2
    # a judge that helps narrows the intervals against people alone
    assert sum(good["se"]) < sum(good["people_only"]["se"])


def test_judge_only_is_the_plain_fit_on_the_judge_answers():
    human, judge, unlabeled = _data(7)
    got = ppi.bradley_terry(human, judge, unlabeled, 4)["judge_only"]
    rows = np.vstack([judge, unlabeled])
    want = _scipy_fit(rows, rows, rows[:0], 4, 0.0)
    np.testing.assert_allclose(got["scores"], want, atol=1e-6)
    assert (got["n"], got["lam"]) == (len(rows), 0.0)


def test_rank_bounds_hand_worked_and_use_the_covariance():
    scores = np.array([2.0, 1.0, 0.0])
    tight = np.eye(3) * 0.01
    low, high = rank_bounds(scores, tight)
    assert low.tolist() == [1, 2, 3] and high.tolist() == [1, 2, 3]
    wide = np.eye(3) * 4.0
    low, high = rank_bounds(scores, wide)
    assert low.tolist() == [1, 1, 1] and high.tolist() == [3, 3, 3]
    # Marginal variances 4 (intervals overlap), but systems 0 and 1 move together:
    # var(s0 - s1) = 4 + 4 - 2 * 3.999 = 0.002, so 0 is surely above 1.
    together = np.array([[4.0, 3.999, 0.0], [3.999, 4.0, 0.0], [0.0, 0.0, 4.0]])
    low, high = rank_bounds(scores, together)
    assert low.tolist() == [1, 2, 1] and high.tolist() == [2, 3, 3]


def test_result_ranks_are_consistent():
    human, judge, unlabeled = _data(8, n=400)
    got = ppi.bradley_terry(human, judge, unlabeled, 4)
    low, high = rank_bounds(got["scores"], got["cov"])
    assert got["rank_low"] == low.tolist() and got["rank_high"] == high.tolist()
    best = int(np.argmax(got["scores"]))
    assert got["rank_low"][best] == 1
    for key in ("people_only", "judge_only"):
        assert len(got[key]["rank_low"]) == 4


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda h, j, u: (h[:1], j[:1], u), "at least 2"),
        (lambda h, j, u: (np.c_[h[:, 0], h[:, 0], h[:, 2]], j, u), "against itself"),
        (lambda h, j, u: (np.c_[h[:, :2], h[:, 2] + 2], j, u), r"\[0, 1\]"),
        (lambda h, j, u: (np.c_[h[:, :2] + 4, h[:, 2]], j, u), "whole numbers"),
        (lambda h, j, u: (h, j[::-1], u), "same order"),
        (lambda h, j, u: (h, j, u[:, :2]), "rows"),
    ],
)
def test_bad_input(mutate, message):
    human, judge, unlabeled = _data(0, n=20, N=40)
    with pytest.raises(ValueError, match=message):
        ppi.bradley_terry(*mutate(human, judge, unlabeled), 4)


def test_disconnected_battles_and_bad_lambda_raise():
    human = np.array([[0, 1, 1.0], [1, 0, 1.0], [2, 3, 0.0], [3, 2, 1.0]])
    with pytest.raises(ValueError, match="connect"):
        ppi.bradley_terry(human, human, np.zeros((0, 3)), 4)
    h, j, u = _data(0, n=50, N=100)
    with pytest.raises(ValueError, match="lam"):
        ppi.bradley_terry(h, j, u, 4, lam=1.5)
    with pytest.raises(ValueError, match="lam must be 0"):
        ppi.bradley_terry(h, j, u[:1], 4, lam=0.5)
    with pytest.raises(ValueError, match="weights"):
        ppi.bradley_terry(h, j, u, 4, weights=np.ones(3))


def test_coverage_with_a_judge_that_favours_one_system():
    # The judge adds 0.15 to system 0's chance in every battle: its own fit overrates
    # system 0; people-only and combined intervals still cover the true strengths.
    rng = np.random.default_rng(40)
    truth = STRENGTH - STRENGTH.mean()
    draws, n, N, k = 150, 300, 1500, 4
    covered = {"combined": np.zeros(k), "people_only": np.zeros(k), "judge_only": np.zeros(k)}
    for _ in range(draws):
        i = rng.integers(0, k, n + N)
        j = (i + rng.integers(1, k, n + N)) % k
        p = 1.0 / (1.0 + np.exp(STRENGTH[i] - STRENGTH[j]))
        y = (rng.random(n + N) < p).astype(float)
        bias = 0.15 * ((j == 0).astype(float) - (i == 0))
        yhat = np.clip(0.5 * y + 0.5 * p + bias, 0.0, 1.0)
        rows = np.c_[i, j, y]
        judged = np.c_[i, j, yhat]
        got = ppi.bradley_terry(rows[:n], judged[:n], judged[n:], k)
        for name in covered:
            fit = got if name == "combined" else got[name]
            covered[name] += (np.array(fit["low"]) <= truth) & (truth <= np.array(fit["high"]))
    assert covered["combined"].min() >= 0.88 * draws
    assert covered["people_only"].min() >= 0.88 * draws
    assert covered["judge_only"][0] < 0.5 * draws


def test_separated_people_battles_name_the_fit_that_fails():
    # System 0 never wins a human battle: the people-only maximum is at infinity.
    human = np.array([[0, 1, 0.0], [0, 2, 0.0], [1, 2, 1.0], [2, 1, 1.0], [1, 2, 0.0]])
    judge_only = np.array([[0, 1, 0.3], [1, 2, 0.5], [0, 2, 0.4]] * 10)
    with pytest.raises(ValueError, match="people-only Bradley-Terry: .*separated"):
        ppi.bradley_terry(human, human, judge_only, 3, lam=0.5)


def test_a_judge_that_always_prefers_one_system_keeps_the_valid_fits():
    """The judge always gives system 0 the win: its battles alone are separated, so the
    judge-only fit has none; people's and the combined fits are still made."""
    rng = np.random.default_rng(7)
    pairs = [(i, j) for i in range(3) for j in range(3) if i < j] * 30
    human = np.array([(i, j, float(rng.random() < 0.5)) for i, j in pairs])
    judge = np.array([(i, j, 0.0 if i == 0 else float(rng.random() < 0.5)) for i, j in pairs])
    extra = np.array([(0, 1, 0.0), (0, 2, 0.0), (1, 2, 1.0), (1, 2, 0.0)] * 10)
    fit = ppi.bradley_terry(human, judge, extra, 3)
    assert "error" in fit["judge_only"] and "separated" in fit["judge_only"]["error"]
    alone = ppi.bradley_terry(human, judge, extra, 3, lam=0.0)
    assert np.allclose(fit["people_only"]["scores"], alone["scores"])
    assert np.all(np.isfinite(fit["scores"])) and 0.0 <= fit["lam"] <= 1.0
