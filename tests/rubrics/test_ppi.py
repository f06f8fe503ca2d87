"""Tests for rubrics.ppi: PPI++ against ppi-python, active inference, design, planning.

References are independent: ppi-python (the authors' package) for the PPI++ mean and
the power analysis, loops written here for active inference, hand-worked numbers.
"""

import math
import os

# ppi-python compiles its helpers with numba on first call (a minute on a busy machine);
# these reference computations are small, so run them as plain Python. Read by numba
# at import, hence before ppi_py is imported (by whichever of the PPI tests runs first).
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings
from hypothesis import strategies as st
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from ppi_py.baselines import classical_mean_ci
from ppi_py.ppi_power_analysis import ppi_mean_power
from scipy import stats

from rubrics import ppi, ppi_power
from rubrics.resampling import percentile_bootstrap

Z95 = 1.959963984540054  # the standard normal 0.975 quantile
PROPERTY = settings(max_examples=60, deadline=None)


def _data(seed: int = 0, n: int = 60, N: int = 700, bias: float = 0.3):
    rng = np.random.default_rng(seed)
    y = rng.normal(3.0, 1.0, n)
    yhat = 0.8 * y + bias + rng.normal(0.0, 0.6, n)
    truth_u = rng.normal(3.0, 1.0, N)
    yhat_u = 0.8 * truth_u + bias + rng.normal(0.0, 0.6, N)
    return y, yhat, yhat_u


# ---------------------------------------------------------------------------
# Single-source intervals: hand-worked
# ---------------------------------------------------------------------------


def test_people_only_hand_worked():
    # y = 1, 2, 3, 4: mean 2.5, population variance 1.25, se = sqrt(1.25) / 2.
    got = ppi.people_only([1, 2, 3, 4])
    se = math.sqrt(1.25) / 2
    assert got.estimate == pytest.approx(2.5, abs=1e-12)
    assert got.se == pytest.approx(se, abs=1e-12)
    assert got.low == pytest.approx(2.5 - Z95 * se, abs=1e-12)
    assert got.high == pytest.approx(2.5 + Z95 * se, abs=1e-12)
    assert got.as_dict() == {"estimate": got.estimate, "low": got.low, "high": got.high, "se": se}


def test_rectifier_hand_worked():
    # differences 1, 0, 1, -1: mean 0.25, variance 3/4 - 1/16 = 0.6875.
    got = ppi.rectifier([1, 2, 3, 4], [0, 2, 2, 5], alpha=0.1)
    se = math.sqrt(0.6875) / 2
    z90 = 1.6448536269514722
    assert got.estimate == pytest.approx(0.25, abs=1e-12)
    assert got.se == pytest.approx(se, abs=1e-12)
    assert (got.low, got.high) == pytest.approx((0.25 - z90 * se, 0.25 + z90 * se), abs=1e-12)


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_people_and_judge_only_equal_ppi_python_classical(alpha):
    y, _, yhat_u = _data(1)
    for values, fn in ((y, ppi.people_only), (yhat_u, ppi.judge_only)):
        low, high = classical_mean_ci(values, alpha=alpha)
        got = fn(values, alpha=alpha)
        assert (got.low, got.high) == pytest.approx((float(low), float(high)), abs=1e-9)


# ---------------------------------------------------------------------------
# PPI++ mean against ppi-python
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.1])
@pytest.mark.parametrize("lam", [None, 0.0, 0.35, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppi_mean_equals_ppi_python(seed, lam, alpha):
    y, yhat, yhat_u = _data(seed, bias=0.3 * seed)
    got = ppi.ppi_mean(y, yhat, yhat_u, alpha=alpha, lam=lam)
    point = float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)))
    low, high = ppi_mean_ci(y, yhat, yhat_u, alpha=alpha, alternative="two-sided", lam=lam)
    assert got.interval.estimate == pytest.approx(point, abs=1e-9)
    assert got.interval.low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
    assert got.interval.high == pytest.approx(float(np.squeeze(high)), abs=1e-9)
    assert (got.n, got.N) == (60, 700)
    if lam is not None:
        assert got.lam == lam
    else:
        assert 0.0 < got.lam < 1.0
        # the tuned lambda is the one ppi-python used: its fixed-lambda point agrees
        fixed = float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u, lam=got.lam)))
        assert fixed == pytest.approx(point, abs=1e-12)


