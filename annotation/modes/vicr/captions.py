"""VICR's data of a caption, kept in ``Caption.spec``, and the CSV columns that give it.

- ``prime_ratings`` (game captions, optional): the primed ratings Algorithm 1 adds to the
  human ratings of the pair (``3;4`` in the CSV, numbers from 1 to 5);
- ``truth`` (tutorial and probation sets, required): the expert rating, 1 to 5, shown on a
  pair's feedback once it is answered and scored against;
- ``explanation`` (required in the tutorial, optional in probation): why, shown with it.

A key is stored only when it has a value (no primes, no explanation: no key), so the
readers below give the empty value for a caption without it.
"""

from __future__ import annotations

import math
from typing import Any

from annotation.models import Caption
from annotation.modes.caption_columns import CaptionColumns
from annotation.modes.vicr.settings import PROBATION, TUTORIAL
from annotation.text import shown, text_problem

PRIME_RATINGS, TRUTH, EXPLANATION = "prime_ratings", "truth", "explanation"
#: VICR's own caption purposes: the tutorial's and probation's pools of pairs.
PURPOSES = ((TUTORIAL, "Tutorial"), (PROBATION, "Probation"))
EXPLANATION_MAX = 5000  # a tutorial's explanation is a few sentences
TRUTHS = {"1", "2", "3", "4", "5"}


def prime_ratings(caption: Caption) -> list[float | int]:
    """The caption's primed ratings (none: an empty list)."""
    return list(caption.spec.get(PRIME_RATINGS, []))


def truth(caption: Caption) -> int | None:
    """The expert rating of a tutorial or probation caption (None for a game caption)."""
    return caption.spec.get(TRUTH)


def explanation(caption: Caption) -> str:
    """Why the expert rated a tutorial or probation caption so ("" when not given)."""
    return caption.spec.get(EXPLANATION, "")


class VicrCaptionColumns(CaptionColumns):
    """Game captions may have ``prime_ratings``; tutorial captions need ``truth`` and
    ``explanation``, probation captions ``truth`` (``explanation`` optional)."""

    def columns(self, purpose: str) -> tuple[frozenset[str], frozenset[str]]:
        if purpose == TUTORIAL:
            return frozenset({TRUTH, EXPLANATION}), frozenset()
        if purpose == PROBATION:
            return frozenset({TRUTH}), frozenset({EXPLANATION})
        return frozenset(), frozenset({PRIME_RATINGS})

    def parse(self, purpose: str, cells: dict[str, str], problems: list[str]) -> dict[str, Any]:
        if purpose not in (TUTORIAL, PROBATION):
            primes = _parse_primes(cells.get(PRIME_RATINGS, ""), problems)
            return {PRIME_RATINGS: primes} if primes else {}
        spec: dict[str, Any] = {}
        value = cells.get(TRUTH, "").strip()
        if value not in TRUTHS:
            problems.append(f"truth must be a whole number from 1 to 5, not '{shown(value)}'")
        else:
            spec[TRUTH] = int(value)
        text = cells.get(EXPLANATION, "").strip()
        if purpose == TUTORIAL and not text:
            problems.append("empty explanation (the tutorial shows it to every player)")
            return spec
        problem = text_problem(text, max_length=EXPLANATION_MAX, multiline=True)
        if problem is not None:
            problems.append(f"explanation {problem}")
        elif text:
            spec[EXPLANATION] = text
        return spec


def _parse_primes(value: str, problems: list[str]) -> list[float | int]:
    primes: list[float | int] = []
    for part in value.replace(",", ";").split(";"):
        if not part.strip():
            continue
        number = _number(part)
        if number is None or not 1 <= number <= 5:
            problems.append(f"prime rating '{shown(part.strip())}' is not a number from 1 to 5")
            continue
        primes.append(int(number) if number.is_integer() else number)
    return primes


def _number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None
