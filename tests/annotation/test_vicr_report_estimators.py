"""The VICR report's estimators alone, on hand-worked rows (no database): the final view,
each player against the others' consensus, the agreement error and the Wright map's bins.

The whole report over a study is tested in test_mode_vicr.py; these pin each piece."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from annotation.modes.vicr import competency, final_view, players
from annotation.modes.vicr.protocol import GAME
from rubrics import rasch

# Players 1 and 2 are in the game, 3 is excluded. Pair 10: 1 rates 4, 2 rates 2, 3 rates 3;
# pair 11: 1 rates 5, and 2's rating 1 is flagged as excluded; pair 12 has no rating.
PEOPLE = {
    1: {"pseudonym": "ann", "status": GAME, "state": {"player": {"score": 7}}},
    2: {"pseudonym": "bob", "status": GAME, "state": {"player": {"score": 7}}},
    3: {"pseudonym": "cat", "status": "excluded", "state": {}},
}
ROWS = (
    (10, 1, 4, 1000, False),
    (10, 2, 2, 3000, False),
    (10, 3, 3, 2000, False),
    (11, 1, 5, 4000, False),
    (11, 2, 1, 500, True),
)
DATA = final_view.GameRatings(game_items=(10, 11, 12), people=PEOPLE, rows=ROWS)


def test_the_final_view_keeps_unexcluded_ratings_of_players_in_the_game():
    view = final_view.final_view(DATA)
    assert view.pair_ratings == ([4, 2], [5])
    assert view.players == {1, 2}
    # Stored ratings count every unexcluded rating, the excluded player's included.
    assert view.included() == {
        "pairs": 2,
        "pairs_virtual": 0,
        "players": 2,
        "ratings": 3,
        "game_ratings": 4,
    }
    coverage = {row["label"]: (row["pairs"], row["final"]) for row in view.coverage((10, 11, 12))}
    assert coverage == {"0": (1, 1), "1": (1, 1), "2": (0, 1), "3 or more": (1, 0)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.players = frozenset()  # type: ignore[misc]


def test_each_rating_is_compared_with_the_others_consensus():
    comparisons = players.compare_with_others(DATA.kept, DATA.good, levels=5)
    # On pair 10: ann's others are bob (2), bob's are ann (4), cat's (not counted) both:
    # round half up of 3 = 3. On pair 11 ann rated alone among kept ratings: 0.
    assert comparisons.others.tolist() == [2, 4, 3, 0]
    assert comparisons.compared.tolist() == [True, True, True, False]
    # Section 4's scores: |4-2| = 2 -> 0, |2-4| -> 0, |3-3| -> 2.
    assert comparisons.scores().tolist() == [0, 0, 2]


def test_the_player_table_ranks_and_compares():
    comparisons = players.compare_with_others(DATA.kept, DATA.good, levels=5)
    rows = {row.pseudonym: row for row in players.player_table(PEOPLE, DATA.kept, comparisons)}
    # ann and bob share a score of 7: both rank 1; cat is off the game, unranked.
    assert (rows["ann"].rank, rows["bob"].rank, rows["cat"].rank) == (1, 1, None)
    assert (rows["ann"].ratings, rows["ann"].compared, rows["ann"].exact) == (2, 1, 0.0)
    assert rows["cat"].exact == 1.0 and rows["cat"].adjacent == 0.0
    # ann's dwell times 1 s and 4 s: median 2.5 s; bob's excluded rating is not counted.
    assert rows["ann"].median_dwell_s == pytest.approx(2.5)
    assert (rows["bob"].ratings, rows["bob"].median_dwell_s) == (1, pytest.approx(3.0))
    assert list(rows["ann"].as_dict()) == [field.name for field in dataclasses.fields(rows["ann"])]


def test_agreement_reports_why_it_is_undefined():
    result = final_view.agreement(
        ([4, 2], [5]), repetitions=10, seed=0, collapse_top=False, levels=5
    )
    assert result.as_rows() is None
    assert result.error.startswith("virtual raters need at least 2 pairs")


def test_distribution_without_ratings_has_a_zero_row_per_level():
    rows = final_view.distribution((), levels=4)
    assert [(row["level"], row["pairs"]) for row in rows] == [(1, 0), (2, 0), (3, 0), (4, 0)]


def test_wright_map_bins_by_hand():
    # Lowest value -0.3 (an AA threshold), highest 0.9 (an EA threshold): a range of 1.2
    # logits keeps the 0.25-logit bins, aligned on multiples of 0.25 from -0.5.
    bins = competency.wright_map_bins(np.array([0.1, 0.6]), np.array([-0.3]), np.array([0.9]))
    width = competency.MAP_BIN_LOGITS
    assert bins.edges[0] == pytest.approx(-0.5)
    assert np.diff(bins.edges) == pytest.approx(width)
    assert bins.edges[0] <= -0.3 and bins.edges[-1] > 0.9

    def bin_of(value: float) -> int:
        return math.floor((value - bins.edges[0]) / width)

    assert [i for i, n in enumerate(bins.players) for _ in range(n)] == [bin_of(0.1), bin_of(0.6)]
    assert [i for i, n in enumerate(bins.aa) if n] == [bin_of(-0.3)]
    assert [i for i, n in enumerate(bins.ea) if n] == [bin_of(0.9)]
    assert bins.as_dict()["edges"] == list(bins.edges)


def test_wright_map_bins_widen_to_at_most_the_maximum():
    bins = competency.wright_map_bins(np.array([-20.0, 20.0]), np.array([0.0]), np.array([1.0]))
    assert len(bins.edges) - 1 <= competency.MAP_MAX_BINS + 2
    assert sum(bins.players) == 2 and sum(bins.aa) == 1 and sum(bins.ea) == 1


def test_misfit_flag_uses_linacres_ranges():
    assert competency.misfit_flag(rasch.MISFIT_HIGH + 0.1, 1.0) == "noisy"
    assert competency.misfit_flag(1.0, rasch.MISFIT_LOW - 0.1) == "too predictable"
    assert competency.misfit_flag(None, 1.0) == ""


def test_competency_without_comparisons_says_so():
    empty = np.zeros(0, dtype=np.int64)
    result = competency.competency(empty, empty, empty, people=PEOPLE, game_pairs=3)
    assert result.as_dict() == {"error": "no game rating has another rater on its pair yet"}
