"""Tests of rubrics.vicr: VICR scale, Algorithm 1, phases and virtual raters (PROTOCOLS.md 2).

Expected values are worked by hand (arithmetic in the comments) or come from independent
libraries (scipy, statsmodels) through the slow reference ``_slow_virtual_rater_values``.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from rubrics import vicr
from rubrics.vicr import (
    SCALE,
    Phase,
    PhaseRules,
    PlayerState,
    agreement_with_consensus,
    consensus,
    consensus_pool,
    draw_virtual_raters,
    first_game_outcome,
    next_state,
    player_score,
    points_for_distance,
    probation_outcome,
    rating_distribution,
    score_rating,
    tutorial_outcome,
    tutorial_points,
    virtual_rater_statistics,
    virtual_rater_values,
    virtual_raters,
)

BAD_RATINGS = [0, 6, -1, 2.5, 3.0, True, False, "3", None, np.float64(3.0), np.bool_(True)]


@pytest.fixture(autouse=True)
def isolated_files() -> None:
    """No-op override of tests/conftest.py's Django media fixture: these tests are pure numpy.

    Lets this file run with ``-p no:django`` (the parent fixture needs pytest-django).
    """


# --------------------------------------------------------------------------------------
# The slow, straightforward reference: scipy / statsmodels once per repetition.
# --------------------------------------------------------------------------------------


def _slow_kendall_w(matrix: np.ndarray) -> float:
    """Kendall's W with tie correction; matrix is items x raters (Kendall & Babington Smith)."""
    n, m = matrix.shape
    ranks = np.column_stack([scipy.stats.rankdata(matrix[:, j]) for j in range(m)])
    s = ((ranks.sum(axis=1) - m * (n + 1) / 2) ** 2).sum()
    ties = 0.0
    for j in range(m):
        _, t = np.unique(matrix[:, j], return_counts=True)
        ties += float((t**3 - t).sum())
    return 12 * s / (m**2 * (n**3 - n) - m * ties)


def _slow_one_repetition(triples: np.ndarray, collapse_top: bool) -> list[float]:
    """The five statistics (x100) of one draw (pairs x 3, sorted) the straightforward way."""
    x, y, z = triples[:, 0], triples[:, 1], triples[:, 2]
    row = []
    for candidate, (ref_a, ref_b) in ((x, (y, z)), (y, (x, z)), (z, (x, y))):
        # method A: candidate repeated once per reference rater, references concatenated
        result = scipy.stats.kendalltau(
            np.concatenate([candidate, candidate]), np.concatenate([ref_a, ref_b]), variant="c"
        )
        row.append(result.statistic * 100)
    row.append(_slow_kendall_w(triples.astype(float)) * 100)
    categories = np.minimum(triples, 4) if collapse_top else triples
    table, _ = aggregate_raters(categories)
    row.append(sm_fleiss_kappa(table, method="fleiss") * 100)
    return row


def _slow_virtual_rater_values(draws: np.ndarray, collapse_top: bool = False) -> np.ndarray:
    """Per-repetition statistics from scipy.stats.kendalltau and statsmodels fleiss_kappa."""
    return np.array([_slow_one_repetition(draw, collapse_top) for draw in draws])


def _random_ratings(rng: np.random.Generator, pairs: int, low: int = 3, high: int = 7) -> list:
    """Ragged VICR-like ratings: a latent quality per pair plus rater noise, clipped to 1..5."""
    quality = rng.integers(1, 6, size=pairs)
    counts = rng.integers(low, high + 1, size=pairs)
    return [
        list(np.clip(q + rng.integers(-1, 2, size=k), 1, 5).astype(int))
        for q, k in zip(quality, counts, strict=True)
    ]


# --------------------------------------------------------------------------------------
# Scale
# --------------------------------------------------------------------------------------


def test_scale_texts_match_protocols(shared_datasets: Path) -> None:
    protocols = (shared_datasets.parent / "PROTOCOLS.md").read_text(encoding="utf-8")
    section = protocols.split("## 2. VICR rating game")[1].split("Phases of a player")[0]
    rows = dict(
        (int(level), text.strip())
        for level, text in re.findall(r"^\| ([1-5]) \| (.+) \|$", section, flags=re.MULTILINE)
    )
    assert set(rows) == {1, 2, 3, 4, 5}
    for level in range(1, 6):
        assert SCALE[level] == rows[level]
        assert SCALE[level].text == rows[level]


def test_scale_shape_and_labels() -> None:
    assert sorted(SCALE) == [1, 2, 3, 4, 5]
    assert list(SCALE) == [5, 4, 3, 2, 1]  # shown highest first, as in the paper's Table 2
    for level, entry in SCALE.items():
        assert isinstance(entry, str)
        assert entry.level == level
        assert entry.label == vicr.SCALE_LABELS[level] and entry.label
        assert type(entry.text) is str
    assert SCALE[1].startswith("Objects are incorrectly identified.")
    assert "Interpretation of overall setting and/or event is included." in SCALE[5]
    assert len(set(vicr.SCALE_LABELS.values())) == 5


