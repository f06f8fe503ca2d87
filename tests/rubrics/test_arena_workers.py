"""The arena's checks of one worker (rubrics/arena_workers.py): hand-worked cases, and the
binomial test against scipy's."""

import numpy as np
import pytest
from scipy import stats

from rubrics import arena_workers as rules

# ------------------------------------------------------------------ gold battles' places


def test_gold_positions_fall_one_in_each_stretch_of_the_battles_before_the_count():
    # The default study: the code after 20 answers, 3 gold battles among them, so 17
    # battles. Stretches: floor(17 k / 3) = 0, 5, 11, 17 -> 1-5, 6-11, 12-17.
    seen = [set(), set(), set()]
    for seed in range(300):
        positions = rules.gold_positions(3, 17, np.random.default_rng(seed))
        assert len(positions) == 3
        for k, position in enumerate(positions):
            seen[k].add(position)
    # Every place of each stretch is drawn, and no other.
    assert seen == [set(range(1, 6)), set(range(6, 12)), set(range(12, 18))]


def test_the_last_gold_battle_is_answered_by_the_count_at_the_latest():
    # Gold k follows battle p_k, so it is answer p_k + k + 1; the last is at most
    # 17 + 2 + 1 = 20, the code's count.
    for seed in range(100):
        positions = rules.gold_positions(3, 17, np.random.default_rng(seed))
        assert max(p + k + 1 for k, p in enumerate(positions)) <= 20


def test_gold_positions_edge_cases():
    rng = np.random.default_rng(0)
    assert rules.gold_positions(0, 5, rng) == ()
    # As many gold battles as battles: one after each.
    assert rules.gold_positions(4, 4, rng) == (1, 2, 3, 4)
    with pytest.raises(ValueError):
        rules.gold_positions(5, 4, rng)
    with pytest.raises(ValueError):
        rules.gold_positions(-1, 4, rng)


def test_golds_due_counts_the_places_passed():
    assert [rules.golds_due((3, 8, 15), n) for n in (0, 2, 3, 7, 8, 15, 30)] == [
        0,
        0,
        1,
        1,
        2,
        3,
        3,
    ]


# ------------------------------------------------------------------ the binomial test


def test_binomial_p_by_hand():
    # 10 of 10: 2 (1 / 1024). 9 of 10: 2 (1 + 10) / 1024 = 22 / 1024.
    # 8 of 10: 2 (1 + 10 + 45) / 1024 = 112 / 1024. 5 of 10: capped at 1.
    assert rules.binomial_p(10, 10) == 2 / 1024
    assert rules.binomial_p(0, 10) == 2 / 1024
    assert rules.binomial_p(9, 10) == 22 / 1024
    assert rules.binomial_p(8, 10) == 112 / 1024
    assert rules.binomial_p(5, 10) == 1.0
    assert rules.binomial_p(0, 0) == 1.0
    with pytest.raises(ValueError):
        rules.binomial_p(3, 2)


@pytest.mark.parametrize("k,n", [(0, 1), (3, 7), (15, 17), (40, 100), (31, 60), (0, 200)])
def test_binomial_p_equals_scipy(k, n):
    assert rules.binomial_p(k, n) == pytest.approx(stats.binomtest(k, n, 0.5).pvalue, rel=1e-12)


# ------------------------------------------------------------------ the two rules


def test_an_always_tie_worker_breaks_the_constant_rule_not_position_bias():
    pattern = rules.answer_pattern(["tie"] * 20, max_share=0.9)
    assert (pattern.outcome, pattern.share, pattern.answers) == ("tie", 1.0, 20)
    assert pattern.constant and not pattern.position and pattern.flagged
    # No decisive answer: no position to judge.
    assert pattern.decisive == 0 and pattern.left_share is None and pattern.p_value == 1.0
    assert pattern.reason() == "the same answer (tie) on 100% of 20 battles"


def test_an_always_a_worker_breaks_both_rules():
    pattern = rules.answer_pattern(["a"] * 17, max_share=0.9)
    # p = 2 / 2^17.
    assert pattern.constant and pattern.position
    assert pattern.p_value == 2 / 2**17
    assert "(a) on 100% of 17 battles" in pattern.reason()
    assert "left caption chosen in 100% of 17 decisive battles" in pattern.reason()


def test_the_share_must_be_strictly_above_the_setting():
    # 18 of 20 is 0.9: not above 0.9. 19 of 20 is.
    assert not rules.answer_pattern(["bothbad"] * 18 + ["a", "b"], max_share=0.9).constant
    assert rules.answer_pattern(["bothbad"] * 19 + ["a"], max_share=0.9).constant
    # 1: the constant rule is off, even for one outcome on everything.
    assert not rules.answer_pattern(["tie"] * 50, max_share=1).constant


def test_position_bias_alone_flags_a_left_clicker_who_mixes_in_ties():
    # 15 "a" and 5 ties: the most common share is 0.75, not above 0.9, but all 15
    # decisive answers are on the left: p = 2 / 2^15, below 0.01.
    pattern = rules.answer_pattern(["a"] * 15 + ["tie"] * 5, max_share=0.9)
    assert not pattern.constant and pattern.position
    assert pattern.left_share == 1.0 and pattern.decisive == 15


def test_an_honest_mix_is_not_flagged():
    # 8 left, 7 right, 3 ties, 2 both bad: top share 8 / 20; p of 8 of 15 is 1.
    outcomes = ["a"] * 8 + ["b"] * 7 + ["tie"] * 3 + ["bothbad"] * 2
    pattern = rules.answer_pattern(outcomes, max_share=0.9)
    assert pattern.outcome == "a" and pattern.share == 0.4
    assert pattern.p_value == 1.0 and not pattern.flagged and pattern.reason() == ""


def test_too_few_answers_are_not_judged():
    # 9 answers, all one: below MIN_ANSWERS (10) for either rule.
    assert not rules.answer_pattern(["a"] * 9, max_share=0.9).flagged
    # 10 decisive answers all left: p = 2 / 1024 < 0.01; 9 of 10: 22 / 1024 > 0.01.
    assert rules.answer_pattern(["a"] * 10, max_share=1).position
    assert not rules.answer_pattern(["a"] * 9 + ["b"], max_share=1).position


def test_equal_counts_name_the_first_outcome_and_refusals():
    assert rules.answer_pattern(["tie", "b", "b", "tie"], max_share=0.9).outcome == "b"
    empty = rules.answer_pattern([], max_share=0.9)
    assert (empty.outcome, empty.share, empty.flagged) == ("", None, False)
    with pytest.raises(ValueError):
        rules.answer_pattern(["model_a"], max_share=0.9)
    with pytest.raises(ValueError):
        rules.answer_pattern(["a"], max_share=1.5)
