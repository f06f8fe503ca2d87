"""Tests for rubrics.agreement: hand-worked cases, independent libraries, bad input.

Independent references: scipy.stats (kendalltau, pearsonr, spearmanr, rankdata),
statsmodels.stats.inter_rater (fleiss_kappa, aggregate_raters, cohens_kappa) and the
krippendorff package. Kendall's W has no library: it is checked against a direct
implementation with scipy.stats.rankdata and against the mean-Spearman identity.
"""

from itertools import combinations

import krippendorff
import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from statsmodels.stats import inter_rater

from rubrics import agreement
from rubrics.agreement import (
    batched_category_counts,
    batched_contingency_tables,
    batched_fleiss_kappa_from_codes,
    batched_fleiss_kappa_from_counts,
    batched_joint_counts,
    batched_kendall_tau_from_tables,
    batched_kendall_w_from_codes,
    category_counts,
    cohen_kappa,
    contingency_table,
    encode_categories,
    fleiss_kappa,
    fleiss_kappa_from_counts,
    kendall_tau,
    kendall_tau_from_table,
    kendall_w,
    krippendorff_alpha,
    pearson,
    spearman,
)

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
nan = np.nan


# ---------------------------------------------------------------------------
# Strategies and independent reference implementations
# ---------------------------------------------------------------------------


@st.composite
def int_pairs(draw, max_k: int = 6, max_n: int = 40):
    """Two equally long lists of small integer ratings."""
    n = draw(st.integers(2, max_n))
    k = draw(st.integers(2, max_k))
    x = draw(st.lists(st.integers(1, k), min_size=n, max_size=n))
    y = draw(st.lists(st.integers(1, k), min_size=n, max_size=n))
    return np.array(x), np.array(y)


real = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False).map(lambda v: round(v, 3))


@st.composite
def real_pairs(draw, max_n: int = 40):
    """Two equally long lists of real numbers (3 decimals, so ties happen sometimes)."""
    n = draw(st.integers(2, max_n))
    x = draw(st.lists(real, min_size=n, max_size=n))
    y = draw(st.lists(real, min_size=n, max_size=n))
    return np.array(x), np.array(y)


@st.composite
def int_matrices(draw, min_rows: int = 1, max_rows: int = 30, max_cols: int = 6, max_k: int = 5):
    """A rows x cols matrix of integer ratings 1..k (cols >= 2)."""
    rows = draw(st.integers(min_rows, max_rows))
    cols = draw(st.integers(2, max_cols))
    k = draw(st.integers(2, max_k))
    flat = draw(st.lists(st.integers(1, k), min_size=rows * cols, max_size=rows * cols))
    return np.array(flat).reshape(rows, cols)


def table_by_loop(a, b, cats) -> np.ndarray:
    """Cross-tabulation written as a plain loop (independent of the code under test)."""
    cats = list(cats)
    table = np.zeros((len(cats), len(cats)))
    for u, v in zip(a, b, strict=True):
        table[cats.index(u), cats.index(v)] += 1
    return table


def kendall_w_direct(ratings: np.ndarray) -> float:
    """Kendall's W with tie correction from scipy.stats.rankdata (items x raters)."""
    n, m = ratings.shape
    ranks = np.column_stack([scipy.stats.rankdata(ratings[:, j]) for j in range(m)])
    rank_sums = ranks.sum(axis=1)
    s = ((rank_sums - rank_sums.mean()) ** 2).sum()
    ties = 0
    for j in range(m):
        _, t = np.unique(ratings[:, j], return_counts=True)
        ties += (t**3 - t).sum()
    return 12 * s / (m**2 * (n**3 - n) - m * ties)


# ---------------------------------------------------------------------------
# Cohen's kappa
# ---------------------------------------------------------------------------


def test_cohen_kappa_2x2_by_hand():
    # 50 items; yes/yes 20, yes/no 5, no/yes 10, no/no 15 (Wikipedia's worked example).
    # p_o = 35/50 = 0.7; rater a says yes 25/50 = 0.5, rater b 30/50 = 0.6
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # the same data as integers gives the same kappa
    assert cohen_kappa([a_ == "yes" for a_ in a], [b_ == "yes" for b_ in b]) == pytest.approx(0.4)


