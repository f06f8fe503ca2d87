"""HUMANr's settings (the study form's fields; ``protocol.py`` re-exports them).

A module of its own so that ``protocol.py`` keeps within the 600-line limit with each
setting's label and group declared beside its bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from annotation.modes.settings import (
    CHECKS,
    CROWD,
    MAX_RESAMPLES,
    MAX_SAMPLED_IMAGES,
    CrowdSettings,
    flag,
    number,
    whole,
)


@dataclass(frozen=True)
class HumanrSettings(CrowdSettings):
    """A HUMANr study's settings: what is built, who judges it, what is refused, the report."""

    # None: every image with at least two human captions; a number: a random subset (only
    # imported images are drawn, so the bound refuses typing mistakes). At least 3: a
    # group's check needs two images besides its comparisons' (rubrics.humanr.build_groups).
    n_images: int | None = whole(
        None,
        low=3,
        high=MAX_SAMPLED_IMAGES,
        optional=True,
        label="Images to judge",
        doc="Images to draw with the study's seed; empty: every image with two human captions.",
    )
    # Workers who judge each group, so each comparison. The paper judges each comparison
    # once: "Images were shown up to 4 times total to different workers: Once with a
    # randomly selected pair of its human annotated captions, three additional times with
    # a random human annotation and a caption from each of our three models". More is for
    # researchers who want several judgments per comparison; each is a judgment to
    # collect, never computed ahead, so the bound only refuses typing mistakes.
    workers_per_comparison: int = whole(
        1,
        low=1,
        high=1000,
        label="Workers who judge each comparison",
        group=CHECKS,
        doc="Workers who judge each group, so each comparison (the paper's 1).",
    )
    # Answers faster than this after the trial was shown are refused (1 s: nobody reads
    # an image and two captions faster; 0 turns the check off).
    min_seconds_per_trial: float = number(
        1,
        low=0,
        high=600,
        label="Least seconds per comparison",
        group=CHECKS,
        doc="Answers faster than this are refused; 0 turns the check off.",
    )
    # Complete groups a crowd worker must finish to earn the completion code.
    completion_groups: int = whole(
        1,
        low=1,
        high=1000,
        label="Groups a crowd worker finishes to earn the code",
        group=CROWD,
        doc="Complete groups a crowd worker finishes to earn the completion code.",
    )
    # A worker who failed this many attention checks gets no further group (None: no
    # limit; the paper drops the group's responses and sets no limit). One check per group:
    # 1,000 failed checks are 1,000 groups of one worker, so a larger limit is none.
    max_failed_checks: int | None = whole(
        None,
        low=1,
        high=1000,
        optional=True,
        label="Failed attention checks before a worker is stopped",
        group=CHECKS,
        doc="Failed attention checks after which a worker gets no further group; empty: no limit.",
    )
    # The report's bootstrap resamples (over images) and random half-splits of the workers:
    # each holds a row per image or worker, see MAX_RESAMPLES.
    report_bootstrap: int = whole(
        1000,
        low=100,
        high=MAX_RESAMPLES,
        label="Resamples for the confidence intervals",
        doc="Report: bootstrap resamples.",
        report=True,
    )
    report_splits: int = whole(
        1000,
        low=10,
        high=MAX_RESAMPLES,
        label="Random half-splits of the workers",
        doc="Report: random worker half-splits.",
        report=True,
    )
    # Random sign flips of the permutation test of each system against the Human-vs-Human
    # baseline (exact, every flip, when a study has so few images that 2^images is fewer):
    # 10,000 resolve a p-value to 0.0001 and hold a block of rows, not one per flip.
    report_permutations: int = whole(
        10_000,
        low=100,
        high=MAX_RESAMPLES,
        label="Sign flips of the permutation test",
        doc="Report: permutation sign flips.",
        report=True,
    )
    # Adaptive allocation (issue 15, docs/protocol-choices.md "Plan and stop"): 0 is off;
    # above 0, a group is no longer served once every system it compares has a 95%
    # t-interval half-width at or below this, over one vote per independent worker past
    # their gates (at least ADAPTIVE_MIN_WORKERS of them and ADAPTIVE_MIN_VALUES values;
    # allocation.py, issue 29).
    adaptive_target_half_width: float = number(
        0,
        low=0,
        high=1,
        label="Stop a group once its intervals are this narrow",
        group=CHECKS,
        doc="Stop serving groups whose systems' interval half-widths reached this; 0: off.",
    )
    # Spread each worker's groups over the systems (issue 48): with adaptive allocation on,
    # a worker who has earned the completion code is not served a group of a system they
    # already judged (they, or a participant of their browser). The rule gives each worker
    # one vote per system (allocation.py), so a second group of the same system only
    # refines a vote it already counted, while the same ten judgments from a new worker add
    # one: bench/adaptive.py measures the judgments this saves. A worker before the code is
    # never refused by it, so it cannot keep anyone from their code.
    adaptive_spread_workers: bool = flag(
        True,
        label="With stopping on, one group per system for each worker",
        group=CHECKS,
        doc="With adaptive allocation on, a worker past the code gets one group per system.",
    )