def test_ppi_mean_lambda_is_clipped_like_ppi_python():
    rng = np.random.default_rng(5)
    y = rng.normal(size=40)
    yhat_u = rng.normal(size=300)
    anti = -y + rng.normal(0, 0.1, 40)  # anti-correlated judge: lambda clipped to 0
    small = 0.1 * y  # a judge on a smaller scale: lambda near 10, clipped to 1
    for yhat, yhat_unlabeled, lam in ((anti, yhat_u, 0.0), (small, 0.1 * yhat_u, 1.0)):
        got = ppi.ppi_mean(y, yhat, yhat_unlabeled)
        assert got.lam == lam
        low, high = ppi_mean_ci(y, yhat, yhat_unlabeled, alpha=0.05)
        assert (got.interval.low, got.interval.high) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9
        )


def test_ppi_mean_lambda_zero_is_people_only_and_effective_n():
    y, yhat, yhat_u = _data(3)
    people = ppi.people_only(y)
    zero = ppi.ppi_mean(y, yhat, yhat_u, lam=0)
    assert zero.interval.as_dict() == pytest.approx(people.as_dict(), abs=1e-12)
    assert zero.effective_n == pytest.approx(60, abs=1e-9)
    tuned = ppi.ppi_mean(y, yhat, yhat_u)
    assert tuned.effective_n == pytest.approx(60 * people.se**2 / tuned.interval.se**2, rel=1e-12)
    assert tuned.effective_n > 60  # this judge is informative
    # no judge-only units: nothing to combine, lambda 0
    alone = ppi.ppi_mean(y, yhat, [])
    assert alone.lam == 0.0 and alone.N == 0
    assert alone.interval.as_dict() == pytest.approx(people.as_dict(), abs=1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ppi.people_only([1.0]), "at least 2"),
        (lambda: ppi.people_only([1.0, float("nan")]), "non-finite"),
        (lambda: ppi.ppi_mean([1, 2, 3], [1, 2], [1, 2]), "same length"),
        (lambda: ppi.ppi_mean([1, 2], [1, 2], [1, 2], alpha=1.5), "alpha"),
        (lambda: ppi.ppi_mean([1, 2], [1, 2], [1, 2], lam="x"), "lam"),
        (lambda: ppi.ppi_mean([1, 2], [1, 2], [], lam=1.0), "lam must be 0"),
        (lambda: ppi.ppi_mean([1, 2], [1, 2], [3], lam=0.5), "lam must be 0"),
        (lambda: ppi.ppi_mean([[1, 2]], [[1, 2]], [1, 2]), "1-D"),
        (lambda: ppi.judge_only(["a", "b"]), "numeric"),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------------------
# Active inference
# ---------------------------------------------------------------------------


def _active_reference(yhat, y, labeled, pi, lam):
    """Zrnic and Candes (2024), eq. for the mean, written as a plain loop."""
    m = len(yhat)
    terms = []
    for i in range(m):
        term = lam * yhat[i]
        if labeled[i]:
            term += (y[i] - lam * yhat[i]) / pi[i]
        terms.append(term)
    mean = sum(terms) / m
    var = sum((t - mean) ** 2 for t in terms) / m
    return mean, math.sqrt(var / m)


def _active_data(seed: int, m: int = 400):
    rng = np.random.default_rng(seed)
    yhat = rng.normal(0.0, 1.0, m)
    uncertainty = rng.uniform(0.2, 2.0, m)
    y_all = yhat + 0.2 + uncertainty * rng.normal(0.0, 0.5, m)
    pi = ppi.sampling_probabilities(uncertainty, share=0.3, floor=0.05)
    labeled = rng.random(m) < pi
    y = np.where(labeled, y_all, np.nan)
    return yhat, y, labeled, pi


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0, 0.73])
def test_active_mean_equals_reference_loop(lam):
    yhat, y, labeled, pi = _active_data(7)
    got = ppi.active_mean(yhat, y, labeled, pi, lam=lam)
    mean, se = _active_reference(yhat, y, labeled, pi, lam)
    assert got.interval.estimate == pytest.approx(mean, abs=1e-9)
    assert got.interval.se == pytest.approx(se, abs=1e-9)
    assert got.interval.low == pytest.approx(mean - Z95 * se, abs=1e-9)
    assert (got.n, got.N) == (int(labeled.sum()), 400 - int(labeled.sum()))