def test_cohen_kappa_weighted_by_hand():
    # a = [1, 2, 3, 1], b = [1, 3, 3, 2]; table cells (1,1), (2,3), (3,3), (1,2), n = 4.
    # row margins (a) = (.5, .25, .25); column margins (b) = (.25, .25, .5).
    # unweighted: p_o = 2/4; p_e = .5*.25 + .25*.25 + .25*.5 = .3125
    #   kappa = (.5 - .3125) / .6875 = 3/11
    # linear |i-j|: observed = (0 + 1 + 0 + 1) / 4 = .5
    #   expected = .5*(.25*0 + .25*1 + .5*2) + .25*(.25*1 + 0 + .5*1) + .25*(.25*2 + .25*1 + 0)
    #            = .625 + .1875 + .1875 = 1.0  -> kappa = 1 - .5 / 1 = .5
    # quadratic (i-j)^2: observed = .5
    #   expected = .5*(.25 + .5*4) + .25*(.25 + .5) + .25*(.25*4 + .25) = 1.125 + .1875 + .3125
    #            = 1.625 -> kappa = 1 - .5 / 1.625 = 9/13
    a, b = [1, 2, 3, 1], [1, 3, 3, 2]
    assert cohen_kappa(a, b) == pytest.approx(3 / 11)
    assert cohen_kappa(a, b, "linear") == pytest.approx(0.5)
    assert cohen_kappa(a, b, "quadratic") == pytest.approx(9 / 13)


def test_cohen_kappa_perfect_and_opposite():
    assert cohen_kappa([1, 2, 3, 1], [1, 2, 3, 1]) == pytest.approx(1.0)
    # both raters constant but on different categories: p_o = 0, p_e = 0 -> kappa = 0
    assert cohen_kappa([1, 1, 1], [2, 2, 2]) == pytest.approx(0.0)


def test_cohen_kappa_categories_fix_weighted_distances():
    # Without categories the observed union is [1, 2, 4]: 2 and 4 are adjacent (distance 1).
    # With the full scale 1..5 they are 2 apart, which changes the weighted kappa but not
    # the unweighted one.
    a, b = [1, 2, 4, 4, 2], [1, 4, 4, 2, 2]
    full = range(1, 6)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa(a, b, categories=full))
    assert cohen_kappa(a, b, "linear") != pytest.approx(
        cohen_kappa(a, b, "linear", categories=full)
    )
    expected = inter_rater.cohens_kappa(
        table_by_loop(a, b, full), wt="linear", return_results=False
    )
    assert cohen_kappa(a, b, "linear", categories=full) == pytest.approx(expected)


