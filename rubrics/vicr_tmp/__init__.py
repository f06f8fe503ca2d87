"""VICR rating game: scale, Algorithm 1, phase rules and the virtual-rater report.

Everything here follows PROTOCOLS.md section 2 (distilled from Narins et al. 2023,
"Validated Image Caption Rating", sections 3.2 and 6). Pure Python + numpy, no Django.

Choices this module makes where the spec leaves room (each is repeated where it applies):

- Ratings given to the scalar rules (``tutorial_points``, ``consensus``, ``player_score``,
  ...) must be Python/numpy integers from 1 to 5; bools, floats (even ``3.0``) and strings
  raise ``ValueError``. The bulk helpers (``virtual_raters``, ``rating_distribution``,
  ``agreement_with_consensus``) also accept integer-valued floats such as ``3.0``, because
  published datasets (Flickr8k-Expert) store ratings that way; ``2.5``, NaN and bools are
  still rejected.
- Algorithm 1 is evaluated in exact rational arithmetic (``fractions.Fraction``), so the
  thresholds ``d <= 0.25, 0.5, 1, 1.75`` are compared exactly, never through a float.
- The first-20 game rule compares the *sum* of the points of the first 20 game ratings
  (of each stay in the game) with 25, decided at the 20th rating; probation attempts are
  counted over the player's whole history (see ``next_state``).
- Tutorial and probation pairs are drawn per player from larger pools (``gate_order``,
  ``block_draw``): each player gets their own order, and each probation attempt only pairs
  that player has not seen, so truths shown as feedback cannot be replayed.
- Virtual raters: the standard deviation over repetitions uses ``ddof=0`` (the paper does
  not say). ``collapse_top`` merges rating 5 into 4 for Fleiss' kappa only, and is off by
  default: the paper merged them only "because Fleiss' kappa is sensitive to the number of
  categories, and there are fewer categories in Flickr8k-Expert" (section 6), i.e. to
  compare with a 4-level dataset; on a 1-4 scale it changes nothing.
- A player's agreement with consensus is measured against the consensus of the *other*
  raters of the pair (``consensus_of_others``): a consensus that holds the player's own
  rating rewards the player for agreeing with themself (alone on a pair: 100%).
- Leaderboard ranks are standard competition ranks (``competition_ranks``: 1, 1, 3).
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction
from functools import cache, partial
from itertools import chain, combinations
from typing import Any, TypedDict

import numpy as np

from rubrics import agreement, checks

__all__ = [
    "LEVELS",
    "SCALE",
    "SCALE_LABELS",
    "V_MAX",
    "VIRTUAL_RATER_KEYS",
    "AgreementSummary",
    "Phase",
    "PhaseRules",
    "PlayerState",
    "ScaleLevel",
    "Score",
    "agreement_scores",
    "agreement_with_consensus",
    "block_draw",
    "competition_ranks",
    "consensus",
    "consensus_of_others",
    "consensus_pool",
    "draw_virtual_raters",
    "first_game_outcome",
    "gate_order",
    "next_state",
    "player_score",
    "points_for_distance",
    "probation_outcome",
    "rating_distribution",
    "score_rating",
    "tutorial_outcome",
    "tutorial_points",
    "virtual_rater_statistics",
    "virtual_rater_values",
    "virtual_raters",
]

# --------------------------------------------------------------------------------------
# Scale (PROTOCOLS.md section 2, paper Table 2)
# --------------------------------------------------------------------------------------

MIN_RATING = 1
MAX_RATING = 5
LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)
V_MAX = 4  # largest population variance of ratings on a 1-5 scale (Algorithm 1)
PRIMED_RATINGS = 2  # each game pair starts with 2 primed ratings (section 2, Priming)


class ScaleLevel(str):
    """One VICR scale level (section 2): the full text as a ``str``, plus ``level``/``label``."""

    level: int
    label: str

    def __new__(cls, level: int, label: str, text: str) -> ScaleLevel:
        obj = super().__new__(cls, text)
        obj.level = level
        obj.label = label
        return obj

    @property
    def text(self) -> str:
        """The full level text of PROTOCOLS.md section 2 as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScaleLevel, (self.level, self.label, self.text))