# --------------------------------------------------------------------------------------
# Tutorial points and consensus
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rating", "truth"), list(itertools.product(range(1, 6), repeat=2)))
def test_tutorial_points_all_25(rating: int, truth: int) -> None:
    assert tutorial_points(rating, truth) == 2 - abs(truth - rating)


def test_tutorial_points_range_and_numpy_ints() -> None:
    assert tutorial_points(1, 5) == -2 and tutorial_points(3, 3) == 2
    assert tutorial_points(np.int64(4), np.int8(2)) == 0
    assert type(tutorial_points(np.int64(4), 4)) is int


@pytest.mark.parametrize("bad", BAD_RATINGS)
def test_tutorial_points_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="rating"):
        tutorial_points(bad, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="truth"):
        tutorial_points(3, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        ([3, 4], 4),  # mean 3.5 -> 4 (Python's round(3.5) is also 4)
        ([2, 3], 3),  # mean 2.5 -> 3 (Python's banker's round(2.5) would give 2)
        ([4, 5], 5),  # mean 4.5 -> 5 (round(4.5) would give 4)
        ([1, 2], 2),  # mean 1.5 -> 2
        ([1, 2, 2], 2),  # mean 5/3 = 1.67 -> 2
        ([1, 1, 2], 1),  # mean 4/3 = 1.33 -> 1
        ([1, 2, 3, 4], 3),  # mean 2.5 -> 3
        ([5], 5),
        ([1, 5], 3),
    ],
)
def test_consensus_round_half_up(pool: list[int], expected: int) -> None:
    assert consensus(pool) == expected


def test_consensus_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        consensus([])
    for bad in BAD_RATINGS:
        with pytest.raises(ValueError):
            consensus([3, bad])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        consensus("33")  # type: ignore[arg-type]


@given(st.lists(st.integers(1, 5), min_size=1, max_size=12))
def test_consensus_is_floor_of_mean_plus_half(pool: list[int]) -> None:
    assert consensus(pool) == math.floor(Fraction(sum(pool), len(pool)) + Fraction(1, 2))


# --------------------------------------------------------------------------------------
# Priming rule
# --------------------------------------------------------------------------------------


def test_consensus_pool_priming() -> None:
    primed = [2, 5]
    assert consensus_pool([], primed) == [2, 5]  # 0 humans: both primes
    assert consensus_pool([4], primed) == [4, 2]  # 1 human replaces the second prime
    assert consensus_pool([4, 3], primed) == [4, 3]  # 2 humans: no primes left
    assert consensus_pool([4, 3, 1], primed) == [4, 3, 1]  # 3 humans: no primes
    assert consensus_pool([], []) == []  # nothing imported, nothing rated: empty pool
    assert consensus_pool([], [3]) == [3]  # a single prime imported
    with pytest.raises(ValueError):
        consensus_pool([0], primed)
    with pytest.raises(ValueError):
        consensus_pool([3], [2, 6])


def test_priming_feeds_algorithm_1() -> None:
    # 1 human (4) + first prime (2): pool [4, 2], r = 3; player rates 3 -> exact match, 2 points
    assert player_score(3, consensus_pool([4], [2, 5])) == 2
    # empty pool -> 0 points whatever the rating
    assert player_score(1, consensus_pool([], [])) == 0


# --------------------------------------------------------------------------------------
# Algorithm 1, hand-worked
# --------------------------------------------------------------------------------------


def test_algorithm1_one_previous_rating() -> None:
    # prev [3]: r = 3, n = 2, var = 0, v = 1 + 1/2 * (1 + 0) = 1.5
    assert player_score(3, [3]) == 2  # d = 0
    assert player_score(4, [3]) == 0  # d = 1/1.5 = 0.667 -> (0.5, 1] -> 0
    assert player_score(2, [3]) == 0
    assert player_score(5, [3]) == -1  # d = 2/1.5 = 1.333 -> (1, 1.75] -> -1
    assert player_score(1, [3]) == -1
    # prev [1]: x = 4 -> d = 3/1.5 = 2 -> -2; x = 5 -> d = 4/1.5 = 2.67 -> -2
    assert player_score(4, [1]) == -2
    assert player_score(5, [1]) == -2