@PROPERTY
@given(int_pairs(), st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_matches_statsmodels(pair, weights):
    a, b = pair
    cats = sorted(set(a) | set(b))
    assume(not (len(set(a)) == 1 and set(a) == set(b)))  # undefined; tested separately
    table = table_by_loop(a, b, cats)
    if weights is None:
        expected = inter_rater.cohens_kappa(table, return_results=False)
    else:
        # statsmodels: weights=None with wt set uses scores 0..k-1, i.e. |i-j| or (i-j)^2
        expected = inter_rater.cohens_kappa(table, wt=weights, return_results=False)
    got = cohen_kappa(a, b, weights)
    assert np.isfinite(got)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


@PROPERTY
@given(int_pairs(max_k=5), st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_with_full_scale_matches_statsmodels(pair, weights):
    a, b = pair
    assume(not (len(set(a)) == 1 and set(a) == set(b)))
    scale = [1, 2, 3, 4, 5]
    table = table_by_loop(a, b, scale)
    kwargs = {} if weights is None else {"wt": weights}
    expected = inter_rater.cohens_kappa(table, return_results=False, **kwargs)
    assert cohen_kappa(a, b, weights, categories=scale) == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_undefined_raises():
    with pytest.raises(ValueError, match="undefined"):
        cohen_kappa([3, 3, 3], [3, 3, 3])
    with pytest.raises(ValueError, match="undefined"):
        cohen_kappa([3, 3], [3, 3], "quadratic", categories=[1, 2, 3])


# ---------------------------------------------------------------------------
# Fleiss' kappa
# ---------------------------------------------------------------------------

# Fleiss (1971) style example from Wikipedia: 10 items, 14 raters, 5 categories.
WIKIPEDIA_FLEISS = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def test_fleiss_kappa_wikipedia_example():
    # P_i = (sum_j n_ij^2 - 14) / (14 * 13): 1.000, .253, .308, .440, .330, .462, .242, .176,
    #   .286, .286 -> P_bar = 3.780 / 10 = .378
    # column totals 20, 28, 39, 21, 32 of 140 -> p_j = .143, .200, .279, .150, .229
    # P_e = sum p_j^2 = .213; kappa = (.378 - .213) / (1 - .213) = .210
    assert round(fleiss_kappa_from_counts(WIKIPEDIA_FLEISS), 3) == 0.210
    # the same data as an items x raters label matrix
    ratings = np.array([np.repeat(np.arange(1, 6), row) for row in WIKIPEDIA_FLEISS])
    assert ratings.shape == (10, 14)
    assert fleiss_kappa(ratings) == pytest.approx(fleiss_kappa_from_counts(WIKIPEDIA_FLEISS))
    assert category_counts(ratings).tolist() == WIKIPEDIA_FLEISS.tolist()


def test_fleiss_kappa_small_by_hand():
    # 2 items x 3 raters: [a, a, a] and [a, b, b].
    # P_1 = (9 - 3) / 6 = 1; P_2 = (1 + 4 - 3) / 6 = 1/3; P_bar = 2/3
    # p_a = 4/6, p_b = 2/6; P_e = 16/36 + 4/36 = 5/9; kappa = (2/3 - 5/9) / (4/9) = 1/4
    assert fleiss_kappa([["a", "a", "a"], ["a", "b", "b"]]) == pytest.approx(0.25)


def test_fleiss_kappa_categories_argument():
    ratings = [[1, 1, 2], [2, 2, 2], [1, 3, 3]]
    base = fleiss_kappa(ratings)
    assert fleiss_kappa(ratings, categories=[1, 2, 3, 4, 5]) == pytest.approx(base)
    with pytest.raises(ValueError, match="not in categories"):
        fleiss_kappa(ratings, categories=[1, 2])


@PROPERTY
@given(int_matrices())
def test_fleiss_kappa_matches_statsmodels(ratings):
    assume(len(np.unique(ratings)) > 1)
    counts, _ = inter_rater.aggregate_raters(ratings)
    expected = inter_rater.fleiss_kappa(counts, method="fleiss")
    got = fleiss_kappa(ratings)
    assert np.isfinite(got)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert fleiss_kappa_from_counts(counts) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(2, 6))
def test_batched_fleiss_matches_statsmodels(seed, m, k):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, k, size=(4, 25, m))
    codes[0] = np.minimum(codes[0], 1)  # a batch element with few categories
    expected = [
        inter_rater.fleiss_kappa(inter_rater.aggregate_raters(c)[0], method="fleiss") for c in codes
    ]
    counts = batched_category_counts(codes, k)
    np.testing.assert_allclose(batched_fleiss_kappa_from_counts(counts), expected, atol=1e-12)
    np.testing.assert_allclose(batched_fleiss_kappa_from_codes(codes, k), expected, atol=1e-12)


def test_batched_fleiss_from_codes_many_raters_path():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 3, size=(2, 30, 12))  # m > 8 uses the count-matrix path
    expected = [inter_rater.fleiss_kappa(inter_rater.aggregate_raters(c)[0]) for c in codes]
    np.testing.assert_allclose(batched_fleiss_kappa_from_codes(codes, 3), expected, atol=1e-12)


def test_fleiss_kappa_undefined_raises():
    with pytest.raises(ValueError, match="one category"):
        fleiss_kappa([[2, 2], [2, 2], [2, 2]])
    codes = np.zeros((3, 5, 3), dtype=int)
    codes[0, 0, 0] = 1  # only batch element 0 is defined
    with pytest.raises(ValueError, match="batch index"):
        batched_fleiss_kappa_from_codes(codes, 2)
    with pytest.raises(ValueError, match="batch index"):
        batched_fleiss_kappa_from_counts(batched_category_counts(codes, 2))


# ---------------------------------------------------------------------------
# Kendall's tau
# ---------------------------------------------------------------------------


def test_kendall_tau_by_hand_with_ties():
    # x = [1, 1, 2, 2, 3], y = [1, 2, 2, 3, 3]; of the 10 pairs: concordant
    # (0,2) (0,3) (0,4) (1,3) (1,4) (2,4) = 6, discordant 0, the rest tied on x or y.
    # ties in x: groups of 2, 2, 1 -> n1 = 1 + 1 = 2; ties in y: 1, 2, 2 -> n2 = 2.
    # tau-b = 6 / sqrt((10 - 2) (10 - 2)) = 0.75
    # tau-c = 2 * 6 / (5^2 * (3 - 1) / 3) = 12 / (50/3) = 0.72  (3 distinct values each)
    x, y = [1, 1, 2, 2, 3], [1, 2, 2, 3, 3]
    assert kendall_tau(x, y, "b") == pytest.approx(0.75)
    assert kendall_tau(x, y, "c") == pytest.approx(0.72)
    table = [[1, 1, 0], [0, 1, 1], [0, 0, 1]]  # rows x = 1..3, columns y = 1..3
    assert contingency_table(x, y).tolist() == table
    assert kendall_tau_from_table(table, "b") == pytest.approx(0.75)
    assert kendall_tau_from_table(table, "c") == pytest.approx(0.72)