def test_active_mean_all_labeled_with_probability_one_is_people_only():
    rng = np.random.default_rng(2)
    y = rng.normal(size=30)
    yhat = y + rng.normal(size=30)
    got = ppi.active_mean(yhat, y, np.ones(30, dtype=bool), np.ones(30), lam=None)
    assert got.interval.as_dict() == pytest.approx(ppi.people_only(y).as_dict(), abs=1e-12)
    fixed = ppi.active_mean(yhat, y, np.ones(30, dtype=bool), np.ones(30), lam=0.8)
    assert fixed.interval.as_dict() == pytest.approx(ppi.people_only(y).as_dict(), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_active_mean_power_tuning_is_the_variance_minimum(seed):
    # var(a + lam b) is a parabola in lam with its minimum at -Cov(a, b) / Var(b); its
    # clip to [0, 1] is the best lambda in [0, 1]: no fixed lambda does better.
    yhat, y, labeled, pi = _active_data(seed)
    tuned = ppi.active_mean(yhat, y, labeled, pi)
    assert 0.0 <= tuned.lam <= 1.0
    grid = np.linspace(0.0, 1.0, 201)
    ses = [ppi.active_mean(yhat, y, labeled, pi, lam=float(g)).interval.se for g in grid]
    for lam in (0.0, 0.5, 1.0):
        fixed = ppi.active_mean(yhat, y, labeled, pi, lam=lam)
        assert tuned.interval.se <= fixed.interval.se + 1e-15
    assert tuned.interval.se <= min(ses) + 1e-15
    assert abs(tuned.lam - grid[int(np.argmin(ses))]) <= 0.005 + 1e-12


def test_active_mean_uniform_design_at_lambda_zero_is_the_labeled_mean():
    # pi_i = n / M for every unit: with lam = 0 the estimate is the labeled mean
    # (Horvitz-Thompson with the realised n), a hand-checkable identity.
    rng = np.random.default_rng(4)
    m, n = 200, 50
    labeled = np.zeros(m, dtype=bool)
    labeled[rng.choice(m, n, replace=False)] = True
    y = np.where(labeled, rng.normal(size=m), np.nan)
    got = ppi.active_mean(rng.normal(size=m), y, labeled, np.full(m, n / m), lam=0.0)
    assert got.interval.estimate == pytest.approx(float(np.nanmean(y)), abs=1e-12)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pi": 0.0}, r"\(0, 1\]"),
        ({"pi": 1.5}, r"\(0, 1\]"),
        ({"y_nan_labeled": True}, "labeled unit"),
        ({"labeled_int": True}, "booleans"),
        ({"short_pi": True}, "probabilities must have"),
    ],
)
def test_active_mean_bad_input(change, message):
    yhat, y, labeled, pi = _active_data(1, m=40)
    if "pi" in change:
        pi = pi.copy()
        pi[0] = change["pi"]
    if "y_nan_labeled" in change:
        y = y.copy()
        y[np.flatnonzero(labeled)[0]] = np.nan
    if "labeled_int" in change:
        labeled = labeled.astype(int)
    if "short_pi" in change:
        pi = pi[:-1]
    with pytest.raises(ValueError, match=message):
        ppi.active_mean(yhat, y, labeled, pi)


def test_active_mean_needs_two_labeled():
    labeled = np.array([True, False, False])
    with pytest.raises(ValueError, match="at least 2 labeled"):
        ppi.active_mean([1, 2, 3], [1, np.nan, np.nan], labeled, [0.5, 0.5, 0.5])


# ---------------------------------------------------------------------------
# Sampling probabilities
# ---------------------------------------------------------------------------


@st.composite
def _designs(draw):
    u = draw(
        st.lists(
            st.floats(0.0, 100.0, allow_nan=False, allow_infinity=False), min_size=1, max_size=60
        )
    )
    share = draw(st.floats(0.02, 1.0))
    floor = draw(st.floats(0.001, 1.0).filter(lambda f: f <= share))
    return np.array(u), share, floor


@PROPERTY
@given(_designs())
def test_sampling_probabilities_properties(design):
    u, share, floor = design
    pi = ppi.sampling_probabilities(u, share=share, floor=floor)
    assert pi.shape == u.shape
    assert float(pi.mean()) == pytest.approx(share, abs=1e-9)
    assert pi.min() >= floor - 1e-12
    assert pi.max() <= 1.0 + 1e-12
    order = np.argsort(u, kind="stable")
    assert np.all(np.diff(pi[order]) >= -1e-12)  # more uncertain: never a smaller chance


