"""Report helpers of PROTOCOLS.md section 2: each player against consensus, ranks, histogram.

A player is compared with the consensus of the *other* raters of a pair
(``consensus_of_others``), never with a consensus that holds their own rating.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypedDict

import numpy as np

from rubrics import checks
from rubrics.vicr.ratings import as_rating_array, check_levels, ragged
from rubrics.vicr.scale import MAX_RATING

__all__ = [
    "AgreementSummary",
    "agreement_scores",
    "agreement_with_consensus",
    "competition_ranks",
    "consensus_of_others",
    "rating_distribution",
]


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
    x = as_rating_array(ratings, "ratings")
    r = as_rating_array(consensus, "consensus")
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
    levels = check_levels(levels)
    x = as_rating_array(ratings, "ratings", levels)
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
    x = as_rating_array(ratings, "ratings")
    r = as_rating_array(references, "references")
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
    levels = check_levels(levels)
    flat, counts = ragged(ratings, levels)
    rated = counts > 0
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if counts.size else counts
    totals = np.add.reduceat(flat, starts[rated]) if flat.size else np.zeros(0, np.int64)
    rounded = (2 * totals + counts[rated]) // (2 * counts[rated])
    histogram = np.bincount(rounded, minlength=levels + 1)
    return {level: int(histogram[level]) for level in range(1, levels + 1)}