def test_algorithm1_high_versus_low_variance() -> None:
    # high variance: prev [1, 5]: mean 3, var = ((1-3)^2 + (5-3)^2) / 2 = 4 = V_max,
    # n = 3, v = 1 + 1/3 * (1 + 2 * 4 / 4) = 2
    assert player_score(3, [1, 5]) == 2  # d = 0
    assert player_score(4, [1, 5]) == 1  # d = 1/2 = 0.5 exactly -> 1
    assert player_score(5, [1, 5]) == 0  # d = 2/2 = 1 exactly -> 0
    assert player_score(1, [1, 5]) == 0
    # low variance: prev [3, 3]: var 0, n = 3, v = 1 + 1/3 = 4/3
    assert player_score(4, [3, 3]) == 0  # d = 3/4 -> 0
    assert player_score(5, [3, 3]) == -1  # d = 2 * 3/4 = 1.5 -> -1
    assert player_score(1, [3, 3]) == -1
    # so the same distance costs less after a disagreement
    assert player_score(4, [1, 5]) > player_score(4, [3, 3])


def test_algorithm1_exact_thresholds() -> None:
    # d = 0.5 and d = 1: prev [1, 5] above (v = 2, |x - r| = 1 and 2).
    s = score_rating(4, [1, 5])
    assert (s.consensus, s.n, s.var, s.v, s.d, s.points) == (3, 3, 4.0, 2.0, 0.5, 1)
    s = score_rating(5, [1, 5])
    assert (s.d, s.points) == (1.0, 0)
    # d = 1.75: prev [3] * 6: r = 3, n = 7, var = 0, v = 1 + 1/7 = 8/7; x = 1: d = 2 * 7/8
    s = score_rating(1, [3] * 6)
    assert (s.consensus, s.n, s.var) == (3, 7, 0.0)
    assert s.d == 1.75 and s.points == -1
    # ... and just past it: prev [3] * 5: v = 1 + 1/6 = 7/6, d = 2 * 6/7 = 1.714 -> -1;
    # prev [3] * 7: v = 9/8, d = 2 * 8/9 = 1.778 > 1.75 -> -2
    assert player_score(1, [3] * 5) == -1
    assert player_score(1, [3] * 7) == -2
    # d = 1.75 with variance: prev six ratings [1, 1, 3, 3, 5, 5]: mean 3, var = 8/3,
    # n = 7, v = 1 + 1/7 * (1 + 6 * (8/3) / 4) = 1 + 5/7 = 12/7; x = 3 + 3 is off the scale,
    # but |x - r| = 2 gives d = 2 * 7/12 = 7/6 -> -1, and x = r gives 2.
    assert player_score(5, [1, 1, 3, 3, 5, 5]) == -1
    assert player_score(3, [1, 1, 3, 3, 5, 5]) == 2


def test_points_ladder_at_exact_thresholds() -> None:
    # v <= 2 on a 1-5 scale, so d is 0 or >= 0.5: the 0.25 threshold is only reachable
    # through the ladder itself. Thresholds are inclusive, compared exactly.
    cases = [(0, 2), (0.25, 2), (0.5, 1), (1, 0), (1.75, -1), (1.7500001, -2), (4, -2)]
    for d, points in cases:
        assert points_for_distance(d) == points
        assert points_for_distance(Fraction(d)) == points
    for threshold, above in ((0.25, 1), (0.5, 0), (1.0, -1), (1.75, -2)):
        assert points_for_distance(np.nextafter(threshold, 10)) == above
        assert points_for_distance(Fraction(threshold) + Fraction(1, 10**12)) == above
    assert points_for_distance(np.float32(0.25)) == 2
    assert points_for_distance(np.int64(1)) == 0
    for bad in (-0.1, float("nan"), float("inf"), np.float32("nan"), True, "1", None):
        with pytest.raises(ValueError):
            points_for_distance(bad)  # type: ignore[arg-type]


def test_algorithm1_d_is_zero_or_at_least_half() -> None:
    # every pool of 1..4 ratings and every x: v <= 2, so a non-matching rating never gets 2
    for size in range(1, 5):
        for pool in itertools.combinations_with_replacement(range(1, 6), size):
            r = consensus(pool)
            for x in range(1, 6):
                s = score_rating(x, pool)
                assert s.consensus == r
                assert 1 < s.v <= 2
                assert (s.points == 2) == (x == r)
                assert s.points == player_score(x, list(pool))


@given(st.lists(st.integers(1, 5), min_size=1, max_size=7), st.integers(1, 5))
def test_algorithm1_closer_is_never_worse(pool: list[int], x: int) -> None:
    r = consensus(pool)
    closer = x + (1 if x < r else -1 if x > r else 0)
    assert player_score(closer, pool) >= player_score(x, pool)


def test_empty_pool_gives_zero() -> None:
    for x in range(1, 6):
        assert player_score(x, []) == 0
        s = score_rating(x, [])
        assert s.points == 0 and s.consensus is None and s.n == 1
        assert s.var is None and s.v is None and s.d is None
        assert "no consensus yet" in s.reason
    with pytest.raises(ValueError):
        player_score(6, [])


