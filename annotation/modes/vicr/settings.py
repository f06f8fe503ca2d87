"""VICR's settings (the study form's fields; ``protocol.py`` re-exports them).

A module of its own so that ``protocol.py`` keeps within the 600-line limit with each
setting's label and group declared beside its bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from annotation.errors import ServiceError
from annotation.modes import catch
from annotation.modes.settings import (
    CHECKS,
    CROWD,
    JUDGED,
    MAX_RESAMPLES,
    REPORT,
    flag,
    number,
    whole,
)
from rubrics import vicr as rules

TUTORIAL, PROBATION = "tutorial", "probation"
BLOCK_KINDS = (TUTORIAL, PROBATION)


@dataclass(frozen=True)
class VicrSettings(catch.CatchSettings):
    # The catch-trial settings come from CatchSettings (docs/protocol-choices.md).
    """A VICR study's settings; the defaults are the paper's (PROTOCOLS.md section 2).

    Counts of ratings and pairs are judgments to collect, never computed ahead: their
    bounds (1,000, 100 probation attempts) are far above any game and refuse typing
    mistakes; pass marks are bounded by the points their pairs can give (``check``).
    """

    min_ratings: int = whole(
        3,
        label="Fewest ratings per caption",
        group=JUDGED,
        low=1,
        high=1000,
        doc="Fewest player ratings a caption collects.",
    )
    max_ratings: int = whole(
        7,
        label="Most ratings per caption",
        group=JUDGED,
        low=1,
        high=1000,
        doc="Most player ratings a caption collects.",
    )
    seconds_before_submit: float = number(
        3,
        label="Seconds before a rating can be sent",
        group=CHECKS,
        low=0,
        high=600,
        doc="Seconds a player looks at a pair before the rating can be sent.",
    )
    tutorial_pass: int = whole(
        10,
        label="Points that pass the tutorial",
        group=CHECKS,
        low=-1000,
        high=1000,
        doc="Points that pass the tutorial.",
    )
    probation_pass: int = whole(
        25,
        label="Points that pass probation",
        group=CHECKS,
        low=-1000,
        high=1000,
        doc="Points that pass a probation attempt.",
    )
    first_game_ratings: int = whole(
        20,
        label="Ratings the first-game check looks at",
        group=CHECKS,
        low=1,
        high=1000,
        doc="Game ratings the first-game check looks at.",
    )
    first_game_pass: int = whole(
        25,
        label="Points the first game needs",
        group=CHECKS,
        low=-2000,
        high=2000,
        doc="Points in the first game that let a player keep playing.",
    )
    max_probation_attempts: int = whole(
        2,
        label="Probation attempts per player",
        group=CHECKS,
        low=1,
        high=100,
        doc="Probation attempts a player gets.",
    )
    # Pairs per tutorial and per probation attempt (the paper's 10 and 20), drawn per player
    # from the imported pools, which must hold at least tutorial_pairs and
    # probation_pairs x max_probation_attempts pairs.
    tutorial_pairs: int = whole(
        10,
        label="Pairs in the tutorial",
        group=CHECKS,
        low=1,
        high=1000,
        doc="Tutorial pairs per player, drawn from the imported tutorial set.",
    )
    probation_pairs: int = whole(
        20,
        label="Pairs per probation attempt",
        group=CHECKS,
        low=1,
        high=1000,
        doc="Pairs per probation attempt, drawn from the imported probation set.",
    )
    # Game ratings that earn a crowd worker the completion code (as many as the first-game
    # check looks at, so the code follows the check, not a half-finished stay).
    completion_game_ratings: int = whole(
        20,
        label="Ratings a crowd worker gives to earn the code",
        group=CROWD,
        low=1,
        high=100_000,
        doc="Game ratings that earn a crowd worker the completion code.",
    )
    scale_levels: int = whole(
        5,
        label="Levels of the rating scale",
        group=JUDGED,
        low=4,
        high=5,
        doc="Levels of the rating scale.",
    )
    # Fleiss' kappa with levels 4 and 5 merged. Off: the paper merged them only to compare
    # with a 4-level dataset ("because Fleiss' kappa is sensitive to the number of
    # categories, and there are fewer categories in Flickr8k-Expert", section 6); imported
    # published datasets set it where the paper did (services/datasets.py). No-op on 4 levels.
    collapse_top: bool = flag(
        False,
        label="Merge the top two levels in the agreement",
        group=REPORT,
        doc="Merge levels 4 and 5 in Fleiss' kappa (to compare with a 4-level dataset).",
    )
    leaderboard_size: int = whole(
        10,
        label="Players on the leaderboard",
        group=JUDGED,
        low=0,
        high=100,
        doc="Players shown on the leaderboard; 0: no leaderboard.",
    )
    # Virtual-rater repetitions of the report (the paper's 100); see MAX_RESAMPLES.
    report_repetitions: int = whole(
        100,
        label="Virtual-rater repetitions",
        group=REPORT,
        low=1,
        high=MAX_RESAMPLES,
        doc="Virtual-rater repetitions of the report (the paper's 100).",
        report=True,
    )
    # Adaptive stopping (issue 15, docs/protocol-choices.md "Plan and stop"): off, every
    # game pair collects max_ratings ratings; on, a pair stops between min_ratings and
    # max_ratings once rubrics.adaptive.vicr_needs_more says its consensus is settled.
    adaptive_stopping: bool = flag(
        False,
        label="Stop a caption once its consensus is settled",
        group=JUDGED,
        doc="Stop a pair before max_ratings once its consensus is settled (adaptive_risk).",
    )
    # Issue 29 (docs/protocol-choices.md "Crowd integrity, round two: VICR").
    gate_pool_multiple: int = whole(
        3,
        label="Practice sets hold this many draws of one player",
        group=CHECKS,
        low=1,
        high=100,
        doc="Tutorial and probation pools must hold this many times one player's draw.",
    )
    replay_gap: float = number(
        0.5,
        label="Practice-versus-game gap that flags a player",
        group=CHECKS,
        low=0,
        high=1,
        doc="Flag a player whose practice exact-match share beats their first-game "
        "consensus share by this much (0: off).",
    )
    adaptive_risk: float = number(
        0.05,
        label="Risk that a stopped caption's consensus is wrong",
        group=JUDGED,
        low=0.001,
        high=0.5,
        doc="Largest chance a stopped pair's consensus differs from max_ratings ratings' one.",
    )

    def check(self) -> None:
        """Refuse settings no player could ever meet."""
        super().check()
        if self.min_ratings > self.max_ratings:
            raise ServiceError("min_ratings must not exceed max_ratings", field="min_ratings")
        limit = 2 * self.first_game_ratings
        if self.first_game_pass > limit:
            raise ServiceError(
                f"first_game_pass cannot exceed {limit} (2 points per rating over "
                f"first_game_ratings ratings)",
                field="first_game_pass",
            )
        for kind in BLOCK_KINDS:
            pairs, needed = self.block_pairs(kind), self.block_pass(kind)
            if needed > 2 * pairs:
                raise ServiceError(
                    f"{kind}_pass is {needed} but {pairs} {kind} pairs ({kind}_pairs) give at "
                    f"most {2 * pairs} points.",
                    field=f"{kind}_pass",
                )

    def block_pairs(self, kind: str) -> int:
        """Pairs of one tutorial (``kind`` tutorial) or one probation attempt."""
        return self.tutorial_pairs if kind == TUTORIAL else self.probation_pairs

    def block_pass(self, kind: str) -> int:
        """Points one tutorial or one probation attempt needs."""
        return self.tutorial_pass if kind == TUTORIAL else self.probation_pass

    def phase_rules(self) -> rules.PhaseRules:
        return rules.PhaseRules(
            tutorial_pairs=self.tutorial_pairs,
            tutorial_pass=self.tutorial_pass,
            probation_pairs=self.probation_pairs,
            probation_pass=self.probation_pass,
            max_probation_attempts=self.max_probation_attempts,
            first_game_ratings=self.first_game_ratings,
            first_game_pass=self.first_game_pass,
        )