def test_kendall_tau_without_ties_by_hand():
    # x = [1, 2, 3, 4], y = [1, 3, 2, 4]: one discordant pair (2, 3) of 6 -> (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1], "c") == pytest.approx(-1.0)


def test_tau_c_counts_observed_categories_like_scipy():
    # Padding the table with empty rows/columns (unused scale points) changes nothing:
    # m in tau-c is the number of distinct observed values, as in scipy.
    x, y = [1, 1, 2, 2, 3], [1, 2, 2, 3, 3]
    padded = contingency_table(x, y, categories=[0, 1, 2, 3, 4, 5])
    assert padded.shape == (6, 6)
    for variant in ("b", "c"):
        expected = scipy.stats.kendalltau(x, y, variant=variant).statistic
        assert kendall_tau_from_table(padded, variant) == pytest.approx(expected)


@PROPERTY
@given(int_pairs(), st.sampled_from(["b", "c"]))
def test_kendall_tau_small_ints_matches_scipy(pair, variant):
    x, y = pair
    assume(len(set(x)) > 1 and len(set(y)) > 1)
    expected = scipy.stats.kendalltau(x, y, variant=variant).statistic
    assert kendall_tau(x, y, variant) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@PROPERTY
@given(real_pairs(), st.sampled_from(["b", "c"]))
def test_kendall_tau_reals_matches_scipy(pair, variant):
    x, y = pair
    assume(len(set(x)) > 1 and len(set(y)) > 1)
    expected = scipy.stats.kendalltau(x, y, variant=variant).statistic
    assert kendall_tau(x, y, variant) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("variant", ["b", "c"])
@pytest.mark.parametrize("max_cells", [0, 1 << 40])
def test_kendall_tau_both_paths_on_large_real_data(monkeypatch, variant, max_cells):
    # max_cells = 0 forces the scipy fallback, a huge value forces the table path.
    monkeypatch.setattr(agreement.tau, "_MAX_TABLE_CELLS", max_cells)
    rng = np.random.default_rng(7)
    x = rng.normal(size=700)
    y = np.round(x + rng.normal(size=700), 1)  # ties in y only
    expected = scipy.stats.kendalltau(x, y, variant=variant).statistic
    assert kendall_tau(x, y, variant) == pytest.approx(expected, rel=1e-12)


@PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(2, 6), st.sampled_from(["b", "c"]))
def test_batched_tau_from_tables_matches_scipy(seed, k, variant):
    # Method A of the VICR paper: candidate repeated per reference rater, references
    # concatenated; summing the two tables equals tabulating the flattened vectors.
    rng = np.random.default_rng(seed)
    x, y, z = rng.integers(0, k, size=(3, 5, 30))
    x[:, 0], y[:, 0], z[:, 0] = 0, 1, 1  # keep every batch element non-constant
    x[:, 1], y[:, 1], z[:, 1] = 1, 0, 0
    tables = batched_contingency_tables(x, y, k) + batched_contingency_tables(x, z, k)
    flat_tables = batched_contingency_tables(
        np.concatenate([x, x], axis=1), np.concatenate([y, z], axis=1), k
    )
    np.testing.assert_array_equal(tables, flat_tables)
    got = batched_kendall_tau_from_tables(tables, variant)
    expected = [
        scipy.stats.kendalltau(np.r_[x[b], x[b]], np.r_[y[b], z[b]], variant=variant).statistic
        for b in range(5)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_vicr_method_a_from_joint_counts_matches_scipy():
    # The recipe of the module docstring: the three method-A taus from one joint table.
    rng = np.random.default_rng(17)
    codes = np.sort(rng.integers(0, 5, size=(4, 60, 3)), axis=-1)
    joint = batched_joint_counts(codes, 5)
    t_xy, t_xz, t_yz = joint.sum(axis=3), joint.sum(axis=2), joint.sum(axis=1)
    got = {
        "x": batched_kendall_tau_from_tables(t_xy + t_xz, "c"),
        "y": batched_kendall_tau_from_tables(t_xy.swapaxes(-1, -2) + t_yz, "c"),
        "z": batched_kendall_tau_from_tables((t_xz + t_yz).swapaxes(-1, -2), "c"),
    }
    for b in range(4):
        x, y, z = codes[b].T
        for name, cand, refs in [("x", x, (y, z)), ("y", y, (x, z)), ("z", z, (x, y))]:
            flat_cand, flat_refs = np.concatenate([cand, cand]), np.concatenate(refs)
            expected = scipy.stats.kendalltau(flat_cand, flat_refs, variant="c").statistic
            assert got[name][b] == pytest.approx(expected, rel=1e-12)


def test_kendall_tau_undefined_raises():
    with pytest.raises(ValueError, match="constant"):
        kendall_tau([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="constant"):
        kendall_tau([1, 2, 3], [5, 5, 5], "c")
    with pytest.raises(ValueError, match="constant"):
        kendall_tau_from_table([[0, 0], [3, 4]], "b")
    with pytest.raises(ValueError, match="batch index"):
        batched_kendall_tau_from_tables([[[1, 0], [0, 1]], [[2, 2], [0, 0]]], "c")


# ---------------------------------------------------------------------------
# Pearson and Spearman
# ---------------------------------------------------------------------------


def test_pearson_and_spearman_by_hand():
    # x = [1, 2, 3], y = [1, 3, 2]: centred (-1, 0, 1) and (-1, 1, 0); sum xy = 1,
    # sum x^2 = sum y^2 = 2 -> r = 1 / 2
    assert pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    # x = [1, 2, 2, 3] has midranks (1, 2.5, 2.5, 4); y = [1, 2, 3, 4] ranks (1, 2, 3, 4).
    # centred (-1.5, 0, 0, 1.5) and (-1.5, -.5, .5, 1.5): sum xy = 4.5, sum x^2 = 4.5,
    # sum y^2 = 5 -> rho = 4.5 / sqrt(22.5) = sqrt(0.9)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(np.sqrt(0.9))
    assert spearman([1, 10, 100], [3, 2, 1]) == pytest.approx(-1.0)


@PROPERTY
@given(real_pairs())
def test_pearson_matches_scipy(pair):
    x, y = pair
    assume(len(set(x)) > 1 and len(set(y)) > 1)
    got = pearson(x, y)
    assert -1.0 <= got <= 1.0
    assert got == pytest.approx(scipy.stats.pearsonr(x, y).statistic, rel=1e-7, abs=1e-9)


@PROPERTY
@given(st.one_of(real_pairs(), int_pairs()))
def test_spearman_matches_scipy(pair):
    x, y = pair
    assume(len(set(x)) > 1 and len(set(y)) > 1)
    expected = scipy.stats.spearmanr(x, y).statistic
    assert spearman(x, y) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_pearson_large_magnitudes():
    x = np.array([1e300, 2e300, 3e300])
    assert pearson(x, [1, 3, 2]) == pytest.approx(0.5)


def test_correlation_undefined_raises():
    for f in (pearson, spearman):
        with pytest.raises(ValueError, match="constant"):
            f([2, 2, 2], [1, 2, 3])
        with pytest.raises(ValueError, match="constant"):
            f([1, 2, 3], [0.5, 0.5, 0.5])


# ---------------------------------------------------------------------------
# Kendall's W
# ---------------------------------------------------------------------------


def test_kendall_w_by_hand_with_ties():
    # items x raters; rater A = (1, 2, 3, 4), B = (1, 1, 2, 3), C = (2, 1, 4, 3)
    # ranks: A (1, 2, 3, 4); B (1.5, 1.5, 3, 4) with one tie group t = 2 -> T = 8 - 2 = 6;
    #        C (2, 1, 4, 3)
    # rank sums R = (4.5, 4.5, 10, 11), mean 7.5, S = 9 + 9 + 6.25 + 12.25 = 36.5
    # W = 12 * 36.5 / (3^2 (4^3 - 4) - 3 * 6) = 438 / 522 = 73 / 87
    ratings = np.array([[1, 1, 2], [2, 1, 1], [3, 2, 4], [4, 3, 3]])
    assert kendall_w(ratings) == pytest.approx(73 / 87)
    assert kendall_w(ratings + 0.5) == pytest.approx(73 / 87)  # non-integer path
    assert kendall_w(ratings * np.pi) == pytest.approx(73 / 87)


def test_kendall_w_extremes():
    same = np.array([[1, 1, 1], [2, 2, 2], [3, 3, 3], [5, 5, 5]])
    assert kendall_w(same) == pytest.approx(1.0)
    # two raters with opposite orders: every rank sum is n + 1, S = 0, W = 0
    assert kendall_w([[1, 4], [2, 3], [3, 2], [4, 1]]) == pytest.approx(0.0)


@PROPERTY
@given(int_matrices(min_rows=2))
def test_kendall_w_integer_path_matches_direct(ratings):
    assume(any(len(set(ratings[:, j])) > 1 for j in range(ratings.shape[1])))
    got = kendall_w(ratings)
    assert 0.0 <= got <= 1.0 + 1e-12
    assert got == pytest.approx(kendall_w_direct(ratings), rel=1e-12, abs=1e-12)


@PROPERTY
@given(st.integers(2, 25), st.integers(2, 6), st.data())
def test_kendall_w_real_path_matches_direct(n, m, data):
    flat = data.draw(st.lists(real, min_size=n * m, max_size=n * m))
    ratings = np.array(flat).reshape(n, m)
    assume(any(len(set(ratings[:, j])) > 1 for j in range(m)))
    assert kendall_w(ratings) == pytest.approx(kendall_w_direct(ratings), rel=1e-12, abs=1e-12)


@PROPERTY
@given(st.integers(2, 12), st.integers(2, 5), st.randoms(use_true_random=False))
def test_kendall_w_equals_mean_spearman_without_ties(n, m, rnd):
    # For m rankings without ties, mean pairwise Spearman rho = (m W - 1) / (m - 1).
    ratings = np.column_stack([rnd.sample(range(1, n + 1), n) for _ in range(m)])
    w = kendall_w(ratings)
    rhos = [
        scipy.stats.spearmanr(ratings[:, i], ratings[:, j]).statistic
        for i, j in combinations(range(m), 2)
    ]
    assert np.mean(rhos) == pytest.approx((m * w - 1) / (m - 1), abs=1e-12)


@PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(2, 6))
def test_batched_kendall_w_matches_direct(seed, m, k):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, k, size=(3, 20, m))
    codes[:, 0, 0], codes[:, 1, 0] = 0, 1  # rater 0 is never constant
    got = batched_kendall_w_from_codes(codes, k)
    np.testing.assert_allclose(got, [kendall_w_direct(c) for c in codes], rtol=1e-12)


