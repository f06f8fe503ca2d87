"""How many more distinct players a VICR study's remaining game pairs need (issue 26).

A player rates a pair once (every lease is round 0, and the assignment service never
serves one player an item twice in a round), so a pair that still needs ``r`` ratings needs
``r`` players who have not rated it, each past the tutorial and probation. Each pair is its
own unit in ``rubrics.capacity``, where the bound is then exact (pairs never interact): the
most ``left + rated by players still in the game`` over the pairs with room left, less the
players still in the game. Players still in the game: every participant not excluded by the
gates (one in the tutorial may yet pass it, so counting them keeps the bound a lower bound).
Two numbers: to reach every pair's target (``max_ratings``, or less once adaptive stopping
settled it: what the dashboard's progress counts) and to give every pair its
``min_ratings``, the protocol's floor.
"""

from __future__ import annotations

from django.db.models import IntegerField, Value

from annotation.models import Participant, Study
from annotation.modes.base import WorkersNeeded, get_mode
from annotation.modes.capacity import unit_shortfall
from annotation.modes.vicr.protocol import EXCLUDED, GAME


def workers_needed(mode, study: Study) -> WorkersNeeded | None:
    """The bound for ``study`` with its reason; None when no game pair has room left."""
    config = get_mode(study.mode).settings(study)
    players = Participant.objects.filter(study_id=study.pk).exclude(status=EXCLUDED)
    bound = unit_shortfall(study, kinds=[GAME], unit="pk", players=players)
    if bound is None:
        return None
    if not bound.needed:
        return WorkersNeeded(0, "")
    floor = unit_shortfall(
        study,
        kinds=[GAME],
        unit="pk",
        players=players,
        wanted=Value(config.min_ratings, IntegerField()),
    )
    floor_needed = floor.needed if floor else 0
    left, count = bound.left, bound.players
    others = (
        f"{count - bound.met or 'none'} of the {count} player{'s' if count != 1 else ''} "
        "still in the study can give one"
        if count
        else "nobody has started yet"
    )
    reason = (
        f"A player rates each caption once: a game caption still needs {left} rating"
        f"{'s' if left != 1 else ''}, each from a different player past the tutorial and "
        f"probation, and {others}"
    )
    if floor_needed < bound.needed:
        reason += (
            f"; for the minimum of {config.min_ratings} rating"
            f"{'s' if config.min_ratings != 1 else ''} per caption, "
            f"{floor_needed or 'no'} more player{'s' if floor_needed != 1 else ''} would do"
        )
    return WorkersNeeded(bound.needed, reason + ".")
