"""rubrics.rasch: hand-worked cases, the textbook JMLE result, recovery and misfit detection.

The hand-worked cases are small enough to solve on paper; the comments give the working.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rubrics import rasch


@pytest.fixture(autouse=True)
def isolated_files() -> None:
    """No-op override of tests/conftest.py's Django media fixture: these tests are pure numpy."""


def logistic(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value))


def simulate(rng, theta, delta, tau, persons, items):
    """Responses drawn from the model with the given parameters."""
    p = rasch.category_probabilities(theta[persons] - delta[items], tau)
    u = rng.random(persons.size)[:, None]
    return (u > np.cumsum(p, axis=1)).sum(axis=1)


def values(masked):
    """A masked result as a plain array, after checking that nothing is masked."""
    assert not np.ma.getmaskarray(masked).any()
    return np.ma.getdata(masked)


def complete(n_persons, n_items):
    persons, items = np.meshgrid(np.arange(n_persons), np.arange(n_items), indexing="ij")
    return persons.ravel(), items.ravel()


# ---------------------------------------------------------------------------- the model


def test_category_probabilities_follow_the_formula_by_hand():
    # theta - delta = 1, tau = (-1, 1): exponents 0, 1 - (-1) = 2, 2 + (1 - 1) = 2,
    # so P = (1, e^2, e^2) / (1 + 2 e^2)
    p = rasch.category_probabilities([1.0], [-1.0, 1.0])[0]
    denominator = 1 + 2 * math.e**2
    assert p == pytest.approx([1 / denominator, math.e**2 / denominator, math.e**2 / denominator])
    # a dichotomy with tau = 0 is the Rasch model's logistic curve
    assert rasch.category_probabilities([0.7], [0.0])[0, 1] == pytest.approx(logistic(0.7))
    # far out of range: no overflow, no NaN
    extreme = rasch.category_probabilities([800.0, -800.0], [-1.0, 1.0])
    np.testing.assert_allclose(extreme, [[0, 0, 1], [1, 0, 0]], atol=1e-12)


def test_thurstonian_thresholds_are_where_half_reach_the_category():
    tau = [-1.0, 1.0]
    offsets = rasch.thurstonian_thresholds(tau)
    for k, offset in enumerate(offsets, start=1):
        p = rasch.category_probabilities([offset], tau)[0]
        assert p[k:].sum() == pytest.approx(0.5)
    # a dichotomy: the threshold itself
    assert rasch.thurstonian_thresholds([0.0]) == pytest.approx([0.0])
    # disordered Andrich thresholds still give ordered Thurstonian ones
    disordered = rasch.thurstonian_thresholds([1.0, -1.0])
    assert disordered[0] < disordered[1]


# ---------------------------------------------------------------------------- hand-worked fits