@pytest.mark.parametrize("profile_cells", [0, 1 << 20])
def test_both_batched_code_paths_match_direct(monkeypatch, profile_cells):
    # 0 forces the per-item path, 1 << 20 the rating-profile path of W and Fleiss' kappa.
    monkeypatch.setattr(agreement.profiles, "MAX_PROFILE_CELLS", profile_cells)
    rng = np.random.default_rng(21)
    for k, m in [(2, 2), (5, 3), (4, 5), (3, 8)]:
        codes = rng.integers(0, k, size=(3, 40, m))
        codes[:, 0, :], codes[:, 1, :] = 0, 1  # every rater uses at least two categories
        np.testing.assert_allclose(
            batched_kendall_w_from_codes(codes, k), [kendall_w_direct(c) for c in codes]
        )
        expected = [inter_rater.fleiss_kappa(inter_rater.aggregate_raters(c)[0]) for c in codes]
        np.testing.assert_allclose(batched_fleiss_kappa_from_codes(codes, k), expected)


def test_batched_joint_counts_against_loop():
    rng = np.random.default_rng(8)
    codes = rng.integers(0, 3, size=(2, 30, 3))
    joint = batched_joint_counts(codes, 3)
    assert joint.shape == (2, 3, 3, 3)
    for b in range(2):
        expected = np.zeros((3, 3, 3), dtype=int)
        for c1, c2, c3 in codes[b]:
            expected[c1, c2, c3] += 1
        np.testing.assert_array_equal(joint[b], expected)
    # summing out the third rater gives the contingency table of the first two
    np.testing.assert_array_equal(
        joint.sum(axis=-1), batched_contingency_tables(codes[..., 0], codes[..., 1], 3)
    )


def test_kendall_w_undefined_raises():
    with pytest.raises(ValueError, match="same rating"):
        kendall_w([[3, 1], [3, 1], [3, 1]])
    with pytest.raises(ValueError, match="same rating"):
        kendall_w([[0.5, 1.5], [0.5, 1.5]])
    codes = np.zeros((2, 4, 3), dtype=int)
    codes[0, 0, 0] = 1
    with pytest.raises(ValueError, match="batch index"):
        batched_kendall_w_from_codes(codes, 2)


# ---------------------------------------------------------------------------
# Krippendorff's alpha
# ---------------------------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C example:
# 4 observers x 12 units, published alpha nominal .743, ordinal .815, interval .849.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
]


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_krippendorff_published_example(level, published):
    assert round(krippendorff_alpha(KRIPPENDORFF_2011, level), 3) == published


