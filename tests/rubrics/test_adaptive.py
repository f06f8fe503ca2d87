"""rubrics.adaptive: the VICR stopping rule and HUMANr allocation (issue 15).

Expected values are worked by hand (in the comments) or computed by an independent brute
force over every completion of a pair with ``rubrics.vicr.consensus``; the bounded target
checks replay the real data of ../shared (skipped without it) and seeded crowds.
"""

from __future__ import annotations

import csv
import json
import math
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rubrics import adaptive, humanr, vicr
from rubrics.adaptive import RaterModel


def _model(exact: float, adjacent: float) -> RaterModel:
    return RaterModel.symmetric(5, exact=exact, adjacent=adjacent)


# --------------------------------------------------------------------------------------
# The rater model
# --------------------------------------------------------------------------------------


def test_symmetric_model_rows_worked_by_hand():
    model = _model(0.6, 0.3)
    # Middle level: 0.6 on itself, 0.15 on each neighbour, the other 0.1 split over the
    # two levels 2 away.
    assert model.noise[2] == pytest.approx([0.05, 0.15, 0.6, 0.15, 0.05])
    # Level 1: one neighbour only (0.15) and three far levels (0.1 / 3 each): the row sums
    # to 0.85 and is renormalised.
    assert model.noise[0] == pytest.approx(np.array([0.6, 0.15, 0.1 / 3, 0.1 / 3, 0.1 / 3]) / 0.85)
    assert model.prior == pytest.approx([0.2] * 5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prior": [0.5, 0.5], "noise": [[1.0, 0.0]]}, "one row per class"),
        ({"prior": [0.5, 0.6], "noise": [[1.0, 0.0], [0.0, 1.0]]}, "sum to 1"),
        ({"prior": [1.5, -0.5], "noise": [[1.0, 0.0], [0.0, 1.0]]}, ">= 0"),
        ({"prior": [0.5, 0.5], "noise": [[np.nan, 1.0], [0.0, 1.0]]}, "NaN"),
    ],
)
def test_model_refuses_bad_probabilities(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RaterModel(**kwargs)


def test_fit_recovers_a_known_model():
    truth = _model(0.7, 0.2)
    ratings = truth.simulate(20_000, 4, seed=3)
    fitted = adaptive.fit_rater_model(ratings, levels=5, split_ambiguous=False)
    assert fitted.prior == pytest.approx(truth.prior, abs=0.03)
    assert fitted.noise == pytest.approx(truth.noise, abs=0.03)


def test_simulate_draws_the_noise_rows():
    # A model whose class 1 always rates 2 and class 2 always rates 1, equally often.
    model = RaterModel(prior=[0.5, 0.5], noise=[[0.0, 1.0], [1.0, 0.0]])
    drawn = model.simulate(2_000, 3, seed=0)
    assert set(np.unique(drawn)) == {1, 2}
    assert np.all(drawn == drawn[:, :1])  # every rating of a pair from its class's row
    assert abs((drawn[:, 0] == 1).mean() - 0.5) < 0.05


# --------------------------------------------------------------------------------------
# VICR: change probability and the rule
# --------------------------------------------------------------------------------------


def _brute_change(ratings, max_ratings, prior, noise):
    """Independent: posterior by explicit products, every completion enumerated."""
    levels = len(noise[0])
    weights = []
    for t in range(len(prior)):
        w = prior[t]
        for r in ratings:
            w *= noise[t][r - 1]
        weights.append(w)
    total = sum(weights)
    now = vicr.consensus(ratings)
    change = 0.0
    for rest in product(range(1, levels + 1), repeat=max_ratings - len(ratings)):
        if vicr.consensus(list(ratings) + list(rest)) == now:
            continue
        for t in range(len(prior)):
            p = weights[t] / total
            for r in rest:
                p *= noise[t][r - 1]
            change += p
    return change


def test_five_five_stops_worked_by_hand():
    # exact 0.8, adjacent 0.2: level 5's row is (0, 0, 0, 0.1, 0.8) / 0.9 and level 4's
    # (0, 0, 0.1, 0.8, 0.1). After [5, 5] a third rating keeps the consensus 5 unless it
    # is 3 or lower ((10 + 3) / 3 = 4.33 -> 4), which only level 4 can give (0.1).
    # Posterior of level 4: 0.1^2 / (0.1^2 + (8/9)^2).
    model = _model(0.8, 0.2)
    p4 = 0.01 / (0.01 + (8 / 9) ** 2)
    assert adaptive.vicr_change_probability([5, 5], max_ratings=3, model=model) == pytest.approx(
        p4 * 0.1
    )
    assert not adaptive.vicr_needs_more([5, 5], min_ratings=2, max_ratings=3, model=model)


def test_one_five_continues_worked_by_hand():
    # [1, 5] has consensus 3; a third rating keeps it only when it is 2, 3 or 4. Under
    # exact 0.6 / adjacent 0.3 the likelihoods noise[t][1] * noise[t][5] are
    # 0.0277, 0.0075, 0.0025, 0.0075, 0.0277 and P(2..4 | t) 0.255, 0.8, 0.9, 0.8, 0.255:
    # P(stay) = 0.0284 / 0.0729 = 0.389, so the consensus moves with probability 0.61.
    model = _model(0.6, 0.3)
    change = adaptive.vicr_change_probability([1, 5], max_ratings=3, model=model)
    assert change == pytest.approx(0.611, abs=0.001)
    assert adaptive.vicr_needs_more([1, 5], min_ratings=2, max_ratings=3, model=model)


@pytest.mark.parametrize(
    ("ratings", "max_ratings"),
    [([5, 5], 4), ([4, 5], 5), ([3], 4), ([1, 2, 2], 6), ([2, 4, 4, 3], 7), ([5, 1, 5], 5)],
)
def test_change_probability_equals_brute_force(ratings, max_ratings):
    rng = np.random.default_rng(len(ratings) * 10 + max_ratings)
    noise = rng.dirichlet(np.ones(5), size=10)  # 10 classes, as the fitted model has
    prior = rng.dirichlet(np.ones(10))
    model = RaterModel(prior=prior, noise=noise)
    expected = _brute_change(ratings, max_ratings, prior.tolist(), noise.tolist())
    got = adaptive.vicr_change_probability(ratings, max_ratings=max_ratings, model=model)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_rule_bounds():
    model = _model(0.6, 0.3)
    # Below the minimum: always more, even when unanimous.
    assert adaptive.vicr_needs_more([5], min_ratings=2, max_ratings=7, model=model)
    # At the maximum: never more, even when split.
    assert not adaptive.vicr_needs_more([1, 5, 3], min_ratings=2, max_ratings=3, model=model)
    assert adaptive.vicr_change_probability([1, 5, 3], max_ratings=3, model=model) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: adaptive.vicr_needs_more([5], min_ratings=3, max_ratings=2, model=m), "exceed"),
        (lambda m: adaptive.vicr_needs_more([6], min_ratings=1, max_ratings=2, model=m), "1 to 5"),
        (
            lambda m: adaptive.vicr_needs_more([5], min_ratings=1, max_ratings=2, model=m, risk=1),
            "risk",
        ),
        (lambda m: adaptive.vicr_change_probability([], max_ratings=2, model=m), "no consensus"),
        (
            lambda m: adaptive.vicr_needs_more([5], min_ratings=1, max_ratings=1001, model=m),
            "max_ratings",
        ),
    ],
)
def test_rule_refuses_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call(_model(0.6, 0.3))


