"""rubrics.metaeval: against scipy, numpy least squares and hand-worked cases."""

import numpy as np
import pytest
import scipy.stats

from rubrics import metaeval
from rubrics.resampling import resample_indices


@pytest.fixture
def scored():
    rng = np.random.default_rng(3)
    human = rng.integers(1, 5, size=300).astype(float)  # graded 1-4 ratings
    metric = human + rng.normal(0, 1.5, size=300)
    return metric, human


@pytest.mark.parametrize(
    ("kind", "reference"),
    [
        ("pearson", lambda x, y: scipy.stats.pearsonr(x, y).statistic),
        ("kendall_tau_c", lambda x, y: scipy.stats.kendalltau(x, y, variant="c").statistic),
        ("kendall_tau_b", lambda x, y: scipy.stats.kendalltau(x, y, variant="b").statistic),
    ],
)
def test_correlation_value_and_interval_match_scipy_and_a_hand_loop(scored, kind, reference):
    metric, human = scored
    got = metaeval.correlation(metric, human, kind=kind, resamples=200, seed=5)
    assert got["value"] == pytest.approx(reference(metric, human), abs=1e-12)
    reps = [reference(metric[i], human[i]) for i in resample_indices(300, 200, 5)]
    low, high = np.percentile(reps, [2.5, 97.5])
    assert got["low"] == pytest.approx(low, abs=1e-12)
    assert got["high"] == pytest.approx(high, abs=1e-12)
    assert got["n"] == 300 and got["kind"] == kind and got["undefined_resamples"] == 0


def test_binary_scores_use_tau_b(scored):
    metric, human = scored
    binary = (human > 2).astype(float)
    got = metaeval.correlation(metric, binary, kind="kendall_tau_b", resamples=0)
    assert got["value"] == pytest.approx(
        scipy.stats.kendalltau(metric, binary).statistic, abs=1e-12
    )
    assert got["low"] is None and got["high"] is None
    assert metaeval.KIND_FOR_SCORE == {
        "continuous": "pearson",
        "graded": "kendall_tau_c",
        "binary": "kendall_tau_b",
    }


def test_cluster_bootstrap_draws_whole_captions(scored):
    # Three ratings per caption, the metric repeated: resampling captions keeps a
    # caption's rows together, so each resample has a multiple of 3 rows.
    metric, human = scored
    captions = np.repeat(np.arange(100), 3)
    m = np.repeat(metric[:100], 3)
    h = human
    got = metaeval.correlation(m, h, kind="kendall_tau_c", resamples=50, seed=1, clusters=captions)
    reps = []
    for draw in resample_indices(100, 50, 1):
        rows = np.concatenate([np.arange(3 * c, 3 * c + 3) for c in draw])
        reps.append(scipy.stats.kendalltau(m[rows], h[rows], variant="c").statistic)
    assert got["low"] == pytest.approx(np.percentile(reps, 2.5), abs=1e-12)
    assert got["high"] == pytest.approx(np.percentile(reps, 97.5), abs=1e-12)


def test_caption_correlations_takes_a_kind_per_human_score(scored):
    metric, human = scored
    table = metaeval.caption_correlations(
        {"m": metric},
        {"rating": human, "total": human * 0.5},
        kind={"rating": "kendall_tau_c", "total": "pearson"},
        resamples=0,
    )
    assert table[("m", "rating")]["kind"] == "kendall_tau_c"
    assert table[("m", "total")]["value"] == pytest.approx(
        scipy.stats.pearsonr(metric, human).statistic
    )


@pytest.mark.parametrize(
    ("metric", "human", "kind", "message"),
    [
        ([1, 2], [1, 2, 3], "pearson", "same length"),
        ([1], [1], "pearson", "at least 2"),
        ([1, 1, 1], [1, 2, 3], "kendall_tau_c", "constant"),
        ([1, np.nan], [1, 2], "pearson", "non-finite"),
        ([1, 2], [1, 2], "spearman", "kind must be one of"),
    ],
)
def test_correlation_bad_input(metric, human, kind, message):
    with pytest.raises(ValueError, match=message):
        metaeval.correlation(metric, human, kind=kind, resamples=0)


