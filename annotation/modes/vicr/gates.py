"""VICR gates: what a player is told at the end of a block, and the rules that keep the
tutorial and probation from being learned by one id and replayed by another.

The transition messages moved here from ``protocol`` unchanged; the pool rule and the
replay flag are issue 29's (docs/protocol-choices.md "Crowd integrity, round two: VICR").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rubrics import vicr as rules

if TYPE_CHECKING:
    from annotation.modes.vicr.protocol import VicrSettings

# ``protocol``'s phase names (not imported from there, which imports this module).
TUTORIAL, GAME = str(rules.Phase.TUTORIAL), str(rules.Phase.GAME)


def _block_transition(
    kind: str, after: rules.PlayerState, total: int, maximum: int, config: VicrSettings
) -> dict[str, Any]:
    """What the player is told at the end of a tutorial or probation attempt."""
    needed = config.block_pass(kind)
    name = "the tutorial" if kind == TUTORIAL else "probation"
    if after.phase == rules.Phase.GAME:
        message = f"You passed {name} with {total} of {maximum} points. On to the game!"
    elif after.phase == rules.Phase.PROBATION and kind == TUTORIAL:
        message = (
            f"The tutorial gave you {total} of {maximum} points; {needed} are needed. "
            f"Next comes probation: more practice pairs with expert ratings "
            f"({config.probation_pass} points needed to join the game)."
        )
    elif after.phase == rules.Phase.PROBATION:
        message = (
            f"This probation attempt gave you {total} of {maximum} points; {needed} are "
            f"needed. You may try again: attempt {after.probation_attempts + 1} of "
            f"{config.max_probation_attempts}."
        )
    else:
        message = (
            f"This probation attempt gave you {total} of {maximum} points; {needed} are "
            f"needed, and no attempt is left. Thank you for playing; you cannot rate more "
            f"pairs in this study."
        )
    return {
        "from": kind,
        "to": str(after.phase),
        "total": total,
        "maximum": maximum,
        "message": message,
    }


def _first_game_transition(
    total: int, after: rules.PlayerState, config: VicrSettings
) -> dict[str, Any]:
    """What a player the first-game check sends away from the game is told."""
    first, needed = config.first_game_ratings, config.first_game_pass
    message = f"Your first {first} game ratings scored {total} of the {needed} needed: "
    if after.phase == rules.Phase.PROBATION:
        message += "your score is reset and you go back to probation."
    else:
        message += (
            "your score is reset, and no probation attempt is left, so you cannot rate "
            "more pairs in this study. Thank you for playing."
        )
    return {
        "from": GAME,
        "to": str(after.phase),
        "total": total,
        "maximum": 2 * first,
        "message": message,
    }
