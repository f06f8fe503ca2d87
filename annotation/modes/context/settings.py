"""The context mode's settings (the study form's fields; ``protocol.py`` re-exports them).

Each item is one description in one context for one group of raters, so the two targets
are per group: a study may ask only blind and low-vision (BLV) raters, only sighted ones,
or both (the issue's comparison).
"""

from __future__ import annotations

from dataclasses import dataclass

from annotation.errors import InvalidInput
from annotation.modes.settings import CHECKS, CROWD, REPORT, CrowdSettings, flag, number, whole

#: The fastest reading the minimum time allows by default, in words per minute. The time is
#: a floor a rater must not beat, so it must sit below the fastest honest reader: expert
#: screen-reader users listen to synthetic speech at well over twice conversational speed
#: (several hundred words per minute), and sighted skimmers read about as fast. At 500 words
#: per minute a 60-word passage and a 20-word description need under 10 seconds, which a
#: screen reader at a fast rate still meets, while an answer sent before the text could be
#: heard or read at all is refused. docs/protocol-choices.md, "Descriptions in context".
READING_RATE = 500


@dataclass(frozen=True)
class ContextSettings(CrowdSettings):
    """A context study's settings: who rates each item, the reading floor, the report."""

    # Ratings each description gets in each context from BLV raters (0: the study asks no
    # BLV rater). Each is a judgment to collect, never computed ahead: the bound refuses
    # typing mistakes (Kreiss et al. collected a handful per description).
    blv_ratings: int = whole(
        3,
        low=0,
        high=1000,
        label="Blind or low-vision raters per description in each context",
        group=CHECKS,
        doc="Ratings each description gets in each context from blind or low-vision "
        "raters; 0: the study asks none.",
    )
    sighted_ratings: int = whole(
        3,
        low=0,
        high=1000,
        label="Sighted raters per description in each context",
        group=CHECKS,
        doc="Ratings each description gets in each context from sighted raters, before "
        "and after seeing the image; 0: the study asks none.",
    )
    # The minimum reading time is the words shown divided by this rate (READING_RATE says
    # why 500). 100 words per minute is slow speech; 2,000 is past any reader, so a study
    # that wants no floor in practice can have one.
    reading_rate: int = whole(
        READING_RATE,
        low=100,
        high=2000,
        label="Fastest reading speed counted (words per minute)",
        group=CHECKS,
        doc="Ratings sent sooner than the context and description take to read at this "
        "speed are refused; the page says how long in seconds.",
    )
    # Seconds the image is shown before the after-image ratings count (sighted raters
    # only). A glance at a photograph takes a second or two; 600 is past any use.
    min_seconds_with_image: int = whole(
        3,
        low=0,
        high=600,
        label="Least seconds with the image before the second ratings",
        group=CHECKS,
        doc="Sighted raters' after-image ratings sent sooner than this are refused; 0: no floor.",
    )
    # Nobody rates a description in two contexts, so one worker can rate at most one item
    # per description; the code's count is capped by that (completion_reach).
    completion_after: int = whole(
        6,
        low=1,
        high=1000,
        label="Descriptions a crowd worker rates to earn the code",
        group=CROWD,
        doc="Descriptions (each in its context) a crowd worker rates to earn the completion code.",
    )
    # The constant-rating rule (rubrics/context/checks.py): a worker giving one rating to
    # more than this share of every question is not paid. 1 turns it off; below a half
    # an honest rater of similar descriptions could be caught.
    answer_max_share: float = number(
        0.9,
        low=0.5,
        high=1.0,
        label="Largest share of one rating a crowd worker may give",
        group=CHECKS,
        doc="A crowd worker who gives one rating to more than this share of the questions "
        "(once they reach the code's count) is excluded and not given the code; 1: never.",
    )
    # Vision is a health-related attribute: it goes into an export only when the study
    # says so, and never into a raw-id export (docs/participation.md).
    export_vision: bool = flag(
        False,
        label="Put raters' self-reported vision in exports",
        group=REPORT,
        doc="Exports (never the raw-id ones) carry each rater's group: blind or low vision, "
        "or sighted. Off: the group is left out.",
        # Not a report setting though it sits with them: raters answered the vision question
        # under the study's terms as opened, so whether exports carry it is fixed then.
        report=False,
    )
    # Of the report's intervals: a half to 99.9% (a wider one needs more resamples than
    # a report draws).
    confidence: float = number(
        0.95,
        low=0.5,
        high=0.999,
        label="Confidence level of the intervals",
        doc="Confidence level of the report's intervals (0.95: 95%).",
        report=True,
    )

    def check(self) -> None:
        if self.blv_ratings == 0 and self.sighted_ratings == 0:
            raise InvalidInput(
                "blv_ratings: ask at least one group (blind or low-vision raters, or "
                "sighted raters) for a rating of each description",
                field="blv_ratings",
            )
