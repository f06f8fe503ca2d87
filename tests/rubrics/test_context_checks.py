"""The context mode's constant-rating rule (rubrics/context/checks.py), on cases worked
by hand."""

import pytest

from rubrics.context.checks import MIN_RATINGS, rating_pattern


def test_one_value_on_every_rating_is_constant():
    pattern = rating_pattern([3] * 12, max_share=0.9)
    assert (pattern.ratings, pattern.value, pattern.share, pattern.constant) == (12, 3, 1.0, True)
    assert "the rating 3 on 100% of 12 ratings" in pattern.reason()


def test_the_share_must_be_strictly_above_the_limit():
    # 9 of 10 is 0.9: not above 0.9; 10 of 11 (0.909...) is.
    assert not rating_pattern([5] * 9 + [1], max_share=0.9, min_ratings=10).constant
    assert rating_pattern([5] * 10 + [1], max_share=0.9, min_ratings=10).constant


def test_too_few_ratings_are_not_judged():
    few = rating_pattern([4] * (MIN_RATINGS - 1), max_share=0.9)
    assert few.share == 1.0 and not few.constant and few.reason() == ""


def test_ties_name_the_smaller_value_whatever_the_order():
    assert rating_pattern([5, 2, 5, 2], max_share=0.9).value == 2
    assert rating_pattern([2, 5, 2, 5], max_share=0.9).value == 2


def test_a_share_of_one_turns_the_rule_off_and_no_ratings_is_nothing():
    assert not rating_pattern([1] * 40, max_share=1.0).constant
    empty = rating_pattern([], max_share=0.9)
    assert (empty.ratings, empty.value, empty.share, empty.constant) == (0, None, None, False)


def test_a_share_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="max_share"):
        rating_pattern([1], max_share=1.5)
