"""VICR gates: what a player is told at the end of a block, and the rules that keep the
tutorial and probation from being learned by one id and replayed by another.

The transition messages moved here from ``protocol`` unchanged; the pool rule and the
replay flag are issue 29's (docs/protocol-choices.md "Crowd integrity, round two: VICR").
"""

from __future__ import annotations

from typing import Any

from annotation.models import Judgment, Participant
from annotation.modes.vicr.settings import VicrSettings
from rubrics import gate_replay as gate_replay_rules
from rubrics import vicr as rules

# ``protocol``'s phase names (not imported from there, which imports this module).
TUTORIAL, PROBATION, GAME = rules.Phase.TUTORIAL, rules.Phase.PROBATION, rules.Phase.GAME


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


def gate_screen_out(kind: str, before: rules.PlayerState, config: VicrSettings) -> str:
    """Why the gates turned the player away (``Outcome.screen_out``): the last probation
    attempt failed, or the first-game check failed with no probation attempt left."""
    attempts = config.max_probation_attempts
    if kind in (TUTORIAL, PROBATION):
        return f"failed probation ({attempts} attempt{'s' if attempts != 1 else ''})"
    return (
        f"failed the first-game check ({config.first_game_ratings} ratings) with no "
        "probation attempt left"
    )


# ---------------------------------------------------------------------- issue 29

#: Integrity flag kind of the replayed-gate rule (shown with the other flags).
REPLAY_FLAG = "gate_replay"
#: What a flagged player reads (``Outcome.hold``): the code waits for the researcher's review
#: (issue 45, row 6: the flag alone left the replayer paid). It says what, not how the rule
#: measures it.
REPLAY_HOLD = (
    "Your game ratings agreed with the other players far less than your practice answers "
    "agreed with the expert ratings, so the researcher reviews your work before the "
    "completion code is given."
)


def pool_needed(config: VicrSettings, kind: str) -> tuple[int, str]:
    """Pairs a tutorial or probation pool needs, and the refusal's words for a smaller one.

    One player's draw (``tutorial_pairs``; ``probation_pairs`` x ``max_probation_attempts``,
    none repeated) times ``gate_pool_multiple``: with a pool k times the draw, the truths one
    scout id reads from the feedback cover about 1/k of a second id's draw, so replaying
    them is worth about 1/k of full marks.
    """
    multiple = config.gate_pool_multiple
    if kind == TUTORIAL:
        draw, why = config.tutorial_pairs, f"tutorial_pairs {config.tutorial_pairs}"
    else:
        attempts = config.max_probation_attempts
        draw = config.probation_pairs * attempts
        why = (
            f"probation_pairs {config.probation_pairs} x max_probation_attempts {attempts}, "
            "none repeated"
        )
    needed = draw * multiple
    return needed, (
        f"one player needs {draw} ({why}) and the pool must hold gate_pool_multiple "
        f"{multiple} x that: {needed} pairs"
    )


def replay_flags(
    participant: Participant, judgment: Judgment, config: VicrSettings
) -> tuple[dict[str, str], ...]:
    """The replayed-gate flag for a game rating, as ``Outcome.flags``; () when none.

    Checked once, at the player's ``first_game_ratings``-th game rating as ``game_total``
    counts them (catch trials included; this judgment, not stored yet, included). Practice
    answers are every tutorial and probation rating of the player; game ratings every
    game rating, catch trials left out (their consensus is fixed, not other players').
    """
    total = (participant.state or {}).get("game_total", 0) + 1
    if total != config.first_game_ratings or not config.replay_gap:
        return ()
    gate = [
        (int(rating), int(truth))
        for rating, truth in Judgment.objects.filter(
            participant_id=participant.pk, item__kind__in=(TUTORIAL, PROBATION)
        ).values_list("payload__rating", "result__truth")
    ]
    game = [
        (int(rating), consensus)
        for rating, consensus in Judgment.objects.filter(
            participant_id=participant.pk, item__kind=GAME
        ).values_list("payload__rating", "result__consensus")
    ]
    if judgment.item.kind == GAME:  # a catch trial counts towards the total, not here
        game.append((judgment.payload["rating"], judgment.result.get("consensus")))
    found = gate_replay_rules.gate_replay(gate, game)
    if not found.suspected(config.replay_gap):
        return ()
    return ({"kind": REPLAY_FLAG, "detail": found.detail()},)