def test_impossible_ratings_are_an_error_not_nan():
    # exact 1: a rater always gives the true level, so [1, 5] cannot happen.
    model = _model(1.0, 0.0)
    with pytest.raises(ValueError, match="impossible"):
        adaptive.vicr_change_probability([1, 5], max_ratings=3, model=model)


def test_replay_worked_by_hand():
    # exact 0.8 / adjacent 0.2, min 2, each pair's maximum = its 3 ratings:
    # [5, 5, 4]: stops at [5, 5] (change 0.0012, see above); consensus 5 = full 5 (14/3).
    # [4, 5, 4]: [4, 5] has consensus 5 (4.5 rounds up) and keeps it only if the third is
    #   5: P(stay) = ((1/9)(8/9)(8/9) + 0.08 * 0.1) / ((1/9)(8/9) + 0.08) = 0.536, go on;
    #   3 ratings: consensus 4 (13/3).
    # [3, 3, 3]: after [3, 3] (likelihoods 0.01, 0.64, 0.01 for levels 2, 3, 4) the
    #   consensus moves only if the third is 1 (7/3 -> 2, from level 2 with 0.1) or 5
    #   (11/3 -> 4, from level 4 with 0.1): change (0.001 + 0.001) / 0.66 = 0.003, stop.
    model = _model(0.8, 0.2)
    replay = adaptive.vicr_replay(
        [[5, 5, 4], [4, 5, 4], [3, 3, 3]], min_ratings=2, model=model, risk=0.05
    )
    assert replay.used.tolist() == [2, 3, 2]
    assert replay.available.tolist() == [3, 3, 3]
    assert replay.consensus.tolist() == [5, 4, 3]
    assert replay.full_consensus.tolist() == [5, 4, 3]
    assert replay.saving == pytest.approx(2 / 9)
    assert replay.agreement == 1.0