@PROPERTY
@given(st.floats(0.0, 10.0), st.integers(1, 30), st.floats(0.05, 1.0))
def test_sampling_probabilities_equal_uncertainty_is_uniform(value, m, share):
    pi = ppi.sampling_probabilities(np.full(m, value), share=share, floor=0.01)
    np.testing.assert_allclose(pi, share, rtol=0, atol=1e-15)


def test_sampling_probabilities_hand_worked():
    # u = 1, 2, 3, 4, share 0.5, floor 0.1: c = 0.2 gives 0.2, 0.4, 0.6, 0.8 (mean 0.5)
    pi = ppi.sampling_probabilities([1, 2, 3, 4], share=0.5, floor=0.1)
    np.testing.assert_allclose(pi, [0.2, 0.4, 0.6, 0.8], atol=1e-12)
    # u = 1, 1, 1, 10, share 0.5: the last unit is capped at 1, the rest share 1 equally
    pi = ppi.sampling_probabilities([1, 1, 1, 10], share=0.5, floor=0.1)
    np.testing.assert_allclose(pi, [1 / 3, 1 / 3, 1 / 3, 1.0], atol=1e-12)
    # u = 0, 0, 5: the floor binds on the zeros, 0.45 * 3 - 0.2 = 1.15 > 1 for the last,
    # so it is capped and the zeros take the rest: (1.35 - 1) / 2 = 0.175 each
    pi = ppi.sampling_probabilities([0, 0, 5], share=0.45, floor=0.1)
    np.testing.assert_allclose(pi, [0.175, 0.175, 1.0], atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"uncertainty": [1, -1], "share": 0.5, "floor": 0.1}, "non-negative"),
        ({"uncertainty": [1, 2], "share": 0.1, "floor": 0.2}, "must not exceed"),
        ({"uncertainty": [1, 2], "share": 0.5, "floor": 0.0}, "floor"),
        ({"uncertainty": [1, 2], "share": 1.5, "floor": 0.1}, "share"),
        ({"uncertainty": [], "share": 0.5, "floor": 0.1}, "at least 1"),
    ],
)
def test_sampling_probabilities_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ppi.sampling_probabilities(**kwargs)


# ---------------------------------------------------------------------------
# Sample size
# ---------------------------------------------------------------------------


def test_sample_size_hand_worked():
    # y = 1, 1, -1, -1 and yhat = 1, 0, 0, -1: var_y = 1, var_f = 0.5, cov = 0.5, rho^2 = 0.5.
    # Target variance 1 / 99.5: people need n >= 99.5, so 100.
    h = Z95 / math.sqrt(99.5)
    got = ppi_power.sample_size([1, 1, -1, -1], [1, 0, 0, -1], target_halfwidth=h)
    assert got["people_only"] == 100
    assert got["rho"] == pytest.approx(math.sqrt(0.5), abs=1e-12)
    # N infinite: lambda = cov / var_f = 1, n var = 1 - 1 + 0.5 = 0.5, n >= 49.75: 50
    assert got["with_judge"] == 50 and got["lam"] == pytest.approx(1.0)
    assert got["saving"] == pytest.approx(0.5)
    # N = 50: var = (n + 25) / (n (n + 50)) <= 1 / 99.5, n^2 - 49.5 n - 2487.5 >= 0,
    # n >= (49.5 + sqrt(12400.25)) / 2 = 80.43: 81
    finite = ppi_power.sample_size([1, 1, -1, -1], [1, 0, 0, -1], target_halfwidth=h, unlabeled=50)
    assert finite["with_judge"] == 81
    assert finite["lam"] == pytest.approx(50 / (81 + 50), abs=1e-12)


def test_sample_size_useless_judge_saves_nothing():
    got = ppi_power.sample_size([1, 1, -1, -1], [1, -1, 1, -1], target_halfwidth=0.2)
    assert got["rho"] == 0.0
    assert got["with_judge"] == got["people_only"] == math.ceil((Z95 / 0.2) ** 2)


