"""The context mode's constant-rating rule: a crowd worker who gives one rating to nearly
every question of every description has not read them (issue 45's rule of every mode: no
constant answerer earns the code).

Each before-image question has its own meaning and "irrelevance" runs the other way from
a plain quality score (5: no unnecessary detail), so an honest rater of several
descriptions varies; one value on more than ``max_share`` of at least ``MIN_RATINGS``
ratings is the pattern of a worker clicking through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

#: Ratings the rule needs before it judges: three descriptions' four before-image answers.
MIN_RATINGS = 12


@dataclass(frozen=True)
class RatingPattern:
    """One worker's ratings: how many, the most common value and its share, and the verdict."""

    ratings: int
    value: int | None
    share: float | None
    constant: bool

    def reason(self) -> str:
        """The sentence a flag and the worker's page give ("" when not constant)."""
        if not self.constant or self.share is None:
            return ""
        return (
            f"the rating {self.value} on {self.share:.0%} of {self.ratings} ratings "
            "(every question of every description)"
        )


def rating_pattern(
    ratings: Iterable[int], *, max_share: float, min_ratings: int = MIN_RATINGS
) -> RatingPattern:
    """Apply the rule to one worker's ratings: constant when there are at least
    ``min_ratings`` and strictly more than ``max_share`` of them are one value (1: never).
    ValueError for a share outside 0 to 1."""
    if not 0 <= max_share <= 1:
        raise ValueError(f"max_share must be from 0 to 1, got {max_share!r}")
    counts = Counter(ratings)
    total = sum(counts.values())
    if not total:
        return RatingPattern(0, None, None, False)
    # Among equally common values the smallest, so the verdict does not depend on order.
    value, top = min(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return RatingPattern(
        total, value, top / total, total >= min_ratings and top > max_share * total
    )