def test_player_score_rejects_bad_input() -> None:
    for bad in BAD_RATINGS:
        with pytest.raises(ValueError):
            player_score(bad, [3])  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            player_score(3, [3, bad])  # type: ignore[list-item]


def test_score_reasons() -> None:
    assert score_rating(3, [1, 5]).reason == "you matched the consensus"
    # one level away with high variance: 1 point instead of the 0 an agreed pool would give
    assert score_rating(4, [1, 5]).reason == "one level away, and raters disagreed on this one"
    assert score_rating(4, [3, 3]).reason.startswith("one level away from the consensus")
    assert "all agreed" in score_rating(4, [3, 3]).reason
    assert score_rating(5, [3]).reason == "two levels away from the consensus"
    assert type(player_score(3, [3])) is int


# --------------------------------------------------------------------------------------
# Phase rules
# --------------------------------------------------------------------------------------


def test_tutorial_outcome() -> None:
    assert tutorial_outcome([1] * 10) == Phase.GAME  # 10 of 20: pass
    assert tutorial_outcome([1] * 9 + [0]) == Phase.PROBATION  # 9: fail
    assert tutorial_outcome([2] * 5 + [0] * 5) == Phase.GAME
    assert tutorial_outcome([2] * 5 + [-1] + [0] * 4) == Phase.PROBATION  # 9
    assert tutorial_outcome([2, 2], pass_mark=4, pairs=2) == Phase.GAME
    with pytest.raises(ValueError, match="exactly 10"):
        tutorial_outcome([2] * 9)
    with pytest.raises(ValueError):
        tutorial_outcome([3] + [1] * 9)  # points are -2..2


def test_probation_outcome() -> None:
    assert probation_outcome([1] * 15 + [2] * 5, attempt=1) == Phase.GAME  # 25 of 40
    assert probation_outcome([1] * 16 + [2] * 4, attempt=1) == Phase.PROBATION  # 24: retry
    assert probation_outcome([1] * 16 + [2] * 4, attempt=2) == Phase.EXCLUDED  # cap reached
    assert probation_outcome([1] * 20, attempt=2, max_attempts=3) == Phase.PROBATION
    assert probation_outcome([2] * 20, attempt=2) == Phase.GAME
    with pytest.raises(ValueError):
        probation_outcome([2] * 20, attempt=3)  # beyond max_attempts
    with pytest.raises(ValueError):
        probation_outcome([2] * 20, attempt=0)


def test_first_game_outcome() -> None:
    assert first_game_outcome([2] * 19) is None  # undecided before the 20th rating
    assert first_game_outcome([1] * 15 + [2] * 5) == Phase.GAME  # 25
    assert first_game_outcome([1] * 16 + [2] * 4) == Phase.PROBATION  # 24
    # only the first 20 count
    assert first_game_outcome([1] * 16 + [2] * 4 + [2] * 10) == Phase.PROBATION
    assert first_game_outcome([2] * 3, ratings=3, pass_mark=6) == Phase.GAME


def test_state_machine_paths() -> None:
    rules = PhaseRules()
    # tutorial pass -> game
    state = next_state(PlayerState(), [1] * 10)
    assert state == PlayerState(phase=Phase.GAME)
    # 19 game ratings of 1 point: 19 < 25 but undecided
    for _ in range(19):
        state = next_state(state, 1)
    assert (state.phase, state.score, state.game_ratings) == (Phase.GAME, 19, 19)
    # 20th rating: 20 < 25 -> score reset, back to probation
    state = next_state(state, 1)
    assert state == PlayerState(phase=Phase.PROBATION, score=0, game_ratings=0)
    # probation fail (24) -> retry, then pass (25)
    state = next_state(state, [1] * 16 + [2] * 4)
    assert (state.phase, state.probation_attempts) == (Phase.PROBATION, 1)
    state = next_state(state, [1] * 15 + [2] * 5)
    assert (state.phase, state.probation_attempts, state.score) == (Phase.GAME, 2, 0)
    # a good first 20 (30 points) -> stays in the game, score keeps counting afterwards
    for p in [2] * 10 + [1] * 10 + [-2, 0]:
        state = next_state(state, p, rules)
    assert (state.phase, state.score, state.game_ratings) == (Phase.GAME, 28, 22)