def test_replay_all_orders_is_the_mean_over_arrangements():
    # [5, 5, 1] arrives as 551, 515 or 155, each with probability 1/3 when raters come in
    # a uniformly random order: the expectation is the mean of the three replays.
    model = _model(0.6, 0.3)
    pair = [5, 5, 1]
    arrangements = [[5, 5, 1], [5, 1, 5], [1, 5, 5]]
    one_by_one = [
        adaptive.vicr_replay([a], min_ratings=2, model=model, risk=0.2) for a in arrangements
    ]
    expected_used = np.mean([r.ratings_used for r in one_by_one])
    expected_agree = np.mean([r.agreement for r in one_by_one])
    got = adaptive.vicr_replay_all_orders([pair], min_ratings=2, model=model, risk=0.2)
    assert got.ratings_used == pytest.approx(expected_used)
    assert got.agreement == pytest.approx(expected_agree)
    assert got.ratings_fixed == 3


def test_calibrated_risk_meets_the_agreement_on_its_own_model():
    model = _model(0.7, 0.25)
    calibration = adaptive.vicr_calibrate_risk(
        model, [5] * 10, min_ratings=2, agreement=0.95, n_pairs=2000, seed=1
    )
    assert calibration.risk is not None
    # The chosen risk reaches the target in the simulation and the next larger does not.
    assert calibration.agreement[calibration.risk] >= 0.95
    larger = [r for r in calibration.agreement if r > calibration.risk]
    assert all(calibration.agreement[r] < 0.95 for r in larger)
    # And it holds on fresh pairs from the same model.
    fresh = model.simulate(2000, 5, seed=99)
    replay = adaptive.vicr_replay(fresh, min_ratings=2, model=model, risk=calibration.risk)
    assert replay.agreement >= 0.94


# --------------------------------------------------------------------------------------
# VICR: bounded target checks on the real data (the bench's replay, fewer settings)
# --------------------------------------------------------------------------------------


def _vicr_sample(datasets: Path) -> list[list[int]]:
    path = datasets / "vicr-sample" / "VICR_Sample250.csv"
    columns = ["ratings"] + [f"rating_{i}" for i in range(2, 8)]
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return [[int(row[c]) for c in columns if row[c].strip()] for row in csv.DictReader(handle)]


def _flickr8k(datasets: Path) -> list[list[int]]:
    data = json.loads((datasets / "flickr8k-expert" / "flickr8k_expert.json").read_text("utf-8"))
    out = []
    for entry in data.values():
        judgements = entry["human_judgement"]
        for start in range(0, len(judgements), 3):
            out.append([int(j["rating"]) for j in judgements[start : start + 3]])
    return out


def _cross_fitted(ratings, levels, min_ratings, risk):
    """Fit the model on one half of the pairs, replay the other half, and swap."""
    order = np.random.default_rng(0).permutation(len(ratings))
    halves = [order[::2], order[1::2]]
    used = fixed = agree = 0.0
    for h in (0, 1):
        model = adaptive.fit_rater_model([ratings[i] for i in halves[1 - h]], levels=levels)
        replay = adaptive.vicr_replay_all_orders(
            [ratings[i] for i in halves[h]], min_ratings=min_ratings, model=model, risk=risk
        )
        used += replay.ratings_used
        fixed += replay.ratings_fixed
        agree += replay.agreement * replay.pairs
    return 1 - used / fixed, agree / len(ratings)


