"""Catch trials built from Cui et al.'s pathological transformations (pure rules, no Django).

A catch trial is a caption whose right answer is known: a human caption of another image
(``T_RC``), or a caption with a share gamma of its words permuted (``T_WP``) or replaced by
random vocabulary words (``T_RW``); see :mod:`rubrics.transformations`. A rater who calls
it good is not reading. This module holds the rules the modes share:

- :func:`insert_probability`: after a normal item, how likely a catch trial follows, so
  that a share ``rate`` of the served items are catch trials.
- :func:`parse_gammas`: the gamma setting (text such as ``"0.5,1"``) as numbers.
- :func:`make_catch`: draw a transformation and gamma and apply it.
- :func:`vicr_caught` / :func:`thumb_caught`: whether an answer is the expected one.
- :func:`vicr_control_passed` / :func:`thumb_control_passed`: the same for a *control*, an
  untouched known-good caption that must score high (issue 29: with altered captions that
  must score low, no constant answer passes both kinds).
- :func:`breaks_rule`: the exclusion rule (enough catch trials seen, too many missed).
- :func:`breaks_two_sided`: the exclusion rule counting altered trials and controls apart.
- :func:`caught_table`: the report's share caught per transformation and gamma.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rubrics import transformations as tf

__all__ = [
    "MAX_GAMMAS",
    "VICR_CAUGHT_MAX",
    "THUMB_CAUGHT_MAX_PRECISION",
    "CONTROL",
    "CONTROL_SHARE",
    "THUMB_CONTROL_MIN_PRECISION",
    "VICR_CONTROL_MIN",
    "Catch",
    "breaks_rule",
    "breaks_two_sided",
    "caught_table",
    "insert_probability",
    "make_catch",
    "parse_gammas",
    "thumb_caught",
    "thumb_control_passed",
    "vicr_caught",
    "vicr_control_passed",
]

#: The issue's expected answers: VICR rating <= 2 ("Partly right" or "Wrong"); THumB
#: precision <= 2, or for T_WP a fluency error ticked.
VICR_CAUGHT_MAX = 2
THUMB_CAUGHT_MAX_PRECISION = 2
#: The kind of a control trial: a known-good caption shown untouched.
CONTROL = "control"
#: Share of catch trials that are controls. Half: a constant answerer then fails about half
#: of its trials whichever constant it picks, and both kinds get counts of the same size
#: (the platform alternates the kinds and draws only which comes first at this share).
CONTROL_SHARE = 0.5
#: A control passes when scored high: VICR "Mostly complete" (4) or above; THumB precision
#: 4 or 5. With altered trials caught at <= 2, the middle answer 3 passes neither kind, so
#: every constant answer fails one kind entirely.
VICR_CONTROL_MIN = 4
THUMB_CONTROL_MIN_PRECISION = 4
#: Distinct gammas a study may list; more would spread the report's counts too thin.
MAX_GAMMAS = 10


@dataclass(frozen=True)
class Catch:
    """One drawn catch trial: the shown text and how it was made."""

    kind: str
    gamma: float | None  # None for T_RC, which has no strength here (see the module doc)
    text: str


def insert_probability(rate: float) -> float:
    """Probability that a catch trial follows a normal item, for a share ``rate`` overall.

    At most one catch follows each normal item, each with probability ``p``; then catch
    trials make up ``p / (1 + p)`` of the served items, which is ``rate`` when
    ``p = rate / (1 - rate)``. So ``rate`` may be at most 0.5 (``p = 1``).
    """
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 0.5:
        raise ValueError(f"rate must be a number from 0 to 0.5, got {rate!r}")
    return float(rate) / (1.0 - float(rate))


def parse_gammas(text: str) -> tuple[float, ...]:
    """``"0.5, 1"`` -> ``(0.5, 1.0)``: distinct numbers in (0, 1], sorted; ValueError if not.

    Gamma 0 is refused: it is the unchanged caption, not a catch trial.
    """
    if not isinstance(text, str):
        raise ValueError("gammas must be text such as 0.5,1")
    values: set[float] = set()
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"gammas: {part!r} is not a number") from None
        if not math.isfinite(value) or not 0 < value <= 1:
            raise ValueError(f"gammas: {part} is not above 0 and at most 1")
        values.add(value)
    if not values:
        raise ValueError("gammas must list at least one number above 0 and at most 1")
    if len(values) > MAX_GAMMAS:
        raise ValueError(f"gammas may list at most {MAX_GAMMAS} numbers")
    return tuple(sorted(values))


def make_catch(
    *,
    source: str,
    others: Sequence[str],
    vocabulary: Sequence[str],
    gammas: Sequence[float],
    rng: np.random.Generator,
    kinds: Sequence[str] = tf.TRANSFORMATIONS,
) -> Catch:
    """Draw a transformation uniformly from ``kinds`` and a gamma from ``gammas``; apply it.

    ``source`` is the caption T_WP and T_RW transform; ``others`` are the human captions
    of other images T_RC draws from. A transformation that cannot apply (no other caption,
    a caption of one repeated word, a vocabulary of one word) is dropped from the draw;
    ValueError when none can.
    """
    order = [str(kind) for kind in rng.permutation(np.array(kinds, dtype=object))]
    gamma = float(gammas[int(rng.integers(len(gammas)))])
    for kind in order:
        try:
            if kind == "T_RC":
                return Catch(kind, None, tf.random_caption(others, rng))
            if kind == "T_WP":
                return Catch(kind, gamma, tf.permute_words(source, gamma, rng))
            if kind == "T_RW":
                return Catch(kind, gamma, tf.replace_words(source, gamma, vocabulary, rng))
        except ValueError:
            continue
        raise ValueError(f"unknown transformation {kind!r}")
    raise ValueError("no transformation applies to these captions")


def vicr_caught(rating: int) -> bool:
    """A VICR catch trial is caught when rated "Partly right" (2) or "Wrong" (1)."""
    return int(rating) <= VICR_CAUGHT_MAX


def thumb_caught(kind: str, precision: float, fluency_errors: Mapping[str, object]) -> bool:
    """A THumB catch trial is caught at precision <= 2, or for T_WP with a fluency error."""
    if float(precision) <= THUMB_CAUGHT_MAX_PRECISION:
        return True
    return kind == "T_WP" and bool(fluency_errors)


def vicr_control_passed(rating: int) -> bool:
    """A VICR control (an untouched human caption) passes when rated 4 or 5."""
    return int(rating) >= VICR_CONTROL_MIN


def thumb_control_passed(precision: float) -> bool:
    """A THumB control (the untouched caption set) passes when its human caption gets
    precision 4 or 5."""
    return float(precision) >= THUMB_CONTROL_MIN_PRECISION


def breaks_rule(seen: int, missed: int, *, min_seen: int, max_missed_share: float) -> bool:
    """Whether a rater breaks the exclusion rule: at least ``min_seen`` catch trials
    answered and strictly more than ``max_missed_share`` of them missed."""
    if seen < 0 or missed < 0 or missed > seen:
        raise ValueError(f"need 0 <= missed <= seen, got seen={seen}, missed={missed}")
    return seen >= min_seen and missed > max_missed_share * seen


def breaks_two_sided(
    altered: tuple[int, int],
    controls: tuple[int, int],
    *,
    min_seen: int,
    max_missed_share: float,
) -> bool:
    """The exclusion rule over both kinds of catch trial, each ``(seen, missed)``.

    Once ``min_seen`` trials of either kind are answered in all, a rater breaks the rule
    when strictly more than ``max_missed_share`` of their altered trials *or* of their
    controls were missed. Pooling the two would let a constant answerer pass: "always 1"
    catches every altered trial and misses every control, so half of the pool, which a
    share of 0.5 does not exceed.
    """
    for seen, missed in (altered, controls):
        if seen < 0 or missed < 0 or missed > seen:
            raise ValueError(f"need 0 <= missed <= seen, got seen={seen}, missed={missed}")
    if altered[0] + controls[0] < min_seen:
        return False
    return any(missed > max_missed_share * seen for seen, missed in (altered, controls))


def caught_table(rows: Iterable[tuple[str, float | None, bool]]) -> list[dict[str, object]]:
    """Counts and share caught per (transformation, gamma), in TRANSFORMATIONS then gamma order.

    ``rows`` are ``(kind, gamma, caught)``, one per answered catch trial.
    """
    counts: dict[tuple[str, float | None], list[int]] = defaultdict(lambda: [0, 0])
    for kind, gamma, caught in rows:
        cell = counts[(kind, None if gamma is None else float(gamma))]
        cell[0] += 1
        cell[1] += bool(caught)

    def order(key: tuple[str, float | None]) -> tuple[int, float]:
        kind, gamma = key
        known = tf.TRANSFORMATIONS
        rank = known.index(kind) if kind in known else len(known)
        return rank, -1.0 if gamma is None else gamma

    return [
        {"kind": kind, "gamma": gamma, "n": n, "caught": caught, "share": caught / n}
        for (kind, gamma), (n, caught) in sorted(counts.items(), key=lambda kv: order(kv[0]))
    ]