def test_state_machine_exclusion() -> None:
    state = next_state(PlayerState(), [0] * 10)  # tutorial 0 -> probation
    assert state.phase == Phase.PROBATION
    state = next_state(state, [0] * 20)
    state = next_state(state, [0] * 20)
    assert (state.phase, state.probation_attempts) == (Phase.EXCLUDED, 2)
    with pytest.raises(ValueError, match="excluded"):
        next_state(state, 2)
    # attempts count over the whole history: probation passed on attempt 2, then a failed
    # first 20 with no attempt left -> excluded
    state = PlayerState(phase=Phase.GAME, probation_attempts=2)
    for _ in range(20):
        state = next_state(state, 0)
    assert state.phase == Phase.EXCLUDED
    # custom thresholds
    rules = PhaseRules(tutorial_pairs=2, tutorial_pass=3, max_probation_attempts=1)
    assert next_state(PlayerState(), [2, 1], rules).phase == Phase.GAME
    assert next_state(PlayerState(phase=Phase.PROBATION), [0] * 20, rules).phase == (Phase.EXCLUDED)


def test_state_machine_rejects_wrong_events() -> None:
    with pytest.raises(ValueError):
        next_state(PlayerState(), 2)  # tutorial needs the block
    with pytest.raises(ValueError):
        next_state(PlayerState(phase=Phase.GAME), [2, 2])  # game is one rating at a time
    with pytest.raises(ValueError):
        next_state(PlayerState(phase=Phase.GAME), 3)
    with pytest.raises(ValueError):
        next_state(PlayerState(phase=Phase.GAME), True)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Report helpers
# --------------------------------------------------------------------------------------


def test_agreement_with_consensus() -> None:
    # gaps: 0, 1, 2, 0, 1 -> exact 2/5, adjacent 2/5, within one 4/5
    summary = agreement_with_consensus([3, 4, 5, 1, 2], [3, 3, 3, 1, 1])
    assert summary == {
        "n": 5,
        "exact": 0.4,
        "adjacent": 0.4,
        "within_one": 0.8,
        "exact_count": 2,
        "adjacent_count": 2,
    }
    assert agreement_with_consensus(np.array([2.0]), [2])["exact"] == 1.0
    with pytest.raises(ValueError, match="length"):
        agreement_with_consensus([1, 2], [1])
    with pytest.raises(ValueError):
        agreement_with_consensus([], [])
    with pytest.raises(ValueError):
        agreement_with_consensus([6], [1])
    with pytest.raises(ValueError):
        agreement_with_consensus([True], [1])


def test_rating_distribution() -> None:
    # means: 3.5 -> 4, 2.5 -> 3, 1 -> 1, 13/3 = 4.33 -> 4, 5 -> 5; the empty pair is not counted
    pairs = [[3, 4], [2, 3], [1, 1, 1], [4, 4, 5], [5], []]
    assert rating_distribution(pairs) == {1: 1, 2: 0, 3: 1, 4: 2, 5: 1}
    assert rating_distribution([]) == {1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
    assert rating_distribution([[4, 4.0, 3]], levels=4) == {1: 0, 2: 0, 3: 0, 4: 1}
    with pytest.raises(ValueError):
        rating_distribution([[5]], levels=4)
    with pytest.raises(ValueError):
        rating_distribution([[2.5]])


@given(st.lists(st.lists(st.integers(1, 5), max_size=7), max_size=30))
def test_rating_distribution_matches_consensus(pairs: list[list[int]]) -> None:
    expected = Counter(consensus(p) for p in pairs if p)  # pairs without ratings: not counted
    assert rating_distribution(pairs) == {level: expected[level] for level in range(1, 6)}


# --------------------------------------------------------------------------------------
# Virtual raters
# --------------------------------------------------------------------------------------


def test_draws_are_sorted_subsets_of_each_pair() -> None:
    rng = np.random.default_rng(1)
    ratings = _random_ratings(rng, 200, low=1, high=9)
    kept = [r for r in ratings if len(r) >= 3]
    draws = draw_virtual_raters(ratings, repetitions=20, seed=5)
    assert draws.shape == (20, len(kept), 3)
    assert np.all(np.diff(draws, axis=2) >= 0)
    for rep in draws:
        for triple, pair in zip(rep, kept, strict=True):
            assert not Counter(triple.tolist()) - Counter(pair)  # a sub-multiset of the pair
    # same seed, same draws; another seed, other draws
    assert np.array_equal(draws, draw_virtual_raters(ratings, repetitions=20, seed=5))
    assert not np.array_equal(draws, draw_virtual_raters(ratings, repetitions=20, seed=6))


def test_draws_are_uniform_over_subsets() -> None:
    # one pair with 7 distinct-position ratings (identified by value), plus a filler pair
    pair = [1, 2, 3, 4, 5, 6, 7]
    draws = draw_virtual_raters([pair, [1, 1, 1]], repetitions=35_000, seed=0, levels=9)
    seen = Counter(map(tuple, draws[:, 0, :].tolist()))
    assert set(seen) == set(itertools.combinations(pair, 3))  # all C(7, 3) = 35 subsets
    counts = np.array(list(seen.values()))
    assert scipy.stats.chisquare(counts).pvalue > 1e-4  # expected 1,000 each


def test_virtual_raters_equal_slow_reference() -> None:
    rng = np.random.default_rng(2024)
    ratings = _random_ratings(rng, 300)
    ratings += [[4, 5], [3]]  # pairs with fewer than 3 ratings are left out
    for collapse_top in (True, False):
        fast = virtual_rater_values(ratings, repetitions=12, seed=3, collapse_top=collapse_top)
        draws = draw_virtual_raters(ratings, repetitions=12, seed=3)
        slow = _slow_virtual_rater_values(draws, collapse_top=collapse_top)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)
        np.testing.assert_allclose(
            virtual_rater_statistics(draws, collapse_top=collapse_top), slow, rtol=0, atol=1e-9
        )
    summary = virtual_raters(ratings, repetitions=12, seed=3, collapse_top=False)  # as `slow`
    assert list(summary) == list(vicr.VIRTUAL_RATER_KEYS)
    for i, key in enumerate(vicr.VIRTUAL_RATER_KEYS):
        assert summary[key]["mean"] == pytest.approx(slow[:, i].mean(), abs=1e-9)
        assert summary[key]["std"] == pytest.approx(slow[:, i].std(ddof=0), abs=1e-9)
    # collapsing 4 and 5 changes Fleiss' kappa only
    collapsed = virtual_rater_values(ratings, repetitions=3, seed=1, collapse_top=True)
    separate = virtual_rater_values(ratings, repetitions=3, seed=1, collapse_top=False)
    np.testing.assert_array_equal(collapsed[:, :4], separate[:, :4])
    assert not np.allclose(collapsed[:, 4], separate[:, 4])