def _pilot(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    y = rng.normal(0.0, 1.0, n)
    yhat = y + rng.normal(0.0, 1.0, n)  # rho about 0.7, lambda about 0.5: no clipping
    return y, yhat


@pytest.mark.parametrize("seed", [0, 1])
def test_sample_size_equals_ppi_python_power_analysis(seed):
    # ppi_mean_power(effective_n=n0) returns the cheapest (n, N) whose PPI++ standard
    # error equals that of n0 people: n (n + N) / (n + (1 - rho^2) N) = n0. Asked for
    # the same half-width with that N, sample_size must find that n (up to rounding).
    y, yhat = _pilot(seed)
    target = 0.02
    ours = ppi_power.sample_size(y, yhat, target_halfwidth=target)
    n0 = ours["people_only"]
    assert n0 == math.ceil((Z95 * y.std() / target) ** 2)
    theirs = ppi_mean_power(y, yhat, cost_Y=1.0, cost_Yhat=0.05, effective_n=n0)
    assert ours["rho"] == pytest.approx(theirs["ppi_corr"], abs=1e-12)
    assert theirs["N"] > 0
    finite = ppi_power.sample_size(y, yhat, target_halfwidth=target, unlabeled=theirs["N"])
    assert abs(finite["with_judge"] - theirs["n"]) <= 2
    # as the judge's cost goes to 0, N grows and n tends to n0 (1 - rho^2), the
    # unlimited-judge answer
    cheap = ppi_mean_power(y, yhat, cost_Y=1.0, cost_Yhat=1e-10, effective_n=n0)
    assert abs(ours["with_judge"] - cheap["n"]) <= 1 + 0.002 * n0
    assert abs(ours["with_judge"] - n0 * (1 - ours["rho"] ** 2)) <= 1.0


def test_sample_size_bad_input():
    with pytest.raises(ValueError, match="target_halfwidth"):
        ppi_power.sample_size([1, 2], [1, 2], target_halfwidth=0)
    with pytest.raises(ValueError, match="unlabeled"):
        ppi_power.sample_size([1, 2], [1, 2], target_halfwidth=0.1, unlabeled=0)


# ---------------------------------------------------------------------------
# Bootstrap check
# ---------------------------------------------------------------------------


def test_bootstrap_mean_people_only_equals_percentile_bootstrap():
    # lam = 0 and no judge-only units: the combined estimate is the labeled mean, and
    # the draws are those of rubrics.resampling with the same seed.
    y, yhat, _ = _data(2)
    got = ppi.bootstrap_mean(y, yhat, [], lam=0.0, resamples=500, seed=11)
    low, high = percentile_bootstrap(np.mean, y, n_resamples=500, confidence=0.95, seed=11)
    assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)
    assert got.estimate == pytest.approx(float(y.mean()), abs=1e-12)


def test_bootstrap_mean_agrees_with_the_clt_interval():
    y, yhat, yhat_u = _data(4, n=400, N=4000)
    clt = ppi.ppi_mean(y, yhat, yhat_u)
    boot = ppi.bootstrap_mean(y, yhat, yhat_u, lam=clt.lam, resamples=2000, seed=1)
    assert boot.estimate == pytest.approx(clt.interval.estimate, abs=1e-12)
    assert boot.se == pytest.approx(clt.interval.se, rel=0.08)
    assert boot.low == pytest.approx(clt.interval.low, abs=0.2 * clt.interval.se)
    assert boot.high == pytest.approx(clt.interval.high, abs=0.2 * clt.interval.se)
    again = ppi.bootstrap_mean(y, yhat, yhat_u, lam=clt.lam, resamples=2000, seed=1)
    assert again == boot
    # lam=None tunes once on the full data, as ppi_mean does
    tuned = ppi.bootstrap_mean(y, yhat, yhat_u, lam=None, resamples=2000, seed=1)
    assert tuned == boot


# ---------------------------------------------------------------------------
# Coverage: people-only and combined valid, judge-only not, under a biased judge
# ---------------------------------------------------------------------------