def test_vicr_sample_targets(shared_datasets):
    ratings = _vicr_sample(shared_datasets)
    assert len(ratings) == 249
    saving, agreement = _cross_fitted(ratings, 5, min_ratings=2, risk=0.15)
    assert saving >= 0.30
    assert agreement >= 0.95
    # The conservative default risk keeps nearly every consensus and still saves ratings.
    saving, agreement = _cross_fitted(ratings, 5, min_ratings=2, risk=0.05)
    assert saving > 0.10
    assert agreement >= 0.98


def test_flickr8k_expert_targets(shared_datasets):
    ratings = _flickr8k(shared_datasets)[::4]  # bounded: every 4th caption (1,416)
    saving, agreement = _cross_fitted(ratings, 4, min_ratings=1, risk=0.10)
    assert saving >= 0.30
    assert agreement >= 0.94
    # With min 2 of 3 ratings the rule can save at most a third; it stops where the first
    # two agree, and keeps nearly every consensus.
    saving, agreement = _cross_fitted(ratings, 4, min_ratings=2, risk=0.10)
    assert 0.15 < saving <= 1 / 3
    assert agreement >= 0.99


# --------------------------------------------------------------------------------------
# HUMANr
# --------------------------------------------------------------------------------------


def test_half_width_matches_scipy_and_the_report():
    rng = np.random.default_rng(4)
    raw = rng.integers(3, 8, size=40)  # values well inside [-1, 1]: the report clips nothing
    values = (raw - 5) / 4
    low, high = stats.t.interval(0.95, values.size - 1, loc=values.mean(), scale=stats.sem(values))
    assert adaptive.humanr_half_width(values, confidence=0.95) == pytest.approx((high - low) / 2)
    responses = humanr.Responses(
        worker_ids=np.arange(40) % 4,
        image_ids=np.arange(40),
        systems=["A"] * 40,
        raw=raw,
        human_on_left=np.ones(40, dtype=bool),
        is_attention_check=np.zeros(40, dtype=bool),
        group_ids=np.arange(40) // 9,
    )
    report = humanr.report(responses, n_bootstrap=10, n_splits=2, image_counts=[], seed=0)
    r_low, r_high = report["systems"]["A"]["t_interval"]
    assert adaptive.humanr_half_width(values) == pytest.approx((r_high - r_low) / 2)
    assert math.isinf(adaptive.humanr_half_width([0.5]))


def test_next_systems_worked_by_hand():
    # A: 40 values alternating +-0.5: sd = sqrt(40 * 0.25 / 39) = 0.5064, half-width
    #    t(0.975, 39) * 0.5064 / sqrt(40) = 2.0227 * 0.0801 = 0.162 > 0.1: needs more.
    # B: 40 values alternating 0.25 and 0: half-width 0.0405 <= 0.1: stops.
    # C: 10 values all 0: half-width 0, but fewer than min_values (27): needs more.
    values = {
        "A": [0.5, -0.5] * 20,
        "B": [0.25, 0.0] * 20,
        "C": [0.0] * 10,
    }
    assert adaptive.humanr_half_width(values["A"]) == pytest.approx(0.16194, abs=1e-4)
    assert adaptive.humanr_next_systems(values, target_half_width=0.1) == ["A", "C"]
    assert adaptive.humanr_next_systems(values, target_half_width=0.1, min_values=10) == ["A"]
    assert adaptive.humanr_next_systems(values, target_half_width=0.2, min_values=10) == []
    # No value yet: an infinite width, listed first.
    assert adaptive.humanr_next_systems({**values, "D": []}, target_half_width=0.1)[0] == "D"


@pytest.mark.parametrize(
    ("values", "kwargs", "message"),
    [
        ({"A": [0.0, 2.0]}, {"target_half_width": 0.1}, r"\[-1, 1\]"),
        ({"A": [0.0, np.nan]}, {"target_half_width": 0.1}, "NaN"),
        ({"A": [0.0]}, {"target_half_width": 0.0}, "target_half_width"),
        ({"A": [0.0]}, {"target_half_width": 0.1, "confidence": 95}, "confidence"),
    ],
)
def test_next_systems_refuses_bad_input(values, kwargs, message):
    with pytest.raises(ValueError, match=message):
        adaptive.humanr_next_systems(values, **kwargs)