def test_two_items_jmle_doubles_the_log_odds_ratio_with_hand_checked_se_and_fit():
    # Dichotomous Rasch, 2 items. 10 persons answer (1, 0), 5 answer (0, 1), 3 answer (1, 1)
    # and 2 answer (0, 0). The last two groups are extreme. For the 15 others, a person with
    # score 1 has theta = (d1 + d2) / 2; item 1's equation 10 = 15 * logistic((d2 - d1) / 2)
    # gives d2 - d1 = 2 ln(10 / 5): twice the conditional ML estimate ln(10 / 5), the
    # textbook JMLE result (Andersen 1973). Centred: d1 = -ln 2, d2 = ln 2; persons at 0.
    rows = [(1, 0)] * 10 + [(0, 1)] * 5 + [(1, 1)] * 3 + [(0, 0)] * 2
    persons, items, scores = [], [], []
    for person, row in enumerate(rows):
        for item, score in enumerate(row):
            persons.append(person)
            items.append(item)
            scores.append(score)
    result = rasch.fit(persons, items, scores, max_score=1, tolerance=1e-10)
    assert result.converged
    assert values(result.items.measure) == pytest.approx([-math.log(2), math.log(2)], abs=1e-8)
    core = result.persons.extreme == 0
    assert list(result.persons.extreme) == [0] * 15 + [1] * 3 + [-1] * 2
    assert values(result.persons.measure[core]) == pytest.approx(np.zeros(15), abs=1e-8)
    # P = logistic(ln 2) = 2/3 on item 1, 1/3 on item 2; variance 2/9 each.
    # Person SE = 1 / sqrt(2 * 2/9) = 1.5; item SE = 1 / sqrt(15 * 2/9) = sqrt(0.3).
    assert values(result.persons.se[core]) == pytest.approx(np.full(15, 1.5))
    assert values(result.items.se) == pytest.approx([math.sqrt(0.3)] * 2)
    # (1, 0): residuals 1/3 and -1/3, each z^2 = (1/9) / (2/9) = 1/2 -> infit = outfit = 0.5.
    # (0, 1): residuals -2/3 and 2/3, each z^2 = (4/9) / (2/9) = 2 -> infit = outfit = 2.
    assert values(result.persons.outfit[:10]) == pytest.approx(np.full(10, 0.5))
    assert values(result.persons.infit[:10]) == pytest.approx(np.full(10, 0.5))
    assert values(result.persons.outfit[10:15]) == pytest.approx(np.full(5, 2.0))
    assert values(result.persons.infit[10:15]) == pytest.approx(np.full(5, 2.0))
    # Item 1: ten residuals 1/3 and five -2/3: sum y^2 = 10/9 + 20/9 = 30/9 over sum W =
    # 15 * 2/9 = 30/9, so infit 1; outfit = (10 * 1/2 + 5 * 2) / 15 = 1.
    assert values(result.items.infit) == pytest.approx([1.0, 1.0])
    assert values(result.items.outfit) == pytest.approx([1.0, 1.0])
    # Extreme persons have no fit, and a measure at the score moved 0.3 inside the range:
    # logistic(t + ln 2) + logistic(t - ln 2) = 2 - 0.3 (and = 0.3 for (0, 0)).
    assert result.persons.infit.mask[15:].all() and result.persons.outfit.mask[15:].all()
    top, bottom = result.persons.measure[15], result.persons.measure[18]
    assert logistic(top + math.log(2)) + logistic(top - math.log(2)) == pytest.approx(1.7)
    assert logistic(bottom + math.log(2)) + logistic(bottom - math.log(2)) == pytest.approx(0.3)
    assert bottom == pytest.approx(-top)
    assert list(result.persons.responses) == [2] * 20


def test_a_balanced_latin_square_gives_thresholds_from_the_category_counts():
    # 4 persons x 4 items, each row and each column holds the scores 0, 1, 1, 2 (cyclic
    # shifts). By symmetry every theta and delta is 0; with theta - delta = 0 the model's
    # P is proportional to (1, e^-tau1, e^-tau1-tau2), which must equal the shares
    # (1/4, 1/2, 1/4): tau1 = -ln 2 and tau2 = ln 2 (they sum to 0).
    # Fit: E = 1 and W = 1/2 for each response; z^2 = 2, 0, 0, 2 in every row: outfit 1,
    # infit (1 + 0 + 0 + 1) / (4 * 1/2) = 1. SE = 1 / sqrt(4 * 1/2).
    base = [0, 1, 1, 2]
    persons, items = complete(4, 4)
    scores = [base[(item - person) % 4] for person, item in zip(persons, items, strict=True)]
    result = rasch.fit(persons, items, scores, max_score=2, tolerance=1e-10)
    assert result.thresholds == pytest.approx([-math.log(2), math.log(2)], abs=1e-8)
    assert values(result.persons.measure) == pytest.approx(np.zeros(4), abs=1e-8)
    assert values(result.items.measure) == pytest.approx(np.zeros(4), abs=1e-8)
    assert values(result.persons.outfit) == pytest.approx(np.ones(4))
    assert values(result.persons.infit) == pytest.approx(np.ones(4))
    assert values(result.persons.se) == pytest.approx(np.full(4, 1 / math.sqrt(2)))
    assert result.subsets == 1 and result.max_score == 2


