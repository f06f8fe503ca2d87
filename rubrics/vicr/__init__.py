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

The package's modules, each importable alone: ``scale`` (levels and texts), ``ratings``
(validation), ``scoring`` (consensus and Algorithm 1), ``phases`` (the phase machine and
gate draws), ``players`` (agreement with consensus, ranks, histogram) and ``virtual``
(virtual raters). Every public name is re-exported here, so ``from rubrics.vicr import X``
reads the same as before the split.
"""

from rubrics.vicr.phases import (
    Phase,
    PhaseRules,
    PlayerState,
    block_draw,
    first_game_outcome,
    gate_order,
    next_state,
    probation_outcome,
    tutorial_outcome,
)
from rubrics.vicr.players import (
    AgreementSummary,
    agreement_scores,
    agreement_with_consensus,
    competition_ranks,
    consensus_of_others,
    rating_distribution,
)
from rubrics.vicr.ratings import as_rating_array, ragged
from rubrics.vicr.scale import (
    LEVELS,
    MAX_RATING,
    MIN_RATING,
    PRIMED_RATINGS,
    SCALE,
    SCALE_LABELS,
    V_MAX,
    ScaleLevel,
)
from rubrics.vicr.scoring import (
    Score,
    consensus,
    consensus_pool,
    player_score,
    points_for_distance,
    score_rating,
    tutorial_points,
)
from rubrics.vicr.virtual import (
    VIRTUAL_RATER_KEYS,
    draw_virtual_raters,
    virtual_rater_statistics,
    virtual_rater_values,
    virtual_raters,
)

# The names rubrics.adaptive has long used; kept so that its calls read as they did.
_as_rating_array = as_rating_array
_ragged = ragged

__all__ = [
    "LEVELS",
    "MAX_RATING",
    "MIN_RATING",
    "PRIMED_RATINGS",
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