def test_gather_fallback_path_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    ratings = _random_ratings(rng, 150, low=3, high=10)
    expected = virtual_rater_values(ratings, repetitions=5, seed=9)
    monkeypatch.setattr(vicr.virtual, "_CODE_TABLE_MAX_CELLS", 0)
    np.testing.assert_array_equal(virtual_rater_values(ratings, repetitions=5, seed=9), expected)
    slow = _slow_virtual_rater_values(draw_virtual_raters(ratings, repetitions=5, seed=9))
    np.testing.assert_allclose(expected, slow, rtol=0, atol=1e-9)


def test_kendall_w_matches_friedman() -> None:
    # independent check of W: W = chi2_Friedman (tie corrected) / (m (n - 1)),
    # with the raters as blocks and the pairs as treatments
    rng = np.random.default_rng(11)
    draws = draw_virtual_raters(_random_ratings(rng, 60), repetitions=3, seed=0)
    ours = virtual_rater_statistics(draws)[:, 3]
    for rep, value in zip(draws, ours, strict=True):
        chi2 = scipy.stats.friedmanchisquare(*rep).statistic
        assert value == pytest.approx(100 * chi2 / (3 * (len(rep) - 1)), abs=1e-9)


def test_perfect_agreement_gives_100() -> None:
    # every pair rated identically by all its raters, each level equally often
    # (tau_c reaches 1 only with equal marginals), pairs of 3 to 7 ratings
    ratings = [[level] * (3 + i % 5) for i in range(50) for level in range(1, 6)]
    result = virtual_raters(ratings, repetitions=10, seed=0, collapse_top=False)
    for key in vicr.VIRTUAL_RATER_KEYS:
        assert result[key]["mean"] == pytest.approx(100.0, abs=1e-9)
        assert result[key]["std"] == pytest.approx(0.0, abs=1e-9)
    # with 4 and 5 merged, kappa still 100 (still perfect agreement)
    assert virtual_raters(ratings, repetitions=2)["fleiss_kappa"]["mean"] == pytest.approx(100)


def test_three_ratings_per_pair_is_deterministic() -> None:
    rng = np.random.default_rng(3)
    ratings = _random_ratings(rng, 80, low=3, high=3)
    values = virtual_rater_values(ratings, repetitions=4, seed=0)
    assert np.allclose(values, values[0], rtol=0, atol=1e-12)
    other = virtual_rater_values(ratings, repetitions=1, seed=99)
    np.testing.assert_allclose(other[0], values[0], rtol=0, atol=1e-12)
    slow = _slow_virtual_rater_values(np.sort(np.array(ratings), axis=1)[None])
    np.testing.assert_allclose(values[0], slow[0], rtol=0, atol=1e-9)


def test_virtual_raters_accepts_arrays_and_whole_floats() -> None:
    rng = np.random.default_rng(4)
    matrix = rng.integers(1, 5, size=(40, 3))
    as_lists = virtual_raters(matrix.tolist(), repetitions=2, levels=4, collapse_top=False)
    as_array = virtual_raters(matrix.astype(float), repetitions=2, levels=4, collapse_top=False)
    assert as_lists == as_array


