"""The THumB mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from annotation.models import User
from annotation.modes.base import Demo, register
from annotation.modes.capacity import workers_needed_by_unit
from annotation.modes.thumb.browse import ThumbBrowse
from annotation.modes.thumb.dashboard import ThumbDashboard
from annotation.modes.thumb.export import ThumbExport
from annotation.modes.thumb.importers import ThumbReleaseImporter
from annotation.modes.thumb.judging import ThumbJudging
from annotation.modes.thumb.models import Rater
from annotation.modes.thumb.pages import ThumbPages
from annotation.modes.thumb.plan import ThumbPlanner
from annotation.modes.thumb.protocol import (
    CHECK,
    FLUENCY,
    STAGE1,
    STAGE2,
    ThumbProtocol,
)
from annotation.modes.thumb.report import ThumbReport
from annotation.modes.thumb.simulate import simulated_answers


def _demo_rater(user: User, number: int) -> list[Rater]:
    """annotator1 is a native English speaker, annotator2 is not: between them the demo
    shows both sides of the fluency rule."""
    return [Rater(user=user, native_english=True)] if number == 1 else []


@register
class ThumbMode(ThumbProtocol):
    pages_class = ThumbPages
    browse_class = ThumbBrowse
    report_class = ThumbReport
    judging_class = ThumbJudging
    export_class = ThumbExport
    importer_classes = (ThumbReleaseImporter,)
    planner_class = ThumbPlanner
    dashboard_class = ThumbDashboard
    menu_order = 10  # the new-study page's default
    demo = Demo(
        live="Demo: THumB rubric",
        finished="Demo (finished): THumB rubric",
        finished_workers=8,
        finished_settings={"third_check_captions": 10},
        item_words="caption sets to score (stage 1, stage-2 reviews and checks)",
        annotator_rows=_demo_rater,
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