def test_system_table_means():
    table = metaeval.system_table(
        ["b", "a", "b", "a", "a"], {"BLEU": [1.0, 2.0, 3.0, 4.0, 6.0], "CIDEr": [0, 0, 1, 1, 1]}
    )
    assert table == {"a": {"BLEU": 4.0, "CIDEr": 2 / 3}, "b": {"BLEU": 2.0, "CIDEr": 0.5}}
    with pytest.raises(ValueError, match="one value per caption"):
        metaeval.system_table(["a", "b"], {"BLEU": [1.0]})


def test_pairwise_accuracy_hand_worked():
    # No ties: 3 of 4 pairs agree, every repetition gives 0.75, std 0.
    a = [0.9, 0.1, 0.5, 0.3]
    b = [0.1, 0.9, 0.2, 0.8]
    human = [0, 1, 1, 1]
    assert metaeval.pairwise_accuracy(a, b, human, repeats=5, seed=0) == (0.75, 0.0)
    # All metric ties: each pair is a fair coin, so the accuracy averages 1/2.
    mean, std = metaeval.pairwise_accuracy(
        [1.0] * 2000, [1.0] * 2000, [0] * 2000, repeats=20, seed=1
    )
    assert mean == pytest.approx(0.5, abs=0.01) and 0 < std < 0.03
    # Same seed, same coins.
    assert metaeval.pairwise_accuracy([1.0] * 50, [1.0] * 50, [1] * 50, seed=4) == (
        metaeval.pairwise_accuracy([1.0] * 50, [1.0] * 50, [1] * 50, seed=4)
    )
    with pytest.raises(ValueError, match="human_choice must hold"):
        metaeval.pairwise_accuracy([1.0], [0.0], [2])


def test_ensemble_recovers_an_exact_linear_rule_and_matches_lstsq():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, size=(200, 3))
    y = 1.5 + 0.2 * x[:, 0] - 0.5 * x[:, 1] + 0.0 * x[:, 2]
    ens = metaeval.fit_ensemble(x, y)
    # Rescaled weights are the raw slopes times each column's training range.
    span = x.max(axis=0) - x.min(axis=0)
    np.testing.assert_allclose(ens.weights, [0.2 * span[0], -0.5 * span[1], 0.0], atol=1e-9)
    np.testing.assert_allclose(metaeval.apply_ensemble(ens, x), y, atol=1e-9)
    # Noisy data: the same fit as numpy least squares on the rescaled design.
    noisy = y + rng.normal(0, 1, 200)
    ens = metaeval.fit_ensemble(x, noisy)
    scaled = (x - x.min(axis=0)) / span
    coef, *_ = np.linalg.lstsq(np.column_stack([np.ones(200), scaled]), noisy, rcond=None)
    assert ens.intercept == pytest.approx(coef[0]) and np.allclose(ens.weights, coef[1:])
    with pytest.raises(ValueError, match="constant"):
        metaeval.fit_ensemble(np.column_stack([x[:, 0], np.ones(200)]), y)
    with pytest.raises(ValueError, match="metric columns"):
        metaeval.apply_ensemble(ens, x[:, :2])


def test_robustness_curve_and_area_hand_worked():
    curve = metaeval.robustness_curve([2.0, 4.0], {1.0: [0.0, 1.0], 0.5: [1.5, 1.5]})
    assert curve == {0.0: 1.0, 0.5: 0.5, 1.0: 1 / 6}
    # Trapezoids: 0.5 * (1 + 0.5) / 2 + 0.5 * (0.5 + 1/6) / 2.
    assert metaeval.curve_area(curve) == pytest.approx(0.375 + 1 / 6)
    with pytest.raises(ValueError, match="mean score of the original captions is 0"):
        metaeval.robustness_curve([0.0, 0.0], {0.5: [1.0]})
    with pytest.raises(ValueError, match="gamma must be a fraction"):
        metaeval.robustness_curve([1.0], {50: [1.0]})
    with pytest.raises(ValueError, match="two distinct gammas"):
        metaeval.curve_area({0.0: 1.0})


