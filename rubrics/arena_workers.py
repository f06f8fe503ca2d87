"""The arena's checks of one worker (pure rules, no Django; issue 45, row 4).

A bot that answers one outcome on every battle must not earn a crowd study's completion
code. Two rules judge a worker's answers, and a schedule makes sure the third (the gold
rule of ``rubrics.catch``) has seen enough gold battles by the time the code is due:

- :func:`gold_positions`: after which of a worker's battles their first gold battles are
  due, one at random in each of equal stretches of the battles before the code's count,
  so the gold rule has its ``min_seen`` gold battles within that count. Drawn at random per
  worker, so a bot cannot tell which answer is a gold battle by its place.
- :func:`answer_pattern`: the constant-outcome rule (one outcome, ties included, on more
  than ``max_share`` of the answers) and the position-bias rule (a two-sided exact binomial
  test of the share of decisive answers given to the left caption against 1/2, p below
  ``POSITION_P``), each once the worker has given ``MIN_ANSWERS`` answers (decisive ones for
  position bias). Gold battles show sides at random like any battle, so their answers count.

Outcomes are in the page's terms: ``a`` (the left caption is better), ``b``, ``tie`` (both
good) and ``bothbad``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MIN_ANSWERS",
    "OUTCOMES",
    "POSITION_P",
    "AnswerPattern",
    "answer_pattern",
    "binomial_p",
    "gold_positions",
    "golds_due",
]

#: The four outcomes as a worker gives them (sides as shown).
OUTCOMES = ("a", "b", "tie", "bothbad")
#: Answers (decisive answers, for position bias) before either rule applies: a handful of
#: honest answers can all be one outcome by chance (5 decisive ones on one side: 1 in 16).
MIN_ANSWERS = 10
#: A worker whose left share has a two-sided binomial p below this is flagged for position
#: bias: an honest worker's sides are a fair coin (drawn per lease), so about 1 in 100
#: honest workers with many answers is flagged, and a worker who always picks one side
#: after 10 decisive answers has p = 2 / 1024.
POSITION_P = 0.01


def gold_positions(count: int, within: int, rng: np.random.Generator) -> tuple[int, ...]:
    """``count`` battle numbers from 1 to ``within``, one drawn uniformly in each of
    ``count`` consecutive stretches of nearly equal length (stretch ``k`` is
    ``floor(k * within / count) + 1`` to ``floor((k + 1) * within / count)``).

    A gold battle is due after each of them: with ``within = code's count - count`` the
    ``count``-th gold battle is answered by the code's count at the latest. ValueError when
    ``count`` is negative or ``within`` smaller than ``count`` (a stretch would be empty).
    """
    if count < 0 or within < count:
        raise ValueError(f"need 0 <= count <= within, got count={count}, within={within}")
    edges = [k * within // count for k in range(count + 1)] if count else [0]
    return tuple(int(rng.integers(edges[k], edges[k + 1])) + 1 for k in range(count))


def golds_due(positions: Sequence[int], battles: int) -> int:
    """How many gold battles should have been made after ``battles`` battles."""
    return sum(position <= battles for position in positions)


def binomial_p(successes: int, trials: int) -> float:
    """The two-sided exact binomial test of ``successes`` of ``trials`` against 1/2: the
    probability of a count at least as far from ``trials / 2`` (1.0 for no trials).

    At 1/2 the distribution is symmetric, so this is twice the smaller tail, at most 1 (as
    ``scipy.stats.binomtest`` gives it; computed here in exact integers, without scipy).
    """
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return 1.0
    low = min(successes, trials - successes)
    tail = sum(math.comb(trials, i) for i in range(low + 1))
    return min(1.0, 2 * tail / 2**trials)


@dataclass(frozen=True)
class AnswerPattern:
    """One worker's answers under the two rules.

    ``outcome`` is their most common outcome ("" with no answer) and ``share`` its share of
    ``answers``; ``decisive`` counts the ``a`` and ``b`` answers, ``left_share`` the share of
    them that are ``a`` (None with none) and ``p_value`` the binomial test of it.
    ``constant`` and ``position`` say which rule flags them.
    """

    answers: int
    outcome: str
    share: float | None
    decisive: int
    left_share: float | None
    p_value: float
    constant: bool
    position: bool

    @property
    def flagged(self) -> bool:
        return self.constant or self.position

    def reason(self, labels: Mapping[str, str] | None = None) -> str:
        """Why the rules flag the worker, in words ("" if they do not); ``labels`` names
        the outcomes (default: their codes)."""
        parts = []
        if self.constant and self.share is not None:
            name = (labels or {}).get(self.outcome, self.outcome)
            parts.append(f"the same answer ({name}) on {self.share:.0%} of {self.answers} battles")
        if self.position and self.left_share is not None:
            parts.append(
                f"the left caption chosen in {self.left_share:.0%} of {self.decisive} "
                f"decisive battles (p = {self.p_value:.2g})"
            )
        return "; ".join(parts)


def answer_pattern(
    outcomes: Sequence[str], *, max_share: float, min_answers: int = MIN_ANSWERS
) -> AnswerPattern:
    """Apply the constant-outcome and position-bias rules to one worker's ``outcomes``.

    Constant: at least ``min_answers`` answers and strictly more than ``max_share`` of them
    one outcome (``max_share`` 1: never). Position: at least ``min_answers`` decisive answers
    and ``binomial_p`` of the left ones below ``POSITION_P``. The most common outcome is the
    first of ``OUTCOMES`` among equals. ValueError for an unknown outcome or a share
    outside 0 to 1.
    """
    if not 0 <= max_share <= 1:
        raise ValueError(f"max_share must be from 0 to 1, got {max_share!r}")
    counts = dict.fromkeys(OUTCOMES, 0)
    for outcome in outcomes:
        if outcome not in counts:
            raise ValueError(f"unknown outcome {outcome!r}; expected one of {OUTCOMES}")
        counts[outcome] += 1
    answers = sum(counts.values())
    top = max(OUTCOMES, key=lambda outcome: counts[outcome]) if answers else ""
    share = counts[top] / answers if answers else None
    decisive = counts["a"] + counts["b"]
    p_value = binomial_p(counts["a"], decisive)
    return AnswerPattern(
        answers=answers,
        outcome=top,
        share=share,
        decisive=decisive,
        left_share=counts["a"] / decisive if decisive else None,
        p_value=p_value,
        constant=answers >= min_answers and counts[top] > max_share * answers,
        position=decisive >= min_answers and p_value < POSITION_P,
    )