#: Short labels for buttons and charts (ours; the paper gives only the full texts).
SCALE_LABELS: dict[int, str] = {
    5: "Complete, with interpretation",
    4: "Mostly complete, with layout",
    3: "Objects right, no layout",
    2: "Partly right",
    1: "Wrong",
}

_SCALE_TEXTS: dict[int, str] = {
    5: (
        "Objects, a general scene, and actions are correctly identified if present in the "
        "image. The caption describes what is seen and where things are in space. "
        "Interpretation of overall setting and/or event is included."
    ),
    4: (
        "Objects and/or a general scene and/or an action are correctly identified but not "
        "every element is completely identified. The caption describes what is seen and "
        "where things are in space. There is no interpretation of an event."
    ),
    3: (
        "Relevant objects are correctly identified. The caption describes what is seen but "
        "not where objects are in space. There is no description of the overall setting and "
        "no interpretation of an event."
    ),
    2: (
        "Objects are partially correctly identified with some errors, but the caption is "
        "accurate enough to give an idea of what is happening in the image. The caption "
        "identifies most of the objects but might not identify everything. There is no "
        "interpretation of what anything means."
    ),
    1: (
        "Objects are incorrectly identified. The caption gives the wrong idea about what is "
        "happening in the image."
    ),
}

#: The 5 levels keyed 1..5 (highest first, as shown to players). Each value is the exact
#: text of PROTOCOLS.md section 2 (a ``str``) with ``.level``, ``.label`` and ``.text``.
SCALE: dict[int, ScaleLevel] = {
    level: ScaleLevel(level, SCALE_LABELS[level], _SCALE_TEXTS[level]) for level in (5, 4, 3, 2, 1)
}

# --------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------


def _check_rating(value: object, name: str = "rating") -> int:
    return checks.integer(value, name, MIN_RATING, MAX_RATING)


def _check_ratings(values: Iterable[object], name: str) -> list[int]:
    if isinstance(values, str | bytes):
        raise ValueError(f"{name} must be a sequence of integer ratings, got a string")
    return [_check_rating(v, f"each of {name}") for v in values]


def _check_levels(levels: int) -> int:
    return checks.integer(levels, "levels", 2, 9)


def _as_rating_array(values: object, name: str, levels: int = MAX_RATING) -> np.ndarray:
    """A flat int64 array of ratings in 1..levels; integer-valued floats accepted."""
    if isinstance(values, np.ndarray):
        flat_list: Sequence[object] | np.ndarray = values.ravel()
    elif isinstance(values, str | bytes):
        raise ValueError(f"{name} must be a sequence of ratings, got a string")
    else:
        flat_list = list(values)  # type: ignore[call-overload]
        if any(isinstance(v, bool | np.bool_) for v in flat_list):
            raise ValueError(f"{name} must be integer ratings; booleans are not ratings")
    array = np.asarray(flat_list)
    if array.dtype == np.bool_:
        raise ValueError(f"{name} must be integer ratings; booleans are not ratings")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be integer ratings, got values of type {array.dtype}")
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite values")
        if not np.all(array == np.round(array)):
            bad = array[array != np.round(array)][0]
            raise ValueError(f"{name} must be whole numbers, got {bad!r}")
    out = array.astype(np.int64)
    if out.min() < 1 or out.max() > levels:
        bad = out[(out < 1) | (out > levels)][0]
        raise ValueError(f"{name} must be from 1 to {levels}, got {bad}")
    return out


