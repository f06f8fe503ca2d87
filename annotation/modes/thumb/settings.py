"""THumB's settings (the study form's fields; ``protocol.py`` re-exports them).

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
    flag,
    number,
    whole,
)
from annotation.modes.thumb import integrity


@dataclass(frozen=True)
class ThumbSettings(integrity.CrowdPaceSettings):
    # The catch-trial settings come from CatchSettings (docs/protocol-choices.md), the
    # crowd's minimum time from CrowdPaceSettings (issue 29).
    # Images to sample (with the study's seed); None: every eligible image. Only imported
    # images are sampled, so the bound refuses nonsense: no human study judges 100,000.
    n_images: int | None = whole(
        None,
        low=1,
        high=MAX_SAMPLED_IMAGES,
        optional=True,
        label="Images to judge",
        doc="Images to sample with the study's seed; empty: every image with a human caption.",
    )
    stage2: bool = flag(
        True,
        label="A second annotator reviews every image",
        group=CHECKS,
        doc="A second annotator reviews, and may correct, each stage-1 judgment.",
    )
    require_native_fluency: bool = flag(
        True,
        label="Fluency read by a native English speaker",
        group=CHECKS,
        doc="An image no native English speaker judged gets a fluency-only round.",
    )
    # Resamples of the report's paired bootstrap; see MAX_RESAMPLES for the bound.
    bootstrap_resamples: int = whole(
        1000,
        low=100,
        high=MAX_RESAMPLES,
        label="Resamples for the confidence intervals",
        doc="Resamples of the report's bootstrap.",
        report=True,
    )
    confidence: float = number(
        0.90,
        low=0,
        high=1,
        open_ends=True,
        label="Confidence level",
        doc="The report's confidence level.",
        report=True,
    )
    # Weights of P and R in Total; the report page can re-weight (see ThumbReport.context).
    # The paper's Total is 0.5/0.5; a weight of 100 already drowns the other and the
    # penalties, so larger ones are typing mistakes (and infinity made Total meaningless).
    weight_precision: float = number(
        0.5,
        low=0,
        high=100,
        label="Weight of precision in the total",
        doc="Weight of precision in Total (the paper's 0.5).",
        report=True,
    )
    weight_recall: float = number(
        0.5,
        low=0,
        high=100,
        label="Weight of recall in the total",
        doc="Weight of recall in Total (the paper's 0.5).",
        report=True,
    )
    # Items (stage 1, stage 2, check or fluency) a crowd worker judges to earn the code.
    completion_images: int = whole(
        5,
        low=1,
        high=10_000,
        label="Items a crowd worker judges to earn the code",
        group=CROWD,
        doc="Items a crowd worker judges to earn the completion code.",
    )
    # Caption texts a third annotator checks after stage 2 (paper section 2.1, footnote 3:
    # "a third annotator did not change the scores for all 100 captions randomly sampled");
    # 0: no check. Drawn with the seed when the study opens; nothing to check without stage
    # 2. Checking more than 100,000 captions is a third stage, not a sample.
    third_check_captions: int = whole(
        100,
        low=0,
        high=100_000,
        label="Captions a third annotator checks",
        group=CHECKS,
        doc="Captions a third annotator checks after stage 2; 0: no check.",
    )
    # The first N images in study order are a developmental phase: their scores count, but
    # the stage-1/stage-2 agreement leaves them out (paper section 2.1; docs/
    # protocol-choices.md says why the default is 0, not the paper's 50).
    developmental_images: int = whole(
        0,
        low=0,
        high=MAX_SAMPLED_IMAGES,
        label="Trial-run images left out of the agreement",
        group=CHECKS,
        doc="First images in study order left out of the stage-1/stage-2 agreement (a trial run).",
    )