def test_coverage_with_a_biased_judge():
    rng = np.random.default_rng(2024)
    truth = 3.0
    draws, n, N = 300, 40, 400
    covered = {"people": 0, "combined": 0, "judge": 0, "active": 0}
    for _ in range(draws):
        y_all = rng.normal(truth, 1.0, n + N)
        yhat_all = 0.9 * y_all + 0.6 + rng.normal(0.0, 0.5, n + N)  # biased by +0.3
        y, yhat, yhat_u = y_all[:n], yhat_all[:n], yhat_all[n:]
        intervals = {
            "people": ppi.people_only(y),
            "combined": ppi.ppi_mean(y, yhat, yhat_u).interval,
            "judge": ppi.judge_only(yhat_all),
        }
        pi = np.full(n + N, n / (n + N))
        labeled = rng.random(n + N) < pi
        y_active = np.where(labeled, y_all, np.nan)
        intervals["active"] = ppi.active_mean(yhat_all, y_active, labeled, pi).interval
        for name, interval in intervals.items():
            covered[name] += interval.low <= truth <= interval.high
    assert covered["people"] >= 0.9 * draws
    assert covered["combined"] >= 0.9 * draws
    assert covered["active"] >= 0.9 * draws
    assert covered["judge"] < 0.5 * draws


def test_weighted_people_only_hand_worked():
    """Values 2 and 4 drawn at 0.5 and 0.25 (weights 2 and 4): theta = (4 + 16) / 6 =
    10/3; residuals -4/3 and 2/3 weighted 2 and 4: se = sqrt(64/9 + 64/9) / 6."""
    got = ppi.weighted_people_only([2.0, 4.0], [0.5, 0.25])
    assert got.estimate == pytest.approx(10 / 3, abs=1e-12)
    assert got.se == pytest.approx(math.sqrt(128 / 9) / 6, abs=1e-12)
    assert got.low == pytest.approx(10 / 3 - Z95 * got.se, abs=1e-12)


def test_weighted_people_only_with_equal_chances_is_people_only():
    y = np.random.default_rng(3).normal(3, 1, size=40)
    assert ppi.weighted_people_only(y, np.full(40, 0.3)).as_dict() == pytest.approx(
        ppi.people_only(y).as_dict(), abs=1e-12
    )


def test_weighted_people_only_covers_and_is_narrower_than_the_plain_weighted_mean():
    """Counted over 400 seeded designs: units of level ~3 drawn with chances 0.1-0.9; the
    self-normalised interval covers the mean (>= 0.9) and is narrower than the
    inverse-probability mean's (active_mean at lam 0), whose variance carries the level."""
    rng = np.random.default_rng(11)
    covered = narrower = 0
    for _ in range(400):
        y_all = rng.normal(3.0, 0.5, size=300)
        pi = rng.uniform(0.1, 0.9, size=300)
        drawn = rng.random(300) < pi
        got = ppi.weighted_people_only(y_all[drawn], pi[drawn])
        covered += got.low <= 3.0 <= got.high
        y = np.where(drawn, y_all, np.nan)
        plain = ppi.active_mean(np.zeros(300), y, drawn, pi, lam=0.0).interval
        narrower += got.high - got.low < plain.high - plain.low
    assert covered >= 0.9 * 400
    assert narrower == 400


# ---------------------------------------------------------------------------
# Small samples: Student's t with n - 1 degrees of freedom for z
# ---------------------------------------------------------------------------


def test_quantile_is_students_t_and_the_normal_without_df():
    """1 degree of freedom at 0.975 is tan(0.475 pi) = 12.706...; without df it is the
    normal quantile; scipy.stats.t as the independent check, whole df or not."""
    assert ppi.quantile(0.05, 1) == pytest.approx(math.tan(0.475 * math.pi), rel=1e-12)
    assert ppi.quantile(0.05) == pytest.approx(Z95, abs=1e-12)
    for df in (2, 24, 0.8, 17.3):
        assert ppi.quantile(0.1, df) == pytest.approx(stats.t.ppf(0.95, df), rel=1e-12)
    with pytest.raises(ValueError, match="positive degrees of freedom"):
        ppi.quantile(0.05, 0)


def test_small_sample_people_only_is_the_textbook_t_interval():
    """The same estimate and CLT standard error (ddof 0, as ppi-python); the interval is
    ``scipy.stats.t.interval`` on the sample standard deviation (ddof 1)."""
    y = np.random.default_rng(5).normal(3.0, 1.0, size=12)
    got = ppi.people_only(y, small_sample=True)
    low, high = stats.t.interval(0.95, 11, loc=y.mean(), scale=stats.sem(y))
    assert (got.estimate, got.se) == pytest.approx((y.mean(), y.std() / math.sqrt(12)), abs=1e-12)
    assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)