def test_krippendorff_by_hand():
    # 2 raters x 3 units: (1, 1), (2, 3), (3, 3); pairable values n = 6 with
    # n_1 = 2, n_2 = 1, n_3 = 3; the only disagreeing unit is (2, 3), giving the coincidences
    # o_23 = o_32 = 1 / (2 - 1).  alpha = 1 - (n - 1) sum o delta / sum n_c n_k delta.
    # nominal: sum o delta = 2; sum n_c n_k delta = 36 - (4 + 1 + 9) = 22 -> 1 - 10/22 = 6/11
    # interval: sum o delta = 2 * 1 = 2;
    #   sum n_c n_k delta = 2 (2*1*1 + 2*3*4 + 1*3*1) = 58 -> 1 - 10/58 = 24/29
    # ordinal: delta_12 = (2 + 1 - 1.5)^2 = 2.25, delta_13 = (6 - 2.5)^2 = 12.25,
    #   delta_23 = (4 - 2)^2 = 4; sum o delta = 8;
    #   sum n_c n_k delta = 2 (2*1*2.25 + 2*3*12.25 + 1*3*4) = 180 -> 1 - 40/180 = 7/9
    ratings = [[1, 2, 3], [1, 3, 3]]
    assert krippendorff_alpha(ratings, "nominal") == pytest.approx(6 / 11)
    assert krippendorff_alpha(ratings, "interval") == pytest.approx(24 / 29)
    assert krippendorff_alpha(ratings, "ordinal") == pytest.approx(7 / 9)
    # a unit with a single value is not pairable and changes nothing
    with_lonely = [[1, 2, 3, 5], [1, 3, 3, nan]]
    assert krippendorff_alpha(with_lonely, "interval") == pytest.approx(24 / 29)


@st.composite
def reliability_data(draw):
    """Raters x units matrix of small integers with some NaN (missing) entries."""
    raters = draw(st.integers(2, 5))
    units = draw(st.integers(1, 20))
    k = draw(st.integers(2, 6))
    cell = st.one_of(st.integers(1, k).map(float), st.just(nan))
    flat = draw(st.lists(cell, min_size=raters * units, max_size=raters * units))
    return np.array(flat).reshape(raters, units)


def pairable_values(data: np.ndarray) -> np.ndarray:
    present = ~np.isnan(data)
    keep = present & (present.sum(axis=0) >= 2)
    return data[keep]