def test_ids_may_be_any_comparable_values_and_come_back_sorted():
    base = [0, 1, 1, 2]
    persons, items = complete(4, 4)
    scores = [base[(item - person) % 4] for person, item in zip(persons, items, strict=True)]
    names = np.array(["d", "c", "b", "a"])[persons]
    result = rasch.fit(names, items * 10 + 7, scores, max_score=2)
    assert list(result.persons.ids) == ["a", "b", "c", "d"]
    assert list(result.items.ids) == [7, 17, 27, 37]


def test_disconnected_data_is_reported_as_two_subsets():
    # players 0-1 on items 0-1, players 2-3 on items 2-3: nothing links the two blocks
    block = [[0, 1], [1, 2]]  # rows: players, columns: items; nobody extreme
    persons, items, scores = [], [], []
    for offset in (0, 2):
        for player, row in enumerate(block):
            for item, score in enumerate(row):
                persons.append(offset + player)
                items.append(offset + item)
                scores.append(score)
    assert rasch.fit(persons, items, scores, max_score=2).subsets == 2


def test_an_element_extreme_once_another_is_set_aside_is_set_aside_too():
    # Player 0 answers 0 everywhere: extreme. Without them, item 0 holds only player 1's 1,
    # so item 0 is extreme too (at the top) and is measured alone against the fitted
    # players; items 1 and 2 are fitted on players 1-4's mixed answers.
    answers = {0: {0: 0, 1: 0}, 1: {0: 1, 1: 1, 2: 0}, 2: {1: 0, 2: 1}, 3: {1: 1, 2: 0}}
    answers[4] = {1: 0, 2: 1}
    persons, items, scores = [], [], []
    for person, row in answers.items():
        for item, score in row.items():
            persons.append(person)
            items.append(item)
            scores.append(score)
    result = rasch.fit(persons, items, scores, max_score=1)
    assert list(result.persons.extreme) == [-1, 0, 0, 0, 0]
    assert list(result.items.extreme) == [1, 0, 0]
    assert list(result.items.responses) == [2, 5, 4]
    assert result.items.infit.mask.tolist() == [True, False, False]
    assert not result.items.measure.mask.any()  # every item has a measure
    assert result.items.measure[0] < result.items.measure[1:].min()  # always agreed: easiest


# ---------------------------------------------------------------------------- recovery


def test_known_parameters_are_recovered_from_simulated_data():
    rng = np.random.default_rng(20260513)
    n_persons, n_items = 150, 60
    theta = rng.normal(0.0, 1.0, n_persons)
    delta = rng.uniform(-2.0, 2.0, n_items)
    tau = np.array([-1.0, 1.0])
    persons, items = complete(n_persons, n_items)
    scores = simulate(rng, theta, delta, tau, persons, items)
    result = rasch.fit(persons, items, scores, max_score=2)
    assert result.converged
    measured = ~result.persons.measure.mask
    assert measured.all()
    assert np.corrcoef(result.persons.measure, theta)[0, 1] >= 0.95
    assert np.corrcoef(result.items.measure, delta)[0, 1] >= 0.95
    assert result.thresholds == pytest.approx(tau, abs=0.15)
    # model-conforming data: mean-squares near 1, and none flagged for these players
    assert result.persons.infit.mean() == pytest.approx(1.0, abs=0.05)
    assert result.persons.outfit.mean() == pytest.approx(1.0, abs=0.1)
    assert result.items.infit.mean() == pytest.approx(1.0, abs=0.05)
    assert np.ma.median(result.persons.outfit) == pytest.approx(1.0, abs=0.1)
    assert result.persons.infit.max() < rasch.MISFIT_HIGH
    assert result.persons.infit.min() > rasch.MISFIT_LOW


def test_player_measures_are_recovered_in_a_sparse_game_design():
    # A VICR-like design: 3 to 7 players per pair. Pairs' own measures rest on a handful of
    # responses (and many are extreme), so only the players' are held to 0.95 here.
    rng = np.random.default_rng(7)
    n_persons, n_items = 60, 1500
    theta = rng.normal(0.5, 1.0, n_persons)
    delta = rng.normal(0.0, 1.0, n_items)
    tau = np.array([-1.0, 1.0])
    counts = rng.integers(3, 8, n_items)
    items = np.repeat(np.arange(n_items), counts)
    persons = np.concatenate([rng.choice(n_persons, k, replace=False) for k in counts])
    scores = simulate(rng, theta, delta, tau, persons, items)
    result = rasch.fit(persons, items, scores, max_score=2)
    assert result.converged and result.subsets == 1
    assert np.corrcoef(result.persons.measure, theta)[0, 1] >= 0.95
    assert (result.items.extreme != 0).any()  # and they still get a measure
    assert not result.items.measure.mask.any()