def test_small_sample_widens_every_mean_interval_by_t_over_z_only():
    """Each estimate keeps its point, lambda and standard error; the half-width grows by
    t(n - 1) sqrt(n / (n - 1)) / z with n the labeled units, and not at all for the
    judge-only interval."""
    y, yhat, yhat_u = _data(seed=4, n=20, N=200)
    ratio = ppi.quantile(0.05, 19) * math.sqrt(20 / 19) / Z95
    mask = np.r_[np.ones(20, bool), np.zeros(200, bool)]
    pi = np.full(220, 0.3)
    calls = {
        "people": lambda **k: ppi.people_only(y, **k),
        "rectifier": lambda **k: ppi.rectifier(y, yhat, **k),
        "weighted": lambda **k: ppi.weighted_people_only(y, np.full(20, 0.3), **k),
        "ppi": lambda **k: ppi.ppi_mean(y, yhat, yhat_u, **k).interval,
        "active": lambda **k: (
            ppi.active_mean(
                np.r_[yhat, yhat_u], np.r_[y, np.full(200, np.nan)], mask, pi, **k
            ).interval
        ),
    }
    for name, call in calls.items():
        z, t = call(), call(small_sample=True)
        assert (t.estimate, t.se) == (z.estimate, z.se), name
        assert t.high - t.low == pytest.approx((z.high - z.low) * ratio, rel=1e-12), name
    assert ppi.ppi_mean(y, yhat, yhat_u, small_sample=True).lam == ppi.ppi_mean(y, yhat, yhat_u).lam


def test_small_sample_weighted_people_only_uses_kishs_effective_n():
    """The hand-worked case above (weights 2 and 4): Kish's n = 6^2 / 20 = 1.8, so 0.8
    degrees of freedom; Bessel's factor on n = 2 units is sqrt(2)."""
    got = ppi.weighted_people_only([2.0, 4.0], [0.5, 0.25], small_sample=True)
    half = stats.t.ppf(0.975, 0.8) * got.se * math.sqrt(2)
    assert got.estimate == pytest.approx(10 / 3, abs=1e-12)
    assert (got.low, got.high) == pytest.approx((10 / 3 - half, 10 / 3 + half), rel=1e-12)


def test_small_sample_coverage_at_twelve_people_is_nearer_nominal():
    """Counted over 2,000 seeded samples of 12 skewed values (exponential): the normal
    quantile's interval covers less than the t one, which is what the report uses."""
    rng = np.random.default_rng(12)
    covered = {False: 0, True: 0}
    for _ in range(2000):
        y = rng.exponential(1.0, size=12)
        for small in covered:
            got = ppi.people_only(y, small_sample=small)
            covered[small] += got.low <= 1.0 <= got.high
    assert covered[True] > covered[False]
    assert covered[True] >= 0.88 * 2000


def test_small_sample_plan_reaches_the_reports_width():
    """People only, written out: the least n with t(n - 1) * sd / sqrt(n - 1) <= h (the
    small-sample half-width, sd with ddof 0 as the plan's moments). With the judge, the
    least n whose PPI++ variance at the best lambda, scaled the same way, reaches h; and
    every plan needs at least z's n, since t's half-width is the wider."""
    y, yhat, _ = _data(seed=9, n=200, N=0)
    h = 0.3
    plan = ppi_power.sample_size(y, yhat, target_halfwidth=h, small_sample=True, unlabeled=400)
    sd = y.std()
    people = next(
        n for n in range(2, 10_000) if stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n - 1) <= h
    )
    assert plan["people_only"] == people
    var_y, var_f = y.var(), yhat.var()
    cov = np.mean((y - y.mean()) * (yhat - yhat.mean()))

    def half(n: int) -> float:
        lam = min(max(cov / n / (var_f / n + var_f / 400), 0.0), 1.0)
        variance = (var_y - 2 * lam * cov + lam**2 * var_f) / n + lam**2 * var_f / 400
        return stats.t.ppf(0.975, n - 1) * math.sqrt(variance * n / (n - 1))

    assert plan["with_judge"] == next(n for n in range(2, 10_000) if half(n) <= h)
    plain = ppi_power.sample_size(y, yhat, target_halfwidth=h, unlabeled=400)
    assert plan["people_only"] > plain["people_only"]
    assert plan["with_judge"] >= plain["with_judge"]
