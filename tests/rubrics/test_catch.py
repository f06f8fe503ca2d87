"""Tests for rubrics.catch: the catch-trial rules, against hand-worked cases."""

import numpy as np
import pytest

from rubrics.catch import (
    breaks_rule,
    caught_table,
    insert_probability,
    make_catch,
    parse_gammas,
    thumb_caught,
    vicr_caught,
)


@pytest.mark.parametrize(("rate", "p"), [(0, 0.0), (0.2, 0.25), (0.25, 1 / 3), (0.5, 1.0)])
def test_insert_probability_gives_the_rate_as_a_share_of_served_items(rate, p):
    assert insert_probability(rate) == pytest.approx(p)
    # catch trials / all items = p / (1 + p)
    assert p / (1 + p) == pytest.approx(rate)


def test_insert_probability_matches_the_share_in_a_simulation():
    rng = np.random.default_rng(1)
    p = insert_probability(0.2)
    normal, catch = 20_000, int((rng.random(20_000) < p).sum())
    assert catch / (normal + catch) == pytest.approx(0.2, abs=0.01)


@pytest.mark.parametrize("bad", [-0.1, 0.51, True, "0.1"])
def test_insert_probability_refuses_rates_outside_0_to_half(bad):
    with pytest.raises(ValueError, match="rate"):
        insert_probability(bad)


def test_parse_gammas():
    assert parse_gammas("1, 0.5;0.5") == (0.5, 1.0)
    for bad in ("", "0", "1.5", "x", "nan", ",".join(str(i / 20) for i in range(1, 12))):
        with pytest.raises(ValueError, match="gammas"):
            parse_gammas(bad)


def test_vicr_and_thumb_expected_answers():
    assert [vicr_caught(r) for r in (1, 2, 3, 4, 5)] == [True, True, False, False, False]
    assert thumb_caught("T_RC", 2, {}) and not thumb_caught("T_RC", 3, {})
    assert thumb_caught("T_WP", 5, {"word_order": None})
    assert not thumb_caught("T_RW", 5, {"word_order": None})  # a fluency error is T_WP's only


@pytest.mark.parametrize(
    ("seen", "missed", "breaks"),
    [(2, 2, False), (3, 1, False), (3, 2, True), (4, 2, False), (4, 3, True), (3, 3, True)],
)
def test_rule_needs_min_seen_and_strictly_more_than_the_share_missed(seen, missed, breaks):
    assert breaks_rule(seen, missed, min_seen=3, max_missed_share=0.5) is breaks


def test_caught_table_hand_worked():
    rows = [
        ("T_WP", 1.0, True),
        ("T_RC", None, False),
        ("T_WP", 0.5, True),
        ("T_WP", 0.5, False),
        ("T_RC", None, True),
        ("T_RC", None, True),
    ]
    assert caught_table(rows) == [
        {"kind": "T_RC", "gamma": None, "n": 3, "caught": 2, "share": 2 / 3},
        {"kind": "T_WP", "gamma": 0.5, "n": 2, "caught": 1, "share": 0.5},
        {"kind": "T_WP", "gamma": 1.0, "n": 1, "caught": 1, "share": 1.0},
    ]


def test_make_catch_draws_every_transformation_and_skips_those_that_cannot_apply():
    kinds = set()
    for seed in range(60):
        made = make_catch(
            source="a dog runs on the grass",
            others=["a cat sleeps"],
            vocabulary=["tree", "car", "blue"],
            gammas=(0.5, 1.0),
            rng=np.random.default_rng(seed),
        )
        kinds.add(made.kind)
        if made.kind == "T_RC":
            assert (made.text, made.gamma) == ("a cat sleeps", None)
        else:
            assert made.gamma in (0.5, 1.0) and made.text != "a dog runs on the grass"
    assert kinds == {"T_RC", "T_WP", "T_RW"}
    # No other caption and one repeated word: only T_RW can apply.
    made = make_catch(
        source="yes yes",
        others=[],
        vocabulary=["tree", "car"],
        gammas=(1.0,),
        rng=np.random.default_rng(0),
    )
    assert made.kind == "T_RW"
    with pytest.raises(ValueError):
        make_catch(
            source="yes yes",
            others=[],
            vocabulary=["x"],
            gammas=(1.0,),
            rng=np.random.default_rng(0),
        )
