"""The THumB rubric (Kasai et al. 2022): an image's caption set scored in two stages.

Items, one set per image:

* ``stage1``: an annotator scores every caption group of the image (P, R, penalties);
* ``stage2``: a different annotator sees the stage-1 scores and confirms or modifies each
  field; served only once stage 1 is judged, never to the stage-1 annotator;
* ``fluency``: created after the last stage when no annotator of the image is a native
  English speaker (``User.native_english``); served to native speakers only;
* ``check``: a third annotator's review of the final (stage-2) scores of the image's
  captions in the study's random sample (``third_check_captions``, drawn when the study
  opens), created when stage 2 is stored and served only to someone who did neither stage
  of the image. It measures the two stages (the report's check agreement); the scores stay
  stage 2's.

A caption group is one normalised text: identical texts of several systems are shown once
and the scores apply to each caption of the group. Only one caption per (image, system)
is shown (the first imported); further captions of a system, e.g. extra human references,
are left out, so the report has one row per (image, system) as the paper's tables do.

The protocol rules and the statistics live in ``rubrics.thumb``; ``protocol`` maps them onto
items, judgments and participants, ``pages``, ``report`` and ``export`` onto the pages, the
report and the export table.
"""

from annotation.modes.base import Demo, register
from annotation.modes.capacity import workers_needed_by_unit
from annotation.modes.thumb.browse import ThumbBrowse
from annotation.modes.thumb.export import ThumbExport
from annotation.modes.thumb.judging import ThumbJudging
from annotation.modes.thumb.pages import ThumbPages
from annotation.modes.thumb.plan import ThumbPlanner
from annotation.modes.thumb.protocol import (
    CHECK,
    FLUENCY,
    KINDS,
    SCORE_FIELDS,
    STAGE1,
    STAGE2,
    ThumbProtocol,
    ThumbSettings,
)
from annotation.modes.thumb.report import ThumbReport
from annotation.modes.thumb.simulate import simulated_answers


@register
class ThumbMode(ThumbProtocol):
    pages_class = ThumbPages
    browse_class = ThumbBrowse
    report_class = ThumbReport
    judging_class = ThumbJudging
    export_class = ThumbExport
    planner_class = ThumbPlanner
    menu_order = 10  # the new-study page's default
    demo = Demo(
        live="Demo: THumB rubric",
        finished="Demo (finished): THumB rubric",
        finished_workers=8,
        finished_settings={"third_check_captions": 10},
        item_words="caption sets to score (stage 1, stage-2 reviews and checks)",
    )
    kind_labels = {
        STAGE1: "Stage 1: first scores",
        STAGE2: "Stage 2: second annotator's review",
        FLUENCY: "Fluency round (native speaker)",
        CHECK: "Third annotator's check",
    }
    # THumB checks captions, not workers (the third annotator re-scores stage 2): no
    # worker_checks.
    simulate = simulated_answers

    def workers_needed(self, study):
        # Stage 1, the review and the third annotator's check of one image go to three
        # different annotators (eligible_items), so an image's stages need that many
        # (issue 26). The fluency round is left out: any native speaker may take it.
        return workers_needed_by_unit(
            study,
            kinds=[STAGE1, STAGE2, CHECK],
            unit="image_id",
            rule="Each stage of an image goes to a different annotator",
            what="an image",
        )


__all__ = [
    "CHECK",
    "FLUENCY",
    "KINDS",
    "SCORE_FIELDS",
    "STAGE1",
    "STAGE2",
    "ThumbExport",
    "ThumbMode",
    "ThumbPages",
    "ThumbReport",
    "ThumbSettings",
]
