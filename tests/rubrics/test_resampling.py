"""Tests for rubrics.resampling: determinism, pairing, clustering, coverage, half-splits."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubrics import humanr, thumb
from rubrics.resampling import (
    as_generator,
    cluster_bootstrap_mean,
    half_splits,
    paired_bootstrap_means,
    paired_cluster_bootstrap_means,
    percentile_bootstrap,
    percentile_interval,
    percentile_levels,
    resample_counts,
    resample_indices,
    subsample_indices,
)

PROPERTY = settings(max_examples=50, deadline=None)


# ---------------------------------------------------------------------------
# Seeds and index draws
# ---------------------------------------------------------------------------


def test_resample_indices_shape_range_and_determinism():
    idx = resample_indices(7, 50, seed=3)
    assert idx.shape == (50, 7)
    assert idx.min() >= 0 and idx.max() < 7
    np.testing.assert_array_equal(idx, resample_indices(7, 50, seed=3))
    assert not np.array_equal(idx, resample_indices(7, 50, seed=4))
    # an int seed and a fresh Generator with that seed give the same stream
    np.testing.assert_array_equal(idx, resample_indices(7, 50, np.random.default_rng(3)))


def test_generator_is_advanced_in_place():
    rng = np.random.default_rng(5)
    first = resample_indices(10, 3, rng)
    second = resample_indices(10, 3, rng)
    assert not np.array_equal(first, second)
    assert as_generator(rng) is rng


def test_resample_counts_are_the_same_draws_as_indices():
    idx = resample_indices(9, 40, seed=1)
    counts = resample_counts(9, 40, seed=1)
    assert counts.shape == (40, 9)
    assert (counts.sum(axis=1) == 9).all()
    for r in range(40):
        np.testing.assert_array_equal(counts[r], np.bincount(idx[r], minlength=9))


def test_subsample_indices_without_replacement():
    sub = subsample_indices(20, 8, 30, seed=2)
    assert sub.shape == (30, 8)
    assert all(len(set(row)) == 8 for row in sub.tolist())
    assert sub.min() >= 0 and sub.max() < 20
    np.testing.assert_array_equal(sub, subsample_indices(20, 8, 30, seed=2))
    assert len({tuple(sorted(row)) for row in sub.tolist()}) > 1
    full = subsample_indices(5, 5, 3, seed=0)
    assert all(sorted(row) == [0, 1, 2, 3, 4] for row in full.tolist())


# ---------------------------------------------------------------------------
# Percentile intervals and the generic bootstrap
# ---------------------------------------------------------------------------


def test_percentile_interval_matches_numpy_percentiles():
    reps = np.arange(101.0)  # quantiles are exact: q-th percentile = q
    low, high = percentile_interval(reps, 0.90)
    assert (float(low), float(high)) == pytest.approx((5.0, 95.0))
    low, high = percentile_interval(reps, 0.95)
    assert (float(low), float(high)) == pytest.approx((2.5, 97.5))


def test_percentile_bootstrap_equals_manual_loop():
    rng = np.random.default_rng(0)
    data = rng.normal(size=60)
    idx = resample_indices(60, 500, seed=9)
    reps = np.array([np.median(data[i]) for i in idx])
    expected = np.percentile(reps, [2.5, 97.5])
    got = percentile_bootstrap(np.median, data, n_resamples=500, seed=9)
    assert got == pytest.approx(tuple(expected))
    # the vectorised form gives the same interval
    vec = percentile_bootstrap(
        lambda s: np.median(s, axis=1), data, n_resamples=500, seed=9, vectorized=True
    )
    assert vec == pytest.approx(got)
    assert percentile_bootstrap(np.median, data, 500, seed=9) == got  # deterministic


def test_percentile_bootstrap_resamples_rows_together():
    # Rows of a 2-D array are resampled as pairs: the correlation of an exactly linear
    # relation stays 1 in every resample (unless a resample repeats a single row).
    x = np.arange(30.0)
    data = np.column_stack([x, 2 * x + 1])

    def corr(sample):
        if np.ptp(sample[:, 0]) == 0:
            return 1.0
        return np.corrcoef(sample[:, 0], sample[:, 1])[0, 1]

    low, high = percentile_bootstrap(corr, data, n_resamples=200, seed=0)
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)


def test_percentile_bootstrap_rejects_undefined_statistic():
    with pytest.raises(ValueError, match="non-finite"):
        percentile_bootstrap(lambda s: np.nan, [1.0, 2.0, 3.0], n_resamples=10)
    with pytest.raises(ValueError, match="shape"):
        percentile_bootstrap(lambda s: 0.0, [1.0, 2.0], n_resamples=10, vectorized=True)


# ---------------------------------------------------------------------------
# Paired bootstrap of means
# ---------------------------------------------------------------------------


def test_paired_bootstrap_identical_and_shifted_columns():
    rng = np.random.default_rng(1)
    base = rng.normal(3.0, 1.0, size=200)
    values = np.column_stack([base, base, base + 0.75, rng.normal(3.0, 1.0, size=200)])
    res = paired_bootstrap_means(values, n_resamples=1000, seed=4)
    np.testing.assert_allclose(res.mean, values.mean(axis=0))
    # identical columns -> identical intervals
    assert res.low[0] == pytest.approx(res.low[1], abs=1e-12)
    assert res.high[0] == pytest.approx(res.high[1], abs=1e-12)
    # column + constant -> interval shifted by exactly that constant (same units drawn)
    assert res.low[2] - res.low[0] == pytest.approx(0.75, abs=1e-12)
    assert res.high[2] - res.high[0] == pytest.approx(0.75, abs=1e-12)
    # an independent column gets a different interval
    assert res.low[3] != pytest.approx(res.low[0], abs=1e-6)


def test_paired_bootstrap_equals_manual_loop_with_5th_95th_percentiles():
    rng = np.random.default_rng(2)
    values = rng.integers(1, 6, size=(80, 3)).astype(float)
    idx = resample_indices(80, 300, seed=12)
    reps = np.array([values[i].mean(axis=0) for i in idx])  # same rows for every column
    low, high = np.percentile(reps, [5, 95], axis=0)
    res = paired_bootstrap_means(values, n_resamples=300, seed=12)  # default confidence 0.90
    np.testing.assert_allclose(res.low, low, atol=1e-12)
    np.testing.assert_allclose(res.high, high, atol=1e-12)
    again = paired_bootstrap_means(values, n_resamples=300, seed=12)
    np.testing.assert_array_equal(res.low, again.low)
    np.testing.assert_array_equal(res.high, again.high)


@PROPERTY
@given(
    st.integers(1, 30),
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
    st.floats(0.5, 0.99),
)
def test_paired_bootstrap_interval_is_within_data_range(n, cols, seed, confidence):
    values = np.random.default_rng(seed).normal(size=(n, cols))
    res = paired_bootstrap_means(values, n_resamples=200, confidence=confidence, seed=seed)
    assert res.low.shape == res.high.shape == res.mean.shape == (cols,)
    tol = 1e-12
    assert (res.low <= res.high + tol).all()
    assert (values.min(axis=0) - tol <= res.low).all()
    assert (res.high <= values.max(axis=0) + tol).all()


# ---------------------------------------------------------------------------
# Cluster bootstrap
# ---------------------------------------------------------------------------


def test_cluster_bootstrap_with_singleton_clusters_is_the_ordinary_bootstrap():
    rng = np.random.default_rng(3)
    values = rng.normal(size=50)
    res = cluster_bootstrap_mean(values, np.arange(50), n_resamples=800, seed=6)
    ordinary = percentile_bootstrap(np.mean, values, n_resamples=800, seed=6)
    assert (res.low, res.high) == pytest.approx(ordinary, abs=1e-12)
    assert res.mean == pytest.approx(values.mean())


def test_cluster_bootstrap_equals_manual_loop_with_unequal_clusters():
    rng = np.random.default_rng(4)
    clusters = np.array(["img-b", "img-a", "img-c", "img-a", "img-b", "img-d", "img-a"])
    values = rng.normal(size=clusters.size)
    labels = np.unique(clusters)  # draws index the sorted labels
    idx = resample_indices(labels.size, 400, seed=8)
    reps = [np.concatenate([values[clusters == labels[g]] for g in row]).mean() for row in idx]
    low, high = np.percentile(reps, [2.5, 97.5])
    res = cluster_bootstrap_mean(values, clusters, n_resamples=400, seed=8)
    assert (res.low, res.high) == pytest.approx((low, high), abs=1e-12)


def test_cluster_bootstrap_treats_a_cluster_as_one_unit():
    # Each of 40 clusters holds its value 5 times: the cluster interval equals the interval
    # of the 40 distinct values, and is far wider than a naive bootstrap over the 200 rows.
    rng = np.random.default_rng(5)
    per_cluster = rng.normal(size=40)
    values = np.repeat(per_cluster, 5)
    clusters = np.repeat(np.arange(40), 5)
    res = cluster_bootstrap_mean(values, clusters, n_resamples=1000, seed=1)
    single = cluster_bootstrap_mean(per_cluster, np.arange(40), n_resamples=1000, seed=1)
    assert (res.low, res.high) == pytest.approx((single.low, single.high), abs=1e-12)
    naive_low, naive_high = percentile_bootstrap(np.mean, values, n_resamples=1000, seed=1)
    assert (res.high - res.low) > 1.5 * (naive_high - naive_low)


def test_cluster_bootstrap_coverage_of_a_known_mean():
    # 200 simulated samples of 40 observations (one per cluster, shuffled labels) from
    # N(3, 2^2): the 95% percentile interval should cover 3 in roughly 90-99% of them.
    covered = 0
    for sim in range(200):
        rng = np.random.default_rng(1000 + sim)
        values = rng.normal(3.0, 2.0, size=40)
        clusters = rng.permutation(40)
        res = cluster_bootstrap_mean(values, clusters, n_resamples=1000, seed=sim)
        covered += res.low <= 3.0 <= res.high
    assert 0.90 <= covered / 200 <= 0.99


# ---------------------------------------------------------------------------
# Paired cluster bootstrap (the one the THumB and HUMANr reports use)
# ---------------------------------------------------------------------------


def test_percentile_levels():
    assert percentile_levels(0.90) == pytest.approx([5.0, 95.0])
    assert percentile_levels(0.95) == pytest.approx([2.5, 97.5])


def test_paired_cluster_bootstrap_with_unit_sizes_is_the_paired_bootstrap():
    values = np.random.default_rng(6).normal(size=(40, 3))
    res = paired_cluster_bootstrap_means(values, np.ones_like(values), 300, 0.90, seed=2)
    plain = paired_bootstrap_means(values, 300, 0.90, seed=2)
    np.testing.assert_array_equal(res.low, plain.low)
    np.testing.assert_array_equal(res.high, plain.high)
    np.testing.assert_allclose(res.mean, plain.mean, rtol=1e-15)


def test_paired_cluster_bootstrap_with_one_column_is_the_cluster_bootstrap():
    clusters = np.array([2, 0, 1, 0, 2, 3, 0, 3, 1])
    values = np.array([0.5, -1.0, 0.25, 0.75, 0.0, -0.5, 1.0, 0.25, -0.25])
    sums = np.bincount(clusters, weights=values)[:, None]
    sizes = np.bincount(clusters).astype(float)[:, None]
    res = paired_cluster_bootstrap_means(sums, sizes, 400, 0.95, seed=3)
    single = cluster_bootstrap_mean(values, clusters, 400, 0.95, seed=3)
    assert (res.mean[0], res.low[0], res.high[0]) == pytest.approx(tuple(single), abs=1e-12)


def test_paired_cluster_bootstrap_skips_resamples_without_the_column():
    # Unit x column sums and sizes; column 1 exists in units 0 and 3 only, column 2 nowhere.
    sums = np.array([[3.0, 2.0, 0.0], [4.0, 0.0, 0.0], [1.0, 0.0, 0.0], [5.0, 6.0, 0.0]])
    sizes = np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 2.0, 0.0]])
    res = paired_cluster_bootstrap_means(sums, sizes, 200, 0.80, seed=4)
    idx = resample_indices(4, 200, seed=4)
    for j in (0, 1):
        reps = [sums[d, j].sum() / sizes[d, j].sum() for d in idx if sizes[d, j].sum() > 0]
        low, high = np.percentile(reps, [10, 90])
        assert (res.low[j], res.high[j]) == pytest.approx((low, high), abs=1e-12)
        assert res.mean[j] == pytest.approx(sums[:, j].sum() / sizes[:, j].sum())
    assert np.isnan([res.mean[2], res.low[2], res.high[2]]).all()


def test_thumb_report_interval_is_the_library_interval():
    # Hand-built: 6 images, systems Human and A; A lacks a caption on image i5.
    p_human = [5, 4, 5, 3, 4, 5]
    p_a = [3, 4, 2, 5, 1]
    rows = [(f"i{i}", "Human", p) for i, p in enumerate(p_human)]
    rows += [(f"i{i}", "A", p) for i, p in enumerate(p_a)]
    judgments = thumb.CaptionJudgments(
        image_ids=[r[0] for r in rows],
        systems=[r[1] for r in rows],
        precision=[r[2] for r in rows],
        recall=[3] * len(rows),
    )
    rep = thumb.report(judgments, n_resamples=250, confidence=0.90, seed=13).as_dict()
    sums = np.array([p_human, p_a + [0]], dtype=float).T  # images x (Human, A)
    sizes = np.array([[1.0] * 6, [1.0] * 5 + [0.0]]).T
    lib = paired_cluster_bootstrap_means(sums, sizes, 250, 0.90, seed=13)
    for j, system in enumerate(("Human", "A")):
        got = rep["per_system"][system]["precision"]
        assert (got["ci_low"], got["ci_high"]) == (lib.low[j], lib.high[j])  # integer sums: exact
    # Human has a caption on every image: its interval is the plain paired bootstrap's.
    plain = paired_bootstrap_means(np.array(p_human, dtype=float)[:, None], 250, 0.90, seed=13)
    got = rep["per_system"]["Human"]["precision"]
    assert (got["ci_low"], got["ci_high"]) == (plain.low[0], plain.high[0])
    assert rep["bootstrap"]["percentiles"] == percentile_levels(0.90)


def test_humanr_report_interval_is_the_library_interval():
    # Hand-built: 5 images; system A on every image (1-3 comparisons each), B on 3 images.
    rows = [  # (image, system, raw); the human caption is always on the left
        ("i0", "A", 2), ("i0", "A", 7), ("i0", "B", 5),
        ("i1", "A", 9),
        ("i2", "A", 1), ("i2", "A", 4), ("i2", "A", 6), ("i2", "B", 8),
        ("i3", "A", 3), ("i3", "B", 2), ("i3", "B", 3),
        ("i4", "A", 5), ("i4", "A", 8),
    ]  # fmt: skip
    n = len(rows)
    responses = humanr.Responses(
        worker_ids=["w0"] * n,
        image_ids=[r[0] for r in rows],
        systems=[r[1] for r in rows],
        raw=[r[2] for r in rows],
        human_on_left=[True] * n,
        is_attention_check=[False] * n,
        group_ids=["g0"] * n,
    )
    rep = humanr.report(responses, n_bootstrap=400, n_splits=3, confidence=0.95, seed=21)
    values = np.array([(r[2] - 5) / 4 for r in rows])
    images = np.array([r[0] for r in rows])
    # One system: the report's interval is the cluster bootstrap by image (values are
    # multiples of 1/4, so the sums are exact and the intervals equal).
    a = np.array([r[1] == "A" for r in rows])
    single = cluster_bootstrap_mean(values[a], images[a], 400, 0.95, seed=21)
    assert rep["systems"]["A"]["bootstrap_interval"] == [single.low, single.high]
    # Both systems, paired over the same image draws, B missing on i1 and i4.
    labels = sorted(set(images))
    sums = np.array([[values[(images == i) & s].sum() for s in (a, ~a)] for i in labels])
    sizes = np.array([[float(((images == i) & s).sum()) for s in (a, ~a)] for i in labels])
    lib = paired_cluster_bootstrap_means(sums, sizes, 400, 0.95, seed=21)
    assert rep["systems"]["A"]["bootstrap_interval"] == [lib.low[0], lib.high[0]]
    assert rep["systems"]["B"]["bootstrap_interval"] == [lib.low[1], lib.high[1]]


# ---------------------------------------------------------------------------
# Half-splits
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 10, 11])
def test_half_splits_partition_units(n):
    units = np.array([f"worker-{i}" for i in range(n)])
    masks = half_splits(units, 25, seed=7)
    assert masks.shape == (25, n) and masks.dtype == bool
    for mask in masks:
        first, second = units[mask], units[~mask]
        assert set(first).isdisjoint(second)
        assert set(first) | set(second) == set(units)
        assert len(first) == n // 2 and len(second) == n - n // 2
        assert abs(len(first) - len(second)) <= 1
    np.testing.assert_array_equal(masks, half_splits(n, 25, seed=7))


def test_half_splits_are_random_and_balanced():
    masks = half_splits(12, 2000, seed=0)
    assert len({row.tobytes() for row in masks}) > 500  # many different splits
    share = masks.mean(axis=0)  # each unit lands in the first half about half the time
    assert ((share > 0.45) & (share < 0.55)).all()
    assert not np.array_equal(half_splits(12, 5, seed=1), half_splits(12, 5, seed=2))


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

BAD_INPUT = [
    ("seed", lambda: resample_indices(5, 10, seed=None)),
    ("seed", lambda: resample_indices(5, 10, seed="1")),
    ("seed", lambda: resample_indices(5, 10, seed=True)),
    ("seed", lambda: resample_indices(5, 10, seed=-1)),
    ("n must be >= 1", lambda: resample_indices(0, 10)),
    ("n_resamples", lambda: resample_indices(5, 0)),
    ("n_resamples", lambda: resample_counts(5, 2.5)),
    ("cannot exceed", lambda: subsample_indices(3, 4, 10)),
    ("confidence", lambda: percentile_interval([1.0, 2.0], 1.0)),
    ("confidence", lambda: percentile_interval([1.0, 2.0], 0)),
    ("empty", lambda: percentile_interval([], 0.9)),
    ("at least one row", lambda: percentile_bootstrap(np.mean, [])),
    ("callable", lambda: percentile_bootstrap("mean", [1.0, 2.0])),
    ("2-D", lambda: paired_bootstrap_means([1.0, 2.0, 3.0])),
    ("empty", lambda: paired_bootstrap_means(np.zeros((0, 3)))),
    ("non-finite", lambda: paired_bootstrap_means([[1.0, np.nan], [2.0, 3.0]])),
    ("confidence", lambda: paired_bootstrap_means([[1.0], [2.0]], confidence=95)),
    ("different lengths", lambda: cluster_bootstrap_mean([1.0, 2.0], [1])),
    ("empty", lambda: cluster_bootstrap_mean([], [])),
    ("non-finite", lambda: cluster_bootstrap_mean([1.0, np.inf], [1, 2])),
    ("NaN", lambda: cluster_bootstrap_mean([1.0, 2.0], [1.0, np.nan])),
    ("1-D", lambda: cluster_bootstrap_mean([[1.0, 2.0]], [[1, 2]])),
    ("at least 2 units", lambda: half_splits(1, 5)),
    ("at least 2 units", lambda: half_splits(["only"], 5)),
    ("n_splits", lambda: half_splits(4, 0)),
    ("1-D", lambda: half_splits([[1, 2], [3, 4]], 3)),
    ("sums must be 2-D", lambda: paired_cluster_bootstrap_means([1.0, 2.0], [1.0, 1.0])),
    ("shape of sums", lambda: paired_cluster_bootstrap_means([[1.0]], [[1.0], [1.0]])),
    ("sizes must be >= 0", lambda: paired_cluster_bootstrap_means([[0.0]], [[-1.0]])),
    ("sums must be 0", lambda: paired_cluster_bootstrap_means([[2.0], [1.0]], [[0.0], [1.0]])),
    ("non-finite", lambda: paired_cluster_bootstrap_means([[np.nan]], [[1.0]])),
    ("confidence", lambda: paired_cluster_bootstrap_means([[1.0]], [[1.0]], confidence=0)),
    ("confidence", lambda: percentile_levels(1.5)),
]


@pytest.mark.parametrize(("message", "call"), BAD_INPUT)
def test_bad_input_raises_value_error(message, call):
    with pytest.raises(ValueError, match=message):
        call()
