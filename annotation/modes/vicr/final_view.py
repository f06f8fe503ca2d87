"""What the VICR report reads, and its final view with the agreement computed over it.

:func:`load` reads a study's game pairs, players and stored game ratings once
(:class:`GameRatings`). :func:`final_view` keeps the ratings of players in good standing
(status ``game``) that are not flagged as excluded (:class:`FinalView`); the rating
distribution and the virtual-rater agreement (``rubrics.vicr.virtual_raters``) are computed
over its pairs. Each result is frozen; the report serialises it at the edge.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from annotation.models import Item, Judgment, Participant, Study
from annotation.modes.vicr.protocol import GAME
from rubrics import vicr as rules

AGREEMENT_LABELS = {
    "tau_x_yz": "τ X–YZ",
    "tau_y_xz": "τ Y–XZ",
    "tau_z_xy": "τ Z–XY",
    "kendall_w": "Kendall's W",
    "fleiss_kappa": "Fleiss' κ",
}

#: One stored game rating: (item id, participant id, rating, dwell ms, excluded).
Row = tuple[int, int, Any, int, bool]


@dataclass(frozen=True)
class GameRatings:
    """A study's game pairs in serving order, its players by pk and every stored game rating
    in commit (id) order."""

    game_items: tuple[int, ...]
    people: dict[int, dict[str, Any]]
    rows: tuple[Row, ...]

    @property
    def good(self) -> frozenset[int]:
        """Players in good standing: their ratings make the final view."""
        return frozenset(pk for pk, person in self.people.items() if person["status"] == GAME)

    @property
    def kept(self) -> tuple[Row, ...]:
        """The ratings not flagged as excluded."""
        return tuple(row for row in self.rows if not row[4])

    @property
    def imported(self) -> bool:
        """Imported datasets stand one participant per rating position."""
        return any(person["state"].get("imported") for person in self.people.values())


def load(study: Study) -> GameRatings:
    """Read the study's game pairs, players and game ratings (three queries)."""
    game_items = Item.objects.filter(study=study, kind=GAME).order_by("position", "id")
    people = {
        pk: {"pseudonym": pseudonym, "status": status, "state": state or {}}
        for pk, pseudonym, status, state in Participant.objects.filter(study=study).values_list(
            "pk", "pseudonym", "status", "state"
        )
    }
    rows = (
        Judgment.objects.filter(study=study, item__kind=GAME)
        .order_by("id")
        .values_list("item_id", "participant_id", "payload__rating", "dwell_ms", "excluded")
    )
    return GameRatings(
        game_items=tuple(game_items.values_list("id", flat=True)),
        people=people,
        rows=tuple(rows),
    )


@dataclass(frozen=True)
class FinalView:
    """The final view's ratings per pair, and what was stored.

    ``final`` maps a game pair to its final-view ratings; ``stored`` counts every kept
    (not excluded) rating per pair, whoever gave it; ``players`` are those with a rating in
    the final view; ``pair_ratings`` lists the non-empty pairs in serving order.
    """

    final: dict[int, list[int]]
    stored: Counter[int]
    players: frozenset[int]
    pair_ratings: tuple[list[int], ...]

    def included(self) -> dict[str, int]:
        return {
            "pairs": len(self.pair_ratings),
            "pairs_virtual": sum(1 for r in self.pair_ratings if len(r) >= 3),
            "players": len(self.players),
            "ratings": sum(len(r) for r in self.pair_ratings),
            "game_ratings": sum(self.stored.values()),
        }

    def coverage(self, game_items: tuple[int, ...]) -> list[dict[str, Any]]:
        """Pairs by stored and by final-view ratings: 0, 1, 2, 3 or more."""
        stored = Counter(min(self.stored.get(item_id, 0), 3) for item_id in game_items)
        final = Counter(min(len(self.final.get(item_id, [])), 3) for item_id in game_items)
        return [
            {"label": label, "pairs": stored.get(k, 0), "final": final.get(k, 0)}
            for k, label in enumerate(("0", "1", "2", "3 or more"))
        ]


def final_view(data: GameRatings) -> FinalView:
    """Keep the unexcluded ratings of players in good standing, per pair."""
    good = data.good
    final: dict[int, list[int]] = defaultdict(list)
    stored: Counter[int] = Counter()
    players: set[int] = set()
    for item_id, participant_id, rating, _dwell, excluded in data.rows:
        if excluded:
            continue
        stored[item_id] += 1
        if participant_id in good:
            final[item_id].append(int(rating))
            players.add(participant_id)
    return FinalView(
        final=final,
        stored=stored,
        players=frozenset(players),
        pair_ratings=tuple(final[item_id] for item_id in data.game_items if final.get(item_id)),
    )


def distribution(pair_ratings: tuple[list[int], ...], levels: int) -> list[dict[str, Any]]:
    """Pairs per rounded mean rating, one row per level (``rubrics.vicr.rating_distribution``)."""
    histogram = (
        rules.rating_distribution(pair_ratings, levels=levels)
        if pair_ratings
        else {level: 0 for level in range(1, levels + 1)}
    )
    return [
        {"level": lv, "label": rules.SCALE_LABELS.get(lv, ""), "pairs": histogram[lv]}
        for lv in range(1, levels + 1)
    ]


@dataclass(frozen=True)
class Agreement:
    """Virtual-rater agreement, one row per statistic, or ``error`` when it is undefined."""

    rows: tuple[dict[str, Any], ...] | None
    error: str

    def as_rows(self) -> list[dict[str, Any]] | None:
        return None if self.rows is None else list(self.rows)


def agreement(
    pair_ratings: tuple[list[int], ...],
    *,
    repetitions: int,
    seed: int,
    collapse_top: bool,
    levels: int,
) -> Agreement:
    """The virtual raters' mean and standard deviation per statistic (x100)."""
    try:
        values = rules.virtual_raters(
            pair_ratings,
            repetitions=repetitions,
            seed=seed,
            collapse_top=collapse_top,
            levels=levels,
        )
    except ValueError as exc:
        return Agreement(rows=None, error=str(exc))
    return Agreement(
        rows=tuple(
            {"key": key, "label": AGREEMENT_LABELS[key], **values[key]}
            for key in rules.VIRTUAL_RATER_KEYS
        ),
        error="",
    )
