"""The VICR report's player table: each player against the consensus of the others.

Per player, agreement is measured against the consensus of the *other* raters of each pair
(``rubrics.vicr.consensus_of_others`` over the final view; machine predictions are left out,
as in the rest of the report: they only prime the game's scoring of a pair's first ratings).
A pair the player rated alone is not compared, and the table says on how many pairs each
number rests. :func:`compare_with_others` gives the comparisons (:class:`Comparisons`, also
the input of the rater-competency model); :func:`player_table` the frozen rows.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from annotation.modes.vicr.final_view import Row
from annotation.modes.vicr.protocol import GAME
from rubrics import vicr as rules


@dataclass(frozen=True)
class Comparisons:
    """Aligned columns over the kept ratings: pair, player, rating, and the consensus of the
    pair's other final-view ratings (0 where there is none)."""

    item_ids: np.ndarray
    player_ids: np.ndarray
    ratings: np.ndarray
    others: np.ndarray

    @property
    def compared(self) -> np.ndarray:
        return self.others > 0

    def scores(self) -> np.ndarray:
        """VICR section 4's agreement scores (2, 1, 0) of the compared ratings."""
        compared = self.compared
        return rules.agreement_scores(self.ratings[compared], self.others[compared])


def compare_with_others(kept: tuple[Row, ...], good: frozenset[int], levels: int) -> Comparisons:
    """Each kept rating against the consensus of its pair's other final-view ratings."""
    item_ids = np.array([row[0] for row in kept], dtype=np.int64)
    player_ids = np.array([row[1] for row in kept], dtype=np.int64)
    ratings = np.array([int(row[2]) for row in kept], dtype=np.int64)
    counted = np.isin(player_ids, np.fromiter(good, dtype=np.int64, count=len(good)))
    others = rules.consensus_of_others(item_ids, ratings, counted, levels=levels)
    return Comparisons(item_ids=item_ids, player_ids=player_ids, ratings=ratings, others=others)


@dataclass(frozen=True)
class PlayerRow:
    """One player's line of the report; ``exact`` and ``adjacent`` are None when none of
    their ratings had another rater to compare with."""

    pseudonym: str
    status: str
    rank: int | None
    score: int
    game_points: Any
    tutorial_score: Any
    probation_attempts: int
    probation_scores: Any
    ratings: int
    compared: int
    exact: float | None
    adjacent: float | None
    median_dwell_s: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def player_table(
    people: dict[int, dict[str, Any]], kept: tuple[Row, ...], comparisons: Comparisons
) -> tuple[PlayerRow, ...]:
    """Every player, excluded ones included: the leaderboard's order (rank), then players off
    the game by ratings."""
    per_player, counts = _per_player(kept, comparisons)
    in_game = [pk for pk, person in people.items() if person["status"] == GAME]
    scores = rules.competition_ranks([player_score(people[pk]["state"]) for pk in in_game])
    ranks = dict(zip(in_game, scores, strict=True))
    rows = []
    for pk, person in people.items():
        state = person["state"]
        mine = per_player.get(pk)
        agreement = (
            rules.agreement_with_consensus(mine["x"], mine["r"]) if mine and mine["x"] else None
        )
        rows.append(
            PlayerRow(
                pseudonym=person["pseudonym"],
                status=person["status"],
                rank=ranks.get(pk),
                score=player_score(state),
                game_points=state.get("game_points", 0),
                tutorial_score=state.get("tutorial_score"),
                probation_attempts=int((state.get("player") or {}).get("probation_attempts", 0)),
                probation_scores=state.get("probation_scores", []),
                ratings=counts.get(pk, 0),
                compared=len(mine["x"]) if mine else 0,
                exact=agreement["exact"] if agreement else None,
                adjacent=agreement["adjacent"] if agreement else None,
                median_dwell_s=(statistics.median(mine["dwell"]) / 1000) if mine else None,
            )
        )
    rows.sort(key=lambda p: (p.rank is None, p.rank or 0, -p.ratings, p.pseudonym))
    return tuple(rows)


def _per_player(
    kept: Iterable[Row], comparisons: Comparisons
) -> tuple[dict[int, dict[str, list]], Counter[int]]:
    """Per player: compared ratings ``x`` with their consensus ``r``, and every dwell time;
    and the count of kept ratings."""
    per_player: dict[int, dict[str, list]] = defaultdict(lambda: {"x": [], "r": [], "dwell": []})
    counts: Counter[int] = Counter()
    for (_, participant_id, _, dwell, _), x, r in zip(
        kept, comparisons.ratings, comparisons.others, strict=True
    ):
        counts[participant_id] += 1
        per_player[participant_id]["dwell"].append(dwell)
        if r:
            per_player[participant_id]["x"].append(int(x))
            per_player[participant_id]["r"].append(int(r))
    return per_player, counts


def player_score(state: dict[str, Any]) -> int:
    """The player's running game score, as the phase machine stores it."""
    return int((state.get("player") or {}).get("score", 0))