@pytest.mark.parametrize(
    ("ratings", "kwargs", "message"),
    [
        ([[1, 2, 6], [2, 3, 4]], {}, "from 1 to 5"),
        ([[1, 2, 0], [2, 3, 4]], {}, "from 1 to 5"),
        ([[1, 2, 5], [2, 3, 4]], {"levels": 4}, "from 1 to 4"),
        ([[1, 2, 2.5], [2, 3, 4]], {}, "whole numbers"),
        ([[1, 2, float("nan")], [2, 3, 4]], {}, "NaN"),
        ([[1, 2, True], [2, 3, 4]], {}, "boolean"),
        ([[1, 2, "3"], [2, 3, 4]], {}, "integer ratings"),
        ([[1, 2, 3], [2, 3]], {}, "at least 2 pairs"),
        ([], {}, "at least 2 pairs"),
        (["123", "234"], {}, "per pair"),
        ([[1, 2, 3], [2, 3, 4]], {"repetitions": 0}, "repetitions"),
        ([[1, 2, 3], [2, 3, 4]], {"levels": 1}, "levels"),
        ([[1, 2, 3], [2, 3, 4]], {"collapse_top": 1}, "collapse_top"),
        ([[3, 3, 3], [3, 3, 3], [3, 3, 3]], {}, "undefined"),  # every statistic is 0/0
        ([[1, 2, 3], [1, 4, 5], [1, 2, 2]], {}, "tau_x_yz is undefined"),  # X always 1
        # 4 and 5 merged: one category left
        ([[4, 4, 4], [5, 5, 5], [4, 5, 5]], {"collapse_top": True}, "fleiss_kappa is undefined"),
    ],
)
def test_virtual_raters_errors(ratings: list, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        virtual_raters(ratings, **kwargs)


def test_statistics_of_given_draws_validate() -> None:
    with pytest.raises(ValueError, match="sorted"):
        virtual_rater_statistics(np.array([[3, 2, 4], [1, 2, 3]]))
    with pytest.raises(ValueError, match="shape"):
        virtual_rater_statistics(np.array([[1, 2], [1, 2]]))


def _ratings_strategy() -> st.SearchStrategy[list[list[int]]]:
    return st.lists(st.lists(st.integers(1, 5), min_size=2, max_size=8), min_size=2, max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ratings_strategy(), st.integers(0, 2**32), st.booleans())
def test_virtual_raters_hypothesis(ratings: list[list[int]], seed: int, collapse: bool) -> None:
    kept = [r for r in ratings if len(r) >= 3]
    if len(kept) < 2:
        with pytest.raises(ValueError, match="at least 2 pairs"):
            virtual_rater_values(ratings, repetitions=3, seed=seed)
        return
    draws = draw_virtual_raters(ratings, repetitions=3, seed=seed)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        slow = _slow_virtual_rater_values(draws, collapse_top=collapse)
    if not np.all(np.isfinite(slow)):
        # the references say 0/0 somewhere: we must refuse instead of returning NaN
        with pytest.raises(ValueError, match="undefined"):
            virtual_rater_values(ratings, repetitions=3, seed=seed, collapse_top=collapse)
        return
    fast = virtual_rater_values(ratings, repetitions=3, seed=seed, collapse_top=collapse)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)


# --------------------------------------------------------------------------------------
# Gate draws: per-player tutorial and probation pairs
# --------------------------------------------------------------------------------------


@given(
    pool=st.integers(0, 200),
    seed=st.integers(-(2**63), 2**63 - 1),
    player=st.integers(1, 10**9),
    kind=st.sampled_from(["tutorial", "probation"]),
)
def test_gate_order_is_a_reproducible_permutation(pool, seed, player, kind) -> None:
    order = vicr.gate_order(pool, study_seed=seed, player=player, kind=kind)
    assert sorted(order) == list(range(pool))
    assert order == vicr.gate_order(pool, study_seed=seed, player=player, kind=kind)


def test_gate_order_differs_per_player_seed_and_pool_kind() -> None:
    base = vicr.gate_order(30, study_seed=0, player=1, kind="tutorial")
    assert base != sorted(base), "not the import order"
    assert base != vicr.gate_order(30, study_seed=0, player=2, kind="tutorial")
    assert base != vicr.gate_order(30, study_seed=1, player=1, kind="tutorial")
    assert base != vicr.gate_order(30, study_seed=0, player=1, kind="probation")


def test_gate_order_serves_every_pair_first_about_equally_often() -> None:
    # 6,000 players over a pool of 6: each position is first for about 1,000 of them. The
    # chi-square test (5 degrees of freedom) would reject a fair order at p < 0.001 only
    # once in a thousand seeds; a biased sort (e.g. always position 0 first) fails it.
    firsts = Counter(
        vicr.gate_order(6, study_seed=7, player=player, kind="tutorial")[0]
        for player in range(1, 6001)
    )
    assert scipy.stats.chisquare([firsts[p] for p in range(6)]).pvalue > 0.001


