"""The HUMANr mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from django.db.models import Q

from annotation.modes.base import Demo, WorkerChecks, register
from annotation.modes.humanr.browse import HumanrBrowse
from annotation.modes.humanr.capacity import workers_needed
from annotation.modes.humanr.dashboard import HumanrDashboard
from annotation.modes.humanr.export import HumanrExport
from annotation.modes.humanr.importers import NebulaImporter, Pascal50sImporter
from annotation.modes.humanr.judging import HumanrJudging
from annotation.modes.humanr.pages import HumanrPages, dataset_notes
from annotation.modes.humanr.plan import HumanrPlanner
from annotation.modes.humanr.protocol import (
    GROUP,
    HumanrProtocol,
)
from annotation.modes.humanr.report import HumanrReport
from annotation.modes.humanr.simulate import simulated_answers


@register
class HumanrMode(HumanrProtocol):
    pages_class = HumanrPages
    browse_class = HumanrBrowse
    report_class = HumanrReport
    judging_class = HumanrJudging
    export_class = HumanrExport
    importer_classes = (Pascal50sImporter, NebulaImporter)
    planner_class = HumanrPlanner
    dashboard_class = HumanrDashboard
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

    def workers_needed(self, study):
        return workers_needed(study)

    def dataset_notes(self, study):
        return dataset_notes(study)
