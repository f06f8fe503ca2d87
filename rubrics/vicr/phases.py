"""The phases of a player (PROTOCOLS.md section 2) and the draw of their gate pairs.

A pure state machine: ``next_state`` advances a frozen ``PlayerState`` by one finished
tutorial or probation block, or by one game rating.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from rubrics import checks

__all__ = [
    "Phase",
    "PhaseRules",
    "PlayerState",
    "block_draw",
    "first_game_outcome",
    "gate_order",
    "next_state",
    "probation_outcome",
    "tutorial_outcome",
]


class Phase(StrEnum):
    """Where a player is (section 2, Phases of a player)."""

    TUTORIAL = "tutorial"
    PROBATION = "probation"
    GAME = "game"
    EXCLUDED = "excluded"


def _check_points(points: Iterable[int], name: str, pairs: int | None) -> list[int]:
    if isinstance(points, str | bytes):
        raise ValueError(f"{name} must be a sequence of integer points")
    values = [checks.integer(p, f"each of {name}", -2, 2) for p in points]
    if pairs is not None and len(values) != pairs:
        raise ValueError(f"{name} must hold exactly {pairs} points, got {len(values)}")
    if not values:
        raise ValueError(f"{name} is empty")
    return values


def tutorial_outcome(
    points: Sequence[int], *, pass_mark: int = 10, pairs: int | None = 10
) -> Phase:
    """Tutorial result: GAME if the points sum to >= pass_mark (10 of 20), else PROBATION."""
    values = _check_points(points, "tutorial points", pairs)
    return Phase.GAME if sum(values) >= pass_mark else Phase.PROBATION


def probation_outcome(
    points: Sequence[int],
    *,
    attempt: int,
    pass_mark: int = 25,
    pairs: int | None = 20,
    max_attempts: int = 2,
) -> Phase:
    """Probation attempt ``attempt`` (1-based): GAME at >= 25 of 40, else retry or EXCLUDED."""
    values = _check_points(points, "probation points", pairs)
    max_attempts = checks.integer(max_attempts, "max_attempts", 1, 10**6)
    attempt = checks.integer(attempt, "attempt", 1, max_attempts)
    if sum(values) >= pass_mark:
        return Phase.GAME
    return Phase.PROBATION if attempt < max_attempts else Phase.EXCLUDED


def first_game_outcome(
    points: Sequence[int], *, ratings: int = 20, pass_mark: int = 25
) -> Phase | None:
    """First-20 rule: None until 20 game ratings, then GAME if they sum to >= 25 else PROBATION."""
    values = _check_points(points, "game points", None)
    ratings = checks.integer(ratings, "ratings", 1, 10**6)
    if len(values) < ratings:
        return None
    return Phase.GAME if sum(values[:ratings]) >= pass_mark else Phase.PROBATION


@dataclass(frozen=True, slots=True)
class PhaseRules:
    """Study thresholds for the phases, with the section 2 defaults."""

    tutorial_pairs: int = 10
    tutorial_pass: int = 10
    probation_pairs: int = 20
    probation_pass: int = 25
    max_probation_attempts: int = 2
    first_game_ratings: int = 20
    first_game_pass: int = 25


@dataclass(frozen=True, slots=True)
class PlayerState:
    """A player's position in the section 2 phase machine.

    ``score`` is the running game score (reset to 0 when the first-20 rule fails);
    ``game_ratings`` counts game ratings since the player last entered the game (it is what
    the first-20 rule looks at); ``probation_attempts`` counts every probation attempt the
    player has finished, over the whole history.
    """

    phase: Phase = Phase.TUTORIAL
    probation_attempts: int = 0
    score: int = 0
    game_ratings: int = 0


def next_state(
    state: PlayerState, points: Sequence[int] | int, rules: PhaseRules | None = None
) -> PlayerState:
    """Advance the section 2 phase machine by one finished block or one game rating.

    - TUTORIAL + the tutorial's points (``rules.tutorial_pairs`` values) -> GAME or PROBATION.
    - PROBATION + one attempt's points -> GAME, PROBATION (retry) or EXCLUDED once
      ``rules.max_probation_attempts`` attempts are used (counted over the whole history).
    - GAME + one rating's points (an int) -> GAME; at the ``rules.first_game_ratings``-th
      rating of a stay in the game, a sum below ``rules.first_game_pass`` resets the score to 0
      and sends the player back to PROBATION, or to EXCLUDED if no attempt is left.
    - EXCLUDED accepts nothing (ValueError).

    Entering the game starts a new stay: ``score`` and ``game_ratings`` are 0.
    """
    rules = rules or PhaseRules()
    if state.phase is Phase.EXCLUDED:
        raise ValueError("the player is excluded; no further ratings are scored")
    if state.phase is Phase.TUTORIAL:
        if isinstance(points, numbers.Number):
            raise ValueError("the tutorial is scored as a whole block of points")
        outcome = tutorial_outcome(
            points, pass_mark=rules.tutorial_pass, pairs=rules.tutorial_pairs
        )
        return replace(state, phase=outcome, score=0, game_ratings=0)
    if state.phase is Phase.PROBATION:
        if isinstance(points, numbers.Number):
            raise ValueError("a probation attempt is scored as a whole block of points")
        attempt = state.probation_attempts + 1
        if attempt > rules.max_probation_attempts:
            raise ValueError("no probation attempt is left")
        outcome = probation_outcome(
            points,
            attempt=attempt,
            pass_mark=rules.probation_pass,
            pairs=rules.probation_pairs,
            max_attempts=rules.max_probation_attempts,
        )
        return replace(state, phase=outcome, probation_attempts=attempt, score=0, game_ratings=0)
    # GAME: one rating at a time
    if not isinstance(points, numbers.Number):
        raise ValueError("the game is scored one rating (one int of points) at a time")
    value = checks.integer(points, "game points", -2, 2)
    score = state.score + value
    count = state.game_ratings + 1
    if count == rules.first_game_ratings and score < rules.first_game_pass:
        if state.probation_attempts >= rules.max_probation_attempts:
            return replace(state, phase=Phase.EXCLUDED, score=0, game_ratings=0)
        return replace(state, phase=Phase.PROBATION, score=0, game_ratings=0)
    return replace(state, score=score, game_ratings=count)


# --------------------------------------------------------------------------------------
# Gate draws: which tutorial and probation pairs a player gets (CapEval's choice)
# --------------------------------------------------------------------------------------


def gate_order(pool_size: int, *, study_seed: int, player: int, kind: str) -> list[int]:
    """One player's random order of a tutorial or probation pool (positions 0..pool_size-1).

    The paper gives every player the same 10 tutorial and 20 probation pairs; their truths
    are shown after each answer, so one scout id could write them down for every other id
    (and a failed probation attempt for the retry). Each player therefore gets the pool in an
    order of their own. The order sorts positions by SHA-256 of (study seed, player, kind,
    position): reproducible from the stored study seed and participant id on any Python
    version (``random.shuffle`` promises no such thing), and nothing is stored per player.
    """
    pool_size = checks.integer(pool_size, "pool_size", 0, 10**7)

    def key(position: int) -> bytes:
        return hashlib.sha256(f"{study_seed}:{player}:{kind}:{position}".encode()).digest()

    return sorted(range(pool_size), key=key)


def block_draw(
    pool_size: int, *, pairs: int, attempt: int, study_seed: int, player: int, kind: str
) -> list[int]:
    """The pool positions of a player's block ``attempt`` (0-based), in serving order.

    Attempt k is the k-th run of ``pairs`` positions of ``gate_order``: a probation retry
    (whether after a failed attempt or after failing the first game ratings) never serves
    a pair of an earlier attempt. ValueError if the pool is too small for that attempt.
    """
    pool_size = checks.integer(pool_size, "pool_size", 0, 10**7)
    pairs = checks.integer(pairs, "pairs", 1, 10**6)
    attempt = checks.integer(attempt, "attempt", 0, 10**6)
    needed = (attempt + 1) * pairs
    if pool_size < needed:
        raise ValueError(
            f"{kind} attempt {attempt + 1} needs {needed} pairs in the pool "
            f"({pairs} per attempt, none repeated), but it has {pool_size}"
        )
    order = gate_order(pool_size, study_seed=study_seed, player=player, kind=kind)
    return order[attempt * pairs : needed]