@given(
    pairs=st.integers(1, 20),
    attempts=st.integers(1, 5),
    spare=st.integers(0, 10),
    player=st.integers(1, 10**6),
)
def test_block_draws_of_successive_attempts_never_repeat_a_pair(
    pairs, attempts, spare, player
) -> None:
    pool = pairs * attempts + spare
    draws = [
        vicr.block_draw(pool, pairs=pairs, attempt=k, study_seed=3, player=player, kind="probation")
        for k in range(attempts)
    ]
    seen = [position for draw in draws for position in draw]
    assert all(len(draw) == pairs for draw in draws)
    assert len(set(seen)) == len(seen), "a pair came back in a later attempt"
    order = vicr.gate_order(pool, study_seed=3, player=player, kind="probation")
    assert seen == order[: pairs * attempts], "the draw's order is the player's order"


def test_block_draw_refuses_an_attempt_the_pool_cannot_fill() -> None:
    vicr.block_draw(40, pairs=20, attempt=1, study_seed=0, player=1, kind="probation")
    with pytest.raises(ValueError, match="attempt 3 needs 60 pairs in the pool .* it has 40"):
        vicr.block_draw(40, pairs=20, attempt=2, study_seed=0, player=1, kind="probation")
    with pytest.raises(ValueError, match="pairs"):
        vicr.block_draw(40, pairs=0, attempt=0, study_seed=0, player=1, kind="tutorial")


# --------------------------------------------------------------------------------------
# Leave-one-out consensus, agreement scores, competition ranks
# --------------------------------------------------------------------------------------


def test_consensus_of_others_leaves_the_own_rating_out_by_hand() -> None:
    # pair "a": ratings 1, 1, 2 counted, 5 not (a player out of the final view)
    #   first 1: others 1, 2 -> 1.5 -> 2; second 1: the same; 2: others 1, 1 -> 1;
    #   the uncounted 5: every counted rating, 1, 1, 2 -> 1.33 -> 1
    # pair "b": a lone counted 3 has no other rater -> 0; pair "c": only uncounted -> 0
    pairs = ["a", "a", "a", "a", "b", "c"]
    ratings = [1, 1, 2, 5, 3, 4]
    counted = np.array([True, True, True, False, True, False])
    others = vicr.consensus_of_others(pairs, ratings, counted)
    assert others.tolist() == [2, 2, 1, 1, 0, 0]


def test_consensus_of_others_equals_a_loop_over_consensus() -> None:
    rng = np.random.default_rng(13)
    pairs = rng.integers(0, 40, 400)
    ratings = rng.integers(1, 6, 400)
    counted = rng.random(400) < 0.8
    fast = vicr.consensus_of_others(pairs, ratings, counted)
    for index in range(400):
        pool = [
            int(ratings[j])
            for j in range(400)
            if pairs[j] == pairs[index] and counted[j] and j != index
        ]
        assert fast[index] == (consensus(pool) if pool else 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([1], [6], np.array([True])), "ratings must be from 1 to 5"),
        (([1, 2], [3], np.array([True])), "differ in length"),
        (([1], [3], [1]), "counted must be a 1-D array of booleans"),
        (([None], [3], np.array([True])), "missing id"),
    ],
)
def test_consensus_of_others_refuses_bad_input(args, message) -> None:
    with pytest.raises(ValueError, match=message):
        vicr.consensus_of_others(*args)


def test_agreement_scores_follow_the_papers_rubric() -> None:
    # exact 2, one off 1, two or more off 0 (section 4: EA, AA, LA)
    assert vicr.agreement_scores([3, 3, 3, 3, 1], [3, 4, 2, 5, 5]).tolist() == [2, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="differ in length"):
        vicr.agreement_scores([3], [3, 4])


def test_competition_ranks_share_a_rank_and_skip() -> None:
    assert vicr.competition_ranks([12, 9, 9, 7]) == [1, 2, 2, 4]
    assert vicr.competition_ranks([5, 5, 5]) == [1, 1, 1]
    assert vicr.competition_ranks([0, 3, -2, 3]) == [3, 1, 4, 1]
    assert vicr.competition_ranks([]) == []
    with pytest.raises(ValueError, match="each score"):
        vicr.competition_ranks([1, True])


def test_the_package_re_exports_every_public_name_of_its_modules() -> None:
    modules = (vicr.scale, vicr.scoring, vicr.phases, vicr.players, vicr.virtual)
    for module in modules:
        for name in module.__all__:
            assert getattr(vicr, name) is getattr(module, name), name
    assert set(vicr.__all__) >= {name for m in modules for name in m.__all__}
