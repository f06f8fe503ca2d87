"""The arena mode's settings (``ArenaProtocol.settings_class``): what each battle asks, the
checks of the worker, the adaptive design and its goal, the report's anchor and intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

from annotation.errors import ServiceError
from annotation.modes import catch
from annotation.modes.settings import (
    CHECKS,
    CROWD,
    MAX_RESAMPLES,
    REPORT,
    flag,
    number,
    text,
    whole,
)
from rubrics import arena_design


@dataclass(frozen=True)
class ArenaSettings(catch.CatchSettings):
    # Battles per pair of captions; 2 or more lets the report measure agreement between
    # workers on shared battles. 100 is far past any use and bounds the work.
    battle_target: int = whole(
        1,
        label="Workers who judge each battle",
        group=CHECKS,
        low=1,
        high=100,
        doc="Workers who judge each battle (2 or more: agreement).",
    )
    # Server-measured; 10 minutes covers the longest detailed caption pair.
    min_seconds: int = whole(
        5,
        label="Least seconds before an answer counts",
        group=CHECKS,
        low=0,
        high=600,
        doc="Seconds a battle must be shown before an answer counts.",
    )
    criteria: bool = flag(
        False,
        label="Also ask five per-criterion questions",
        doc="Also ask ImageInWords' five per-criterion side-by-side labels.",
    )
    adaptive: bool = flag(
        False,
        label="Serve the least settled system pairs first",
        doc="Serve the system pairs that settle the goal below (from the latest report); "
        "the report adds the fit weighted by inverse sampling probability beside the "
        "leaderboard.",
    )
    # The share spread uniformly so every pair keeps a positive probability (IPW needs it).
    adaptive_explore: float = number(
        0.2,
        label="Share of battles drawn evenly when adaptive",
        low=0.01,
        high=1,
        doc="Share of adaptive draws spread uniformly over pairs.",
    )
    # What the adaptive design serves for (issue 47): the rule draws the battles that most
    # lower the chance of getting this wrong (rubrics/arena_design.py).
    adaptive_goal: str = text(
        "order",
        label="What adaptive pairing settles",
        choices=arena_design.GOALS,
        doc="order: the whole order; top: which systems are the best ones (their number "
        "below); system: one system against each of the others (named below).",
    )
    adaptive_top: int = whole(
        4,
        label="How many best systems (goal top)",
        low=1,
        high=100,
        doc="The size of the set of best systems the goal 'top' settles.",
    )
    adaptive_system: str = text(
        "",
        label="The system (goal system)",
        max_length=100,
        doc="The system the goal 'system' compares with each of the others.",
    )
    # The design reads the latest report; a live adaptive study gets a fresh one unasked
    # once this many battles came since (the beat's report refresh, each minute). 250 is
    # about a minute of a 60-worker crowd, and the fit over 14 systems takes under a second;
    # a million battles between refreshes is no refresh in any study.
    adaptive_refresh: int = whole(
        250,
        label="Battles between automatic refreshes (adaptive)",
        low=0,
        high=1_000_000,
        doc="An adaptive study's report is refreshed unasked once this many battles came "
        "since the latest one, and the design reads it (0: only when a researcher asks).",
    )
    # Battles one worker may judge of one system pair; 100,000 is "no cap".
    cap_per_pair: int = whole(
        20,
        label="Battles of one system pair per worker",
        group=CHECKS,
        low=1,
        high=100_000,
        doc="Battles of one system pair a worker may judge.",
    )
    anchor_system: str = text(
        "",
        label="System whose score is fixed",
        group=REPORT,
        max_length=100,
        doc="System whose score is fixed at the anchor score (empty: mean).",
    )
    anchor_score: float = number(
        1000,
        label="Score of that system",
        low=-100_000,
        high=100_000,
        doc="The anchor's score.",
        report=True,
    )
    bootstrap_rounds: int = whole(
        1000,
        label="Resamples for the confidence intervals",
        low=20,
        high=MAX_RESAMPLES,
        doc="Bootstrap resamples of the leaderboard's intervals.",
        report=True,
    )
    # Gold battles are the arena's check of the worker: on by default, unlike the
    # published rating protocols. An always-"A" worker misses half of them (sides are
    # random), so the rule flags a missed share above a quarter.
    catch_rate: float = number(
        0.1,
        label="Share of gold battles",
        group=CHECKS,
        low=0,
        high=0.5,
        doc="Share of served battles that are gold battles (a caption against an "
        "alteration of it; 0: none).",
    )
    # The arena's own word for its catch trials (issue 46, row 6): the form said "catch
    # trial" here and "gold battle" everywhere else.
    catch_gammas: str = text(
        "0.5,1",
        label="How much a gold battle alters its caption",
        group=CHECKS,
        doc="Shares of words permuted or replaced in a gold battle's altered caption, e.g. 0.5,1.",
    )
    # Four, not the rating protocols' three: under the quarter rule one miss in the first
    # three flags a worker (1/3 > 1/4), and the code now waits for the rule (issue 45), so
    # an attentive worker who slips once (a simulated one misses about 3% of gold battles
    # on a human caption) would lose it; one in four is forgiven, two are not.
    catch_min_seen: int = whole(
        4,
        low=1,
        high=1000,
        label="Gold battles answered before the rule applies",
        group=CHECKS,
        doc="Gold battles a worker answers before the exclusion rule applies; the crowd "
        "completion code waits for them (they are placed before its count).",
    )
    catch_max_missed_share: float = number(
        0.25,
        label="Largest share of gold battles a worker may miss",
        group=CHECKS,
        low=0,
        high=1,
        doc="Missing more than this share of gold battles flags the worker and excludes "
        "their judgments.",
    )

    # Battles a crowd worker judges to earn the completion code, gold battles included
    # (the worker cannot tell them apart); the code also needs the checks below passed.
    completion_battles: int = whole(
        20,
        label="Battles a crowd worker judges to earn the code",
        group=CROWD,
        low=1,
        high=10_000,
        doc="Battles (gold ones included) a crowd worker judges to earn the completion "
        "code; the first gold battles are placed within them, and the checks are applied "
        "before the code is shown (at least 10 battles).",
    )
    # Issue 45, row 4: "tie" on every battle passed position bias and earned the code.
    # An honest worker's sides are a fair coin, so one outcome on 19 of 20 battles is
    # a bot (or a worker who does not read); 1 turns this rule off.
    answer_max_share: float = number(
        0.9,
        label="Largest share of battles one answer may take",
        group=CHECKS,
        low=0.5,
        high=1,
        doc="A crowd worker who gives one answer (ties included) on more than this share "
        "of their battles, or picks the left caption too often (position bias), earns no "
        "code and is excluded (1: no limit on one answer).",
    )

    def check(self) -> None:
        """The gold battles the rule needs must fit before the code's count; the goal
        'system' needs its system."""
        super().check()
        if self.adaptive_goal == "system" and not self.adaptive_system:
            raise ServiceError(
                "The goal 'system' needs the system it settles: name it.",
                field="adaptive_system",
            )
        if self.catch_rate and self.completion_battles < 2 * self.catch_min_seen:
            raise ServiceError(
                f"The completion code comes after {self.completion_battles} battles, but "
                f"the gold rule needs {self.catch_min_seen} gold battles before it: ask for "
                f"at least {2 * self.catch_min_seen} battles (twice the gold battles) or "
                "fewer gold battles before the rule applies.",
                field="completion_battles",
            )
