"""Tests for rubrics.transformations (Cui et al. 2018, Sec. 3.3).

Expected counts are worked by hand from the rule in the module docstring:
k = max(2, floor(gamma * n + 0.5)) capped at n, and 0 when gamma is 0.
"""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubrics.transformations import (
    TRANSFORMATIONS,
    changed_count,
    permute_words,
    random_caption,
    replace_words,
    vocabulary,
)

# Ten different words, so changed positions can be counted exactly.
TEN = "a brown dog jumps over the low fence near water"
VOCAB = ("cat", "red", "sky", "table", "runs", "under", "green", "boat")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def changed_positions(before: str, after: str) -> int:
    a, b = before.split(), after.split()
    assert len(a) == len(b)
    return sum(x != y for x, y in zip(a, b, strict=True))


def test_names():
    assert TRANSFORMATIONS == ("T_RC", "T_WP", "T_RW")


@pytest.mark.parametrize(
    ("n", "gamma", "k"),
    [
        (10, 0.0, 0),  # gamma 0: the original caption
        (10, 0.05, 2),  # 0.5 rounds half up to 1, then "at least 2 words"
        (10, 0.25, 3),  # 2.5 rounds half up to 3 (banker's round would say 2)
        (10, 0.5, 5),
        (10, 0.34, 3),  # 3.4 -> 3
        (10, 0.36, 4),  # 3.6 -> 4
        (10, 1.0, 10),
        (3, 0.5, 2),  # 1.5 -> 2
        (1, 1.0, 1),  # capped at n
    ],
)
def test_changed_count_hand_worked(n, gamma, k):
    assert changed_count(n, gamma) == k


@pytest.mark.parametrize("bad", [-0.1, 1.01, float("nan"), True, "0.5", None])
def test_gamma_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="gamma"):
        permute_words(TEN, bad, rng())
    with pytest.raises(ValueError, match="gamma"):
        replace_words(TEN, bad, VOCAB, rng())


@pytest.mark.parametrize("gamma", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("seed", range(20))
def test_permute_changes_exactly_k_positions_and_keeps_the_words(gamma, seed):
    out = permute_words(TEN, gamma, rng(seed))
    assert Counter(out.split()) == Counter(TEN.split())
    assert changed_positions(TEN, out) == changed_count(10, gamma)
    assert out != TEN


@pytest.mark.parametrize("gamma", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(20))
def test_replace_changes_exactly_k_positions_with_vocabulary_words(gamma, seed):
    out = replace_words(TEN, gamma, VOCAB, rng(seed))
    before, after = TEN.split(), out.split()
    changed = [i for i in range(10) if before[i] != after[i]]
    assert len(changed) == changed_count(10, gamma)
    assert all(after[i] in VOCAB for i in changed)


def test_replace_never_puts_back_the_same_word_ignoring_case():
    # The vocabulary holds the caption's own words (any case) plus one other word:
    # each replaced word can only become "zebra" or a *different* caption word.
    for seed in range(50):
        out = replace_words("Dog cat", 1.0, ["dog", "DOG", "cat", "zebra"], rng(seed))
        first, second = out.split()
        assert first.lower() != "dog" and second.lower() != "cat"


def test_gamma_zero_returns_the_caption_unchanged():
    text = "A  dog,   running."  # odd spacing kept as is when nothing changes
    assert permute_words(text, 0.0, rng()) == text
    assert replace_words(text, 0.0, VOCAB, rng()) == text


def test_same_seed_same_result_and_seeds_differ():
    assert permute_words(TEN, 0.5, rng(7)) == permute_words(TEN, 0.5, rng(7))
    assert replace_words(TEN, 0.5, VOCAB, rng(7)) == replace_words(TEN, 0.5, VOCAB, rng(7))
    assert random_caption(["x y", "z w", "u v"], rng(7)) == random_caption(
        ["x y", "z w", "u v"], rng(7)
    )
    assert len({permute_words(TEN, 0.5, rng(s)) for s in range(30)}) > 20


def test_vocabulary_order_does_not_change_the_result():
    shuffled = list(reversed(VOCAB))
    assert replace_words(TEN, 0.5, VOCAB, rng(3)) == replace_words(TEN, 0.5, shuffled, rng(3))


def test_permute_two_words_swaps_them():
    # n = 2, any gamma > 0 gives k = 2, and the only derangement of two is the swap.
    assert permute_words("dog runs", 0.1, rng(1)) == "runs dog"


def test_permute_with_repeated_words_still_changes_the_caption():
    # Eight "a" and one "b": most pairs of positions are two "a"s; the draw is
    # repeated until the chosen words differ, so the result always differs.
    text = "a a a a a a a a b"
    for seed in range(50):
        out = permute_words(text, 0.2, rng(seed))
        assert out != text
        assert sorted(out.split()) == sorted(text.split())


def test_permute_refuses_a_caption_of_one_repeated_word():
    with pytest.raises(ValueError, match="two different words"):
        permute_words("yes yes yes", 0.5, rng())
    with pytest.raises(ValueError, match="caption"):
        permute_words("   ", 0.5, rng())


def test_replace_refuses_a_vocabulary_without_two_words():
    with pytest.raises(ValueError, match="vocabulary"):
        replace_words(TEN, 0.5, ["cat", "Cat"], rng())


def test_random_caption_draws_uniformly_from_others():
    others = ["one caption", "two caption", "three caption"]
    draws = Counter(random_caption(others, rng(seed)) for seed in range(3000))
    assert set(draws) == set(others)
    # Each has probability 1/3: 1000 expected, sd = sqrt(3000 * 1/3 * 2/3) = 25.8.
    assert all(abs(count - 1000) < 5 * 25.8 for count in draws.values())
    with pytest.raises(ValueError, match="others"):
        random_caption(["", "  "], rng())


def test_permute_positions_are_uniform():
    # k = 2 of 10 words: each position is chosen with probability 2/10.
    hits = Counter()
    runs = 2000
    for seed in range(runs):
        out = permute_words(TEN, 0.2, rng(seed)).split()
        hits.update(i for i, (x, y) in enumerate(zip(TEN.split(), out, strict=True)) if x != y)
    # expected 400 per position, sd = sqrt(2000 * 0.2 * 0.8) = 17.9
    assert all(abs(hits[i] - 400) < 5 * 17.9 for i in range(10))


def test_vocabulary_strips_punctuation_and_lowercases():
    assert vocabulary(["A dog.", "the Dog runs!", "--- 2 cats"]) == (
        "2",
        "a",
        "cats",
        "dog",
        "runs",
        "the",
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=" .,!?'\"()-aAbBéÉ1\u00a0\t\n", max_size=40), max_size=12))
def test_vocabulary_is_every_cleaned_word_of_every_token(captions):
    # The definition, token by token, against the function that cleans each distinct
    # token once.
    words = {token.strip(".,;:!?\"'()[]{}").lower() for text in captions for token in text.split()}
    assert vocabulary(captions) == tuple(sorted(w for w in words if any(c.isalnum() for c in w)))
