"""HUMANr head-to-head (PROTOCOLS.md section 3).

From "ObjectNet Captions: Models are not superhuman captioners" (section 4.2, Fig. 1 and
Fig. 4): workers see an image with two captions, a human one and a model's (or a second
human's, the baseline), and answer on a 1-9 scale which goes best with the image; a
system's HUMANr is the mean answer oriented to the human caption and scaled to [-1, 1].
Comparisons come in groups of ten trials with one attention check, and a failed check
drops its group. ``protocol`` holds the groups, serving and scoring; ``pages``, ``report``
and ``export`` hold the rest.
"""

from django.db.models import Q

from annotation.modes.base import Demo, WorkerChecks, register
from annotation.modes.humanr.browse import HumanrBrowse
from annotation.modes.humanr.capacity import workers_needed
from annotation.modes.humanr.export import HumanrExport
from annotation.modes.humanr.judging import HumanrJudging
from annotation.modes.humanr.pages import HumanrPages, dataset_notes
from annotation.modes.humanr.plan import HumanrPlanner
from annotation.modes.humanr.protocol import (
    CHECK,
    COMPARISON,
    GROUP,
    HumanrProtocol,
    HumanrSettings,
    adaptive_summary,
    reference_on_left,
    sides_shown,
)
from annotation.modes.humanr.report import HumanrReport, summarize
from annotation.modes.humanr.simulate import simulated_answers

__all__ = [
    "CHECK",
    "COMPARISON",
    "GROUP",
    "HumanrMode",
    "HumanrSettings",
    "reference_on_left",
    "sides_shown",
    "summarize",
]


@register
class HumanrMode(HumanrProtocol):
    pages_class = HumanrPages
    browse_class = HumanrBrowse
    report_class = HumanrReport
    judging_class = HumanrJudging
    export_class = HumanrExport
    planner_class = HumanrPlanner
    menu_order = 30
    # A worker meets each image once, so a group of 9 images is all one worker can do; 5
    # workers per comparison give the finished study's report 20 workers to split in halves.
    demo = Demo(
        live="Demo: HUMANr head-to-head",
        finished="Demo (finished): HUMANr head-to-head",
        finished_workers=20,
        finished_settings={"workers_per_comparison": 5},
        item_words="groups of comparisons (one worker each)",
    )
    kind_labels = {GROUP: "Groups of comparisons"}
    # The attention check of each group (``result.check_failed``).
    worker_checks = WorkerChecks(
        "attention checks",
        counted=Q(judgments__result__check_failed=True) | Q(judgments__result__check_failed=False),
        failed=Q(judgments__result__check_failed=True),
    )
    simulate = simulated_answers

    def adaptive_allocation(self, study):
        return adaptive_summary(study)

    def workers_needed(self, study):
        return workers_needed(study)

    def dataset_notes(self, study):
        return dataset_notes(study)