CAPTIONS = [
    "A man rides a brown horse on the beach",
    "Two dogs play together in the white snow",
    "A red bus drives down a busy city street",
    "A plate of rice with broccoli and chicken",
]
REFERENCES = [
    ["a man riding a horse on a beach", "a person on a horse near the sea"],
    ["two dogs playing in the snow", "dogs run through snow"],
    ["a red bus on a city street", "a double decker bus in traffic"],
    ["a plate with rice and broccoli", "chicken and broccoli on a plate"],
]


def test_robustness_word_permutation_against_a_hand_loop():
    # The same draws by hand: one stream, gammas in increasing order, captions in order.
    from rouge_score.rouge_scorer import RougeScorer

    from rubrics import transformations

    name = "ROUGE-L (rouge-score)"
    got = metaeval.robustness(
        CAPTIONS, REFERENCES, transformation="T_WP", gammas=(1.0, 0.5), names=[name], seed=3
    )[name]
    rng = np.random.default_rng(3)
    scorer = RougeScorer(["rougeL"])

    def mean_score(captions):
        pairs = zip(captions, REFERENCES, strict=True)
        return np.mean([scorer.score_multi(r, c)["rougeL"].fmeasure for c, r in pairs])

    base = mean_score(CAPTIONS)
    expected = {0.0: 1.0}
    for g in (0.5, 1.0):
        expected[g] = (
            mean_score([transformations.permute_words(c, g, rng) for c in CAPTIONS]) / base
        )
    assert got["curve"] == pytest.approx(expected, abs=1e-12)
    assert got["curve"][1.0] < 1.0
    assert got["area"] == pytest.approx(
        0.5 * (1 + expected[0.5]) / 2 + 0.5 * (expected[0.5] + expected[1.0]) / 2, abs=1e-12
    )


def test_robustness_random_caption_and_replacement():
    name = "ROUGE-L (rouge-score)"
    rc = metaeval.robustness(
        CAPTIONS,
        REFERENCES,
        transformation="T_RC",
        gammas=(0.5, 1.0),
        names=[name],
        images=[1, 2, 3, 4],
    )[name]["curve"]
    # gamma 1: every caption is another image's caption; their ROUGE-L against this
    # image's references is far lower.
    assert rc[0.0] == 1.0 and rc[1.0] < rc[0.5] < 1.0
    rw = metaeval.robustness(
        CAPTIONS, REFERENCES, transformation="T_RW", gammas=(1.0,), names=[name]
    )[name]["curve"]
    assert rw[1.0] < 0.5
    with pytest.raises(ValueError, match="T_RC needs images"):
        metaeval.robustness(CAPTIONS, REFERENCES, transformation="T_RC", names=[name])
    with pytest.raises(ValueError, match="transformation must be one of"):
        metaeval.robustness(CAPTIONS, REFERENCES, transformation="T_XX", names=[name])


def test_robustness_keeps_an_unpermutable_caption_and_names_an_unscorable_metric():
    name = "ROUGE-L (rouge-score)"
    # "Dogs dogs" has no two different words to permute: it stays, the others move.
    captions = ["dogs dogs", *CAPTIONS[1:]]
    kept = metaeval.robustness(
        captions, REFERENCES, transformation="T_WP", gammas=(1.0,), names=[name], seed=1
    )[name]["curve"]
    assert 0 < kept[1.0] < 1.0
    # Captions sharing no word with their references score 0: no curve, not a crash.
    zero = metaeval.robustness(
        ["zzz qqq", "xxx yyy"],
        [["a cat"], ["a dog"]],
        transformation="T_WP",
        gammas=(1.0,),
        names=[name],
    )
    assert zero == {name: None}