def _ragged(ratings: object, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Flatten one-sequence-per-pair ratings into (flat values, count per pair)."""
    if isinstance(ratings, np.ndarray):
        if ratings.ndim != 2:
            raise ValueError("ratings as an array must be 2-D (pairs x ratings)")
        counts = np.full(ratings.shape[0], ratings.shape[1], dtype=np.int64)
        return _as_rating_array(ratings, "ratings", levels), counts
    if isinstance(ratings, str | bytes):
        raise ValueError("ratings must be one sequence of ratings per pair, got a string")
    rows = list(ratings)  # type: ignore[call-overload]
    for row in rows:
        if isinstance(row, str | bytes) or not isinstance(row, Sequence | np.ndarray):
            raise ValueError(
                f"ratings must be one sequence of ratings per pair, got an element {row!r}"
            )
    counts = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    flat = _as_rating_array(list(chain.from_iterable(rows)), "ratings", levels)
    return flat, counts


# --------------------------------------------------------------------------------------
# Tutorial, consensus and Algorithm 1 (section 2)
# --------------------------------------------------------------------------------------


def tutorial_points(rating: int, truth: int) -> int:
    """Tutorial/probation points ``2 - |truth - rating|`` (section 2, Phases 1-2)."""
    return 2 - abs(_check_rating(truth, "truth") - _check_rating(rating))


def _round_half_up_mean(total: int, count: int) -> int:
    # floor(total / count + 1/2) in exact integer arithmetic
    return (2 * total + count) // (2 * count)


def consensus(pool: Iterable[int]) -> int:
    """Consensus ``r = round_half_up(mean(pool))`` (section 2, Algorithm 1); 3.5 -> 4."""
    values = _check_ratings(pool, "pool")
    if not values:
        raise ValueError("consensus of an empty pool is undefined (no ratings yet)")
    return _round_half_up_mean(sum(values), len(values))


def consensus_pool(human_ratings: Iterable[int], primed_ratings: Iterable[int]) -> list[int]:
    """Priming rule: humans plus the first ``max(0, 2 - humans)`` primed ratings (section 2)."""
    humans = _check_ratings(human_ratings, "human_ratings")
    primed = _check_ratings(primed_ratings, "primed_ratings")
    return humans + primed[: max(0, PRIMED_RATINGS - len(humans))]


_THRESHOLDS: tuple[tuple[Fraction, int], ...] = (
    (Fraction(1, 4), 2),
    (Fraction(1, 2), 1),
    (Fraction(1), 0),
    (Fraction(7, 4), -1),
)


def points_for_distance(d: Fraction | float | int) -> int:
    """Algorithm 1 ladder: d <= 0.25 -> 2, <= 0.5 -> 1, <= 1 -> 0, <= 1.75 -> -1, else -2."""
    if isinstance(d, bool) or not isinstance(d, Fraction | numbers.Real):
        raise ValueError(f"d must be a number, got {d!r}")
    if isinstance(d, Fraction | numbers.Integral):
        exact = Fraction(int(d)) if isinstance(d, numbers.Integral) else d
    else:
        value = float(d)
        if not np.isfinite(value):
            raise ValueError(f"d must be finite, got {d!r}")
        exact = Fraction(value)  # the float's exact value: 0.25 and 1.75 compare exactly
    if exact < 0:
        raise ValueError(f"d must be >= 0, got {d!r}")
    for threshold, points in _THRESHOLDS:
        if exact <= threshold:
            return points
    return -2


@dataclass(frozen=True, slots=True)
class _Algorithm1:
    r: int
    n: int
    var: Fraction
    v: Fraction
    d: Fraction
    points: int


def _algorithm1(rating: int, previous: list[int]) -> _Algorithm1:
    """Algorithm 1 in exact arithmetic; ``previous`` is non-empty and validated."""
    m = len(previous)
    total = sum(previous)
    r = _round_half_up_mean(total, m)
    n = m + 1
    var = Fraction(m * sum(x * x for x in previous) - total * total, m * m)  # ddof 0
    v = 1 + Fraction(1, n) * (1 + (n - 1) * var / V_MAX)
    d = abs(rating - r) / v
    return _Algorithm1(r=r, n=n, var=var, v=v, d=d, points=points_for_distance(d))


def player_score(rating: int, previous: Iterable[int]) -> int:
    """Points for ``rating`` against the consensus pool ``previous`` (Algorithm 1); empty -> 0."""
    x = _check_rating(rating)
    pool = _check_ratings(previous, "previous")
    if not pool:
        return 0
    return _algorithm1(x, pool).points


_LEVEL_WORDS = {1: "one level", 2: "two levels", 3: "three levels", 4: "four levels"}


@dataclass(frozen=True, slots=True)
class Score:
    """Everything the game feedback page shows for one rating (section 2, Algorithm 1).

    ``consensus``, ``var``, ``v`` and ``d`` are ``None`` when the pool is empty; ``n`` counts
    the pool plus the player's rating; ``var`` is the population variance (ddof 0) of the pool.
    """

    rating: int
    consensus: int | None
    points: int
    n: int
    var: float | None
    v: float | None
    d: float | None
    reason: str


def score_rating(rating: int, previous: Iterable[int]) -> Score:
    """Algorithm 1 with its intermediate values and a plain-words reason (section 2)."""
    x = _check_rating(rating)
    pool = _check_ratings(previous, "previous")
    if not pool:
        return Score(
            rating=x,
            consensus=None,
            points=0,
            n=1,
            var=None,
            v=None,
            d=None,
            reason="no consensus yet, so this rating scores 0 points",
        )
    result = _algorithm1(x, pool)
    distance = abs(x - result.r)
    if distance == 0:
        reason = "you matched the consensus"
    else:
        away = _LEVEL_WORDS[distance]
        # Would the same distance have scored fewer points if the raters had all agreed?
        strict = points_for_distance(Fraction(distance) / (1 + Fraction(1, result.n)))
        if result.points > strict:
            reason = f"{away} away, and raters disagreed on this one"
        elif result.var == 0 and len(pool) > 1:
            reason = f"{away} away from the consensus, and the raters so far all agreed"
        else:
            reason = f"{away} away from the consensus"
    return Score(
        rating=x,
        consensus=result.r,
        points=result.points,
        n=result.n,
        var=float(result.var),
        v=float(result.v),
        d=float(result.d),
        reason=reason,
    )


# --------------------------------------------------------------------------------------
# Phase rules (section 2, "Phases of a player")
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Report helpers (section 2, Report)
# --------------------------------------------------------------------------------------


class AgreementSummary(TypedDict):
    """Per-player agreement with consensus: counts and shares (section 2 Report; paper 4)."""

    n: int
    exact: float
    adjacent: float
    within_one: float
    exact_count: int
    adjacent_count: int


def agreement_with_consensus(ratings: Sequence[int], consensus: Sequence[int]) -> AgreementSummary:
    """Exact (|x-r|=0) and adjacent (|x-r|=1) agreement with consensus (section 2 Report)."""
    x = _as_rating_array(ratings, "ratings")
    r = _as_rating_array(consensus, "consensus")
    if x.size != r.size:
        raise ValueError(f"ratings ({x.size}) and consensus ({r.size}) differ in length")
    if x.size == 0:
        raise ValueError("agreement with consensus needs at least one rating")
    gap = np.abs(x - r)
    exact = int(np.count_nonzero(gap == 0))
    adjacent = int(np.count_nonzero(gap == 1))
    n = int(x.size)
    return AgreementSummary(
        n=n,
        exact=exact / n,
        adjacent=adjacent / n,
        within_one=(exact + adjacent) / n,
        exact_count=exact,
        adjacent_count=adjacent,
    )


def consensus_of_others(
    pairs: object, ratings: object, counted: object, levels: int = MAX_RATING
) -> np.ndarray:
    """Per rating, the consensus of the *other* counted ratings of its pair; 0 where none.

    ``pairs`` (any ids), ``ratings`` (1..levels) and ``counted`` (bools: the rating is in
    the pair's consensus pool, e.g. the report's final view) are aligned columns. The
    consensus is ``round_half_up(mean)`` (section 2) of the pair's counted ratings, less the
    rating itself when it is counted: leave-one-out, so that a player is never compared with
    a consensus made of their own rating. 0 marks a rating with no other counted rating on
    its pair (there is nothing to agree with). Exact integer arithmetic, vectorised.
    """
    levels = _check_levels(levels)
    x = _as_rating_array(ratings, "ratings", levels)
    ids = checks.id_array(pairs, "pairs") if x.size else np.zeros(0, dtype=np.int64)
    own = np.asarray(counted)
    if own.dtype != np.bool_ or own.ndim != 1:
        raise ValueError("counted must be a 1-D array of booleans")
    if not ids.size == x.size == own.size:
        raise ValueError(
            f"pairs ({ids.size}), ratings ({x.size}) and counted ({own.size}) differ in length"
        )
    if x.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, pair = np.unique(ids, return_inverse=True)
    totals = np.bincount(pair, weights=np.where(own, x, 0)).astype(np.int64)
    counts = np.bincount(pair, weights=own).astype(np.int64)
    others_total = totals[pair] - np.where(own, x, 0)
    others = counts[pair] - own.astype(np.int64)
    safe = np.maximum(others, 1)
    return np.where(others > 0, (2 * others_total + safe) // (2 * safe), 0)


def agreement_scores(ratings: object, references: object) -> np.ndarray:
    """VICR section 4's rubric: 2 for exact agreement (EA), 1 adjacent (AA), 0 otherwise (LA).

    "When a user rated an item exactly as the ground-truth ... a score of 2 ... off by one
    ... a score of 1 ... differed by more than one ... a score of 0." The reference is the
    ground truth or, in the game, the consensus of the other raters.
    """
    x = _as_rating_array(ratings, "ratings")
    r = _as_rating_array(references, "references")
    if x.size != r.size:
        raise ValueError(f"ratings ({x.size}) and references ({r.size}) differ in length")
    return 2 - np.minimum(np.abs(x - r), 2)


def competition_ranks(scores: Sequence[int]) -> list[int]:
    """Standard competition ranks of scores, highest first: 12, 9, 9, 7 -> 1, 2, 2, 4.

    Players with equal scores share a rank, and the next rank skips as many places as
    shared it ("1224" ranking); the input order is kept.
    """
    values = [checks.integer(score, "each score", -(10**12), 10**12) for score in scores]
    return [1 + sum(other > value for other in values) for value in values]


def rating_distribution(ratings: Iterable[Sequence[int]], levels: int = 5) -> dict[int, int]:
    """Histogram of each pair's rounded (half up) mean rating, keyed 1..levels (section 2).

    Pairs without any rating have no mean and are not counted.
    """
    levels = _check_levels(levels)
    flat, counts = _ragged(ratings, levels)
    rated = counts > 0
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if counts.size else counts
    totals = np.add.reduceat(flat, starts[rated]) if flat.size else np.zeros(0, np.int64)
    rounded = (2 * totals + counts[rated]) // (2 * counts[rated])
    histogram = np.bincount(rounded, minlength=levels + 1)
    return {level: int(histogram[level]) for level in range(1, levels + 1)}


# --------------------------------------------------------------------------------------
# Virtual raters (section 2 Report; paper section 6 and Table 3)
# --------------------------------------------------------------------------------------

VIRTUAL_RATER_KEYS: tuple[str, ...] = (
    "tau_x_yz",
    "tau_y_xz",
    "tau_z_xy",
    "kendall_w",
    "fleiss_kappa",
)
_RATERS = 3
_CODE_TABLE_MAX_CELLS = 4_000_000


@cache
def _colex_triples(k: int) -> np.ndarray:
    """All 3-subsets of range(k) in colex order, so those of range(j) are the first C(j, 3)."""
    triples = sorted(combinations(range(k), 3), key=lambda t: (t[2], t[1], t[0]))
    table = np.array(triples, dtype=np.int64).reshape(-1, 3)
    table.setflags(write=False)
    return table


@dataclass(frozen=True, slots=True)
class _Pairs:
    values: np.ndarray  # (pairs, width) each row's ratings sorted ascending, 0-based, 0-padded
    counts: np.ndarray  # (pairs,) number of ratings per pair, all >= 3


def _prepare(ratings: object, levels: int) -> _Pairs:
    flat, counts = _ragged(ratings, levels)
    rows = np.repeat(np.arange(counts.size), counts)
    starts = np.cumsum(counts) - counts
    cols = np.arange(flat.size) - np.repeat(starts, counts)
    width = int(counts.max()) if counts.size else 0
    matrix = np.full((counts.size, max(width, _RATERS)), levels, dtype=np.int64)
    matrix[rows, cols] = flat - 1
    keep = counts >= _RATERS
    values = np.sort(matrix[keep], axis=1)
    values[values == levels] = 0  # padding (sorted last) becomes a harmless 0
    kept = int(np.count_nonzero(keep))
    if kept < 2:
        raise ValueError(f"virtual raters need at least 2 pairs with 3 or more ratings, got {kept}")
    return _Pairs(values=values, counts=counts[keep])


def _draw_indices(counts: np.ndarray, repetitions: int, seed: int | None) -> np.ndarray:
    """Uniform index of a 3-subset (colex order) per repetition and pair."""
    rng = np.random.default_rng(seed)
    # C(k, 3) as an exact int64 vector
    highs = counts * (counts - 1) * (counts - 2) // 6
    return rng.integers(0, highs, size=(repetitions, counts.size))


def _check_draw_args(repetitions: int, seed: int | None) -> int:
    repetitions = checks.integer(repetitions, "repetitions", 1, 10**6)
    if seed is not None:
        checks.integer(seed, "seed", 0, 2**63 - 1)
    return repetitions


def draw_virtual_raters(
    ratings: Iterable[Sequence[int]],
    repetitions: int = 100,
    seed: int | None = 0,
    levels: int = 5,
) -> np.ndarray:
    """The X <= Y <= Z virtual-rater draws of section 2 Report: (repetitions, pairs, 3) ints.

    Per repetition and pair, 3 of the pair's ratings are drawn without replacement
    (uniformly among its 3-subsets) and sorted; pairs with fewer than 3 ratings are left out
    and the others keep their order. ``virtual_rater_values`` uses exactly these draws.
    """
    levels = _check_levels(levels)
    repetitions = _check_draw_args(repetitions, seed)
    pairs = _prepare(ratings, levels)
    index = _draw_indices(pairs.counts, repetitions, seed)
    positions = _colex_triples(pairs.values.shape[1])[index]  # (reps, pairs, 3)
    rows = np.arange(pairs.counts.size)[None, :, None]
    return pairs.values[rows, positions] + 1


def _triple_codes(pairs: _Pairs, index: np.ndarray, levels: int) -> np.ndarray:
    """Code x*L^2 + y*L + z (0-based sorted values) of each drawn triple, (reps, pairs)."""
    table = _colex_triples(pairs.values.shape[1])
    n_pairs = pairs.counts.size
    weights = np.array([levels * levels, levels, 1], dtype=np.int64)
    if n_pairs * table.shape[0] <= _CODE_TABLE_MAX_CELLS:
        # every pair's code for each of its possible triples, then one gather
        codes_per_pair = pairs.values[:, table] @ weights  # (pairs, C(width, 3))
        return codes_per_pair[np.arange(n_pairs)[None, :], index]
    flat = pairs.values.ravel()
    base = (np.arange(n_pairs) * pairs.values.shape[1])[None, :]
    codes = np.zeros(index.shape, dtype=np.int64)
    for column, weight in enumerate(weights):
        codes += flat[base + table[index, column]] * weight
    return codes


@cache
def _code_digits(levels: int) -> np.ndarray:
    """Row c holds the 0-based (x, y, z) of triple code c = x*L^2 + y*L + z."""
    digits = np.stack(np.unravel_index(np.arange(levels**3), (levels,) * 3), axis=-1)
    digits = digits.astype(np.int64)
    digits.setflags(write=False)
    return digits


def _statistics(values: np.ndarray, levels: int, collapse_top: bool) -> np.ndarray:
    """All five statistics (x100) of sorted 0-based draws (reps, pairs, 3), per repetition."""
    joint = agreement.batched_joint_counts(values, levels)  # (reps, L, L, L)
    xy, xz, yz = joint.sum(axis=3), joint.sum(axis=2), joint.sum(axis=1)
    # Kendall tau_c "method A": the candidate repeated once per reference rater against the
    # references concatenated; tabulating those vectors is summing the pairwise tables.
    tables = (xy + xz, xy.swapaxes(-1, -2) + yz, (xz + yz).swapaxes(-1, -2))
    # rating 5 (code 4) merged into 4 for Fleiss' kappa only; higher levels are left alone
    kappa_codes = np.where(values == 4, 3, values) if collapse_top and levels >= 5 else values
    statistics = (
        *(partial(agreement.batched_kendall_tau_from_tables, table, "c") for table in tables),
        partial(agreement.batched_kendall_w_from_codes, values, levels),
        partial(agreement.batched_fleiss_kappa_from_codes, kappa_codes, levels),
    )
    out = np.empty((values.shape[0], len(VIRTUAL_RATER_KEYS)), dtype=np.float64)
    for column, (key, statistic) in enumerate(zip(VIRTUAL_RATER_KEYS, statistics, strict=True)):
        try:
            out[:, column] = statistic()
        except ValueError as exc:  # a 0/0 statistic; agreement's batch index = repetition
            reason = str(exc).partition(" is undefined: ")[2] or str(exc)
            raise ValueError(f"{key} is undefined: {reason}") from exc
    return out * 100.0


def virtual_rater_statistics(
    triples: np.ndarray, levels: int = 5, collapse_top: bool = False
) -> np.ndarray:
    """Section 2 Report statistics (x100) of given draws (repetitions, pairs, 3) or (pairs, 3).

    Columns follow ``VIRTUAL_RATER_KEYS``; each row of a draw must be sorted (X <= Y <= Z).
    """
    levels = _check_levels(levels)
    array = np.asarray(triples)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or array.shape[2] != _RATERS:
        raise ValueError("triples must have shape (repetitions, pairs, 3) or (pairs, 3)")
    values = _as_rating_array(array, "triples", levels).reshape(array.shape) - 1
    if np.any(np.diff(values, axis=2) < 0):
        raise ValueError("each triple must be sorted so that X <= Y <= Z")
    if values.shape[1] < 2:
        raise ValueError(f"virtual raters need at least 2 pairs, got {values.shape[1]}")
    return _statistics(values, levels, collapse_top)


def virtual_rater_values(
    ratings: Iterable[Sequence[int]],
    repetitions: int = 100,
    seed: int | None = 0,
    collapse_top: bool = False,
    levels: int = 5,
) -> np.ndarray:
    """Per-repetition virtual-rater statistics (x100), shape (repetitions, 5) (section 2)."""
    levels = _check_levels(levels)
    repetitions = _check_draw_args(repetitions, seed)
    if not isinstance(collapse_top, bool):
        raise ValueError(f"collapse_top must be a bool, got {collapse_top!r}")
    pairs = _prepare(ratings, levels)
    index = _draw_indices(pairs.counts, repetitions, seed)
    # gathering one code per triple, then decoding it, is faster than gathering 3 values
    codes = _triple_codes(pairs, index, levels)
    values = np.take(_code_digits(levels), codes, axis=0)  # (reps, pairs, 3)
    return _statistics(values, levels, collapse_top)


def virtual_raters(
    ratings: Iterable[Sequence[int]],
    repetitions: int = 100,
    seed: int | None = 0,
    collapse_top: bool = False,
    levels: int = 5,
) -> dict[str, dict[str, float]]:
    """Virtual-rater agreement of section 2 Report / paper Table 3: mean and std x100.

    ``ratings`` holds one sequence of ratings per pair (pairs with fewer than 3 are left out).
    Each of ``repetitions`` draws 3 ratings per pair without replacement, sorted X <= Y <= Z,
    and computes tau_X-YZ, tau_Y-XZ, tau_Z-XY (Kendall tau_c, method A), Kendall's W (tie
    corrected) and Fleiss' kappa. Returns ``{key: {"mean", "std"}}`` for the keys of
    ``VIRTUAL_RATER_KEYS``; ``std`` is the population standard deviation (ddof=0).

    ``levels`` is the scale size (5 for VICR, 4 for Flickr8k-Expert); ratings outside
    1..levels raise ValueError. ``collapse_top`` merges rating 5 into 4 for Fleiss' kappa
    only (as the paper does for its VICR column, to compare with the 4-level
    Flickr8k-Expert); off by default; on a 1-4 scale it changes nothing. Raises ValueError
    when a statistic is undefined (e.g. a virtual rater gives one rating to every pair).
    """
    values = virtual_rater_values(ratings, repetitions, seed, collapse_top, levels)
    means = values.mean(axis=0)
    stds = values.std(axis=0, ddof=0)
    return {
        key: {"mean": float(means[i]), "std": float(stds[i])}
        for i, key in enumerate(VIRTUAL_RATER_KEYS)
    }