@PROPERTY
@given(reliability_data(), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_krippendorff_matches_package(data, level):
    assume(len(np.unique(pairable_values(data))) >= 2)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    got = krippendorff_alpha(data, level)
    assert np.isfinite(got)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


@PROPERTY
@given(st.integers(0, 2**32 - 1), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_krippendorff_real_values_match_package(seed, level):
    rng = np.random.default_rng(seed)
    data = np.round(rng.normal(size=(3, 15)), 1)
    data[rng.random(data.shape) < 0.2] = nan
    assume(len(np.unique(pairable_values(data))) >= 2)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert krippendorff_alpha(data, level) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_krippendorff_undefined_raises():
    with pytest.raises(ValueError, match="pairable"):
        krippendorff_alpha([[1, nan, 3], [nan, 2, nan]])
    with pytest.raises(ValueError, match="equal"):
        krippendorff_alpha([[2, 2, 5], [2, 2, nan]], "nominal")


# ---------------------------------------------------------------------------
# Building blocks and bad input
# ---------------------------------------------------------------------------


def test_encode_categories():
    codes, cats = encode_categories([[3, 1], [5, 3]])
    assert cats.tolist() == [1, 3, 5]
    assert codes.tolist() == [[1, 0], [2, 1]]
    codes, cats = encode_categories(["low", "high", "mid"], categories=["low", "mid", "high"])
    assert codes.tolist() == [0, 2, 1]
    with pytest.raises(ValueError, match="not in categories"):
        encode_categories([1, 7], categories=[1, 2])
    with pytest.raises(ValueError, match="duplicates"):
        encode_categories([1, 2], categories=[1, 2, 2])


def test_batched_counts_and_tables_against_loops():
    rng = np.random.default_rng(11)
    codes = rng.integers(0, 4, size=(2, 6, 3))
    counts = batched_category_counts(codes, 4)
    for b in range(2):
        for i in range(6):
            assert counts[b, i].tolist() == [int((codes[b, i] == c).sum()) for c in range(4)]
    tables = batched_contingency_tables(codes[..., 0], codes[..., 1], 4)
    for b in range(2):
        np.testing.assert_array_equal(
            tables[b], table_by_loop(codes[b, :, 0], codes[b, :, 1], range(4))
        )


BAD_INPUT = [
    ("empty", lambda: kendall_tau([], [])),
    ("at least 2 observations", lambda: kendall_tau([1], [2])),
    ("lengths", lambda: kendall_tau([1, 2, 3], [1, 2])),
    ("variant", lambda: kendall_tau([1, 2, 3], [1, 3, 2], "a")),
    ("variant", lambda: kendall_tau_from_table([[1, 0], [0, 1]], "tau")),
    ("non-finite", lambda: kendall_tau([1, nan, 3], [1, 2, 3])),
    ("1-D", lambda: kendall_tau([[1, 2], [3, 4]], [[1, 2], [3, 4]])),
    ("table must be 2-D", lambda: kendall_tau_from_table([1, 2, 3])),
    ("negative", lambda: kendall_tau_from_table([[1, -1], [0, 2]])),
    ("whole", lambda: kendall_tau_from_table([[1.5, 0], [0, 2]])),
    ("empty", lambda: pearson([], [])),
    ("lengths", lambda: pearson([1, 2, 3], [1, 2])),
    ("non-finite", lambda: pearson([1, np.inf, 3], [1, 2, 3])),
    ("non-finite", lambda: spearman([1, 2, 3], [1, nan, 3])),
    ("numeric", lambda: pearson(["a", "b"], [1, 2])),
    ("empty", lambda: cohen_kappa([], [])),
    ("lengths", lambda: cohen_kappa([1, 2], [1, 2, 3])),
    ("weights", lambda: cohen_kappa([1, 2], [1, 2], "cubic")),
    ("missing", lambda: cohen_kappa([1, nan], [1, 2])),
    ("not in categories", lambda: cohen_kappa([1, 2], [1, 3], categories=[1, 2])),
    ("different kinds", lambda: cohen_kappa([1, 2], ["1", "2"])),
    ("not in categories", lambda: cohen_kappa([1, 2], [1, 2], categories=["a", "b"])),
    ("2-D", lambda: fleiss_kappa([1, 2, 3])),
    ("2 raters", lambda: fleiss_kappa([[1], [2]])),
    ("empty", lambda: fleiss_kappa([])),
    ("missing", lambda: fleiss_kappa([[1, nan], [2, 2]])),
    ("missing", lambda: fleiss_kappa(np.array([[1, None], [2, 2]], dtype=object))),
    ("same number", lambda: fleiss_kappa_from_counts([[2, 1], [1, 1]])),
    ("2-D", lambda: fleiss_kappa_from_counts([1, 2])),
    ("2-D", lambda: kendall_w([1, 2, 3])),
    ("2 items", lambda: kendall_w([[1, 2]])),
    ("2 raters", lambda: kendall_w([[1], [2]])),
    ("non-finite", lambda: kendall_w([[1, 2], [nan, 3]])),
    ("empty", lambda: kendall_w(np.zeros((0, 3)))),
    ("level", lambda: krippendorff_alpha([[1, 2], [1, 2]], "ratio")),
    ("2-D", lambda: krippendorff_alpha([1, 2, 3])),
    ("infinity", lambda: krippendorff_alpha([[1, np.inf], [1, 2]])),
    ("numeric", lambda: krippendorff_alpha([["a", "b"], ["a", "b"]])),
    ("empty", lambda: krippendorff_alpha(np.zeros((2, 0)))),
    ("lie in", lambda: batched_contingency_tables([0, 5], [0, 1], 5)),
    ("integer", lambda: batched_contingency_tables([0.0, 1.0], [0, 1], 2)),
    ("shapes", lambda: batched_contingency_tables([0, 1], [0, 1, 1], 2)),
    ("n_categories", lambda: batched_category_counts([[0, 1]], 0)),
    ("lie in", lambda: batched_kendall_w_from_codes([[0, -1], [1, 1]], 2)),
    ("2-D", lambda: batched_fleiss_kappa_from_codes([0, 1], 2)),
    ("2-D", lambda: batched_joint_counts([0, 1], 2)),
    ("too many", lambda: batched_joint_counts(np.zeros((2, 30), dtype=int), 2)),
]


@pytest.mark.parametrize(("message", "call"), BAD_INPUT)
def test_bad_input_raises_value_error(message, call):
    with pytest.raises(ValueError, match=message):
        call()