def test_a_planted_random_responder_misfits():
    # With tau = (-1.5, 1.5) the model's variance of one response is largest where
    # theta = delta: P = (1, e^1.5, 1) / (2 + e^1.5), W = 2 / (2 + e^1.5) = 0.31. Uniform
    # random answers (0, 1, 2 equally likely) have E(y^2) >= their own variance 2/3
    # whatever the model expects, so their expected mean-square is at least
    # (2/3) / 0.31 = 2.2 for every response at the true parameters: well above 1.5.
    # Conforming players scatter around 1 (with these wide thresholds an answer carries
    # little variance, so an odd one weighs a lot): one in a hundred may pass 1.5 by chance,
    # and the random responder must still stand out above all of them.
    rng = np.random.default_rng(3)
    n_persons, n_items = 120, 50
    theta = rng.normal(0.0, 1.0, n_persons)
    delta = rng.uniform(-2.0, 2.0, n_items)
    tau = np.array([-1.5, 1.5])
    persons, items = complete(n_persons, n_items)
    scores = simulate(rng, theta, delta, tau, persons, items)
    random_responder = 17
    planted = persons == random_responder
    scores[planted] = rng.integers(0, 3, planted.sum())
    result = rasch.fit(persons, items, scores, max_score=2)
    assert 2 / (2 + math.exp(1.5)) == pytest.approx(0.309, abs=1e-3)
    assert result.persons.infit[random_responder] > rasch.MISFIT_HIGH
    assert result.persons.outfit[random_responder] > rasch.MISFIT_HIGH
    others = np.delete(np.arange(n_persons), random_responder)
    for statistic in (result.persons.infit, result.persons.outfit):
        assert statistic[random_responder] > statistic[others].max()
        assert np.count_nonzero(statistic[others] > rasch.MISFIT_HIGH) <= 0.02 * others.size
        assert np.ma.median(statistic[others]) == pytest.approx(1.0, abs=0.1)


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([0, 1], [0, 1], [0, 3]), {"max_score": 2}, "scores must be integers from 0 to 2"),
        (([0, 1], [0, 1], [0.0, 1.0]), {"max_score": 2}, "scores must be integers"),
        (([0, 1], [0, 1], [True, False]), {"max_score": 1}, "scores must be integers"),
        (([0, 1], [0], [0, 1]), {"max_score": 1}, "differ in length"),
        (([0, 1], [0, 1], [0, 1]), {"max_score": 0}, "max_score"),
        (([0, 1], [0, 1], [0, 1]), {"max_score": 1, "tolerance": 0}, "tolerance"),
        (([0, 1], [0, 1], [0, 1]), {"max_score": 1, "max_iterations": 0}, "max_iterations"),
        (([0, 0], [0, 1], [2, 2]), {"max_score": 2}, "nothing to fit"),
    ],
)
def test_bad_input_is_refused_with_a_reason(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rasch.fit(*args, **kwargs)


def test_a_category_nobody_used_is_refused_by_name():
    # scores 1 and 2 only: the threshold between 0 and 1 would be minus infinity
    base = [1, 2, 2, 1]
    persons, items = complete(4, 4)
    scores = [base[(item - person) % 4] for person, item in zip(persons, items, strict=True)]
    with pytest.raises(ValueError, match="score category 0 is never used"):
        rasch.fit(persons, items, scores, max_score=2)


def test_an_iteration_cap_is_reported_not_hidden():
    rng = np.random.default_rng(5)
    persons, items = complete(40, 20)
    scores = simulate(rng, rng.normal(0, 1, 40), rng.normal(0, 1, 20), [-1.0, 1.0], persons, items)
    capped = rasch.fit(persons, items, scores, max_score=2, max_iterations=2)
    assert capped.iterations == 2 and not capped.converged
