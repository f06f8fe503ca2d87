"""The arena mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from django.db.models import Q

from annotation.modes.arena import integrity
from annotation.modes.arena.browse import ArenaBrowse
from annotation.modes.arena.dashboard import ArenaDashboard
from annotation.modes.arena.export import ArenaExport
from annotation.modes.arena.importers import BattleImporter
from annotation.modes.arena.judging import ArenaJudging
from annotation.modes.arena.pages import ArenaPages
from annotation.modes.arena.protocol import (
    BATTLE,
    CATCH,
    OUTCOME_LABELS,
    ArenaProtocol,
)
from annotation.modes.arena.report import ArenaReport
from annotation.modes.arena.simulate import simulated_answers
from annotation.modes.base import Demo, Outcome, WorkerChecks, register
from annotation.modes.capacity import workers_needed_by_unit


@register
class ArenaMode(ArenaProtocol):
    pages_class = ArenaPages
    browse_class = ArenaBrowse
    report_class = ArenaReport
    judging_class = ArenaJudging
    export_class = ArenaExport
    dashboard_class = ArenaDashboard
    importer_classes = (BattleImporter,)
    kind_labels = {BATTLE: "Battles", CATCH: "Gold battles"}
    # After the three published rating protocols.
    menu_order = 40
    # 4 systems (Human and the three bots) give 6 pairs x 9 images = 54 battles, 2 workers
    # each (so the report shows agreement on shared battles); a worker meets each image
    # once, so 9 battles (plus gold) is a worker's most. 14 workers (126 image visits) did
    # not always fill the 108 slots: gold battles take some visits and the last battles may
    # suit no worker left. 20 left one slot empty for the demo's crowd seed once each
    # worker's draws came from their crowd id (gold.worker_seed), so 24 leave slack. The
    # captions are one sentence: 3 s to read.
    demo = Demo(
        live="Demo: Arena caption battles",
        finished="Demo (finished): Arena caption battles",
        finished_workers=24,
        settings={"battle_target": 2, "min_seconds": 3},
        item_words="battles (an image and the captions of two systems)",
    )
    # A gold battle whose real caption did not win.
    worker_checks = WorkerChecks(
        "gold battles",
        counted=Q(judgments__item__kind=CATCH),
        failed=Q(judgments__item__kind=CATCH, judgments__result__catch__caught=False),
    )
    simulate = simulated_answers

    def workers_needed(self, study):
        # A worker never sees an image in two battles (eligible_items), so the battles of
        # one image go to different workers (issue 26).
        return workers_needed_by_unit(
            study,
            kinds=[BATTLE],
            unit="image_id",
            rule="Nobody sees an image in two battles",
            what="an image",
        )

    def completion_reach(self, study):
        # The code's count is capped by what one worker can be served (issue 46, row 2);
        # the researcher is told when that is less than the setting.
        return integrity.reach_sentence(study, self.settings(study))

    def completion_exhausted(self, participant):
        config = self.settings(participant.study)
        fields = integrity.exhausted_fields(participant, config, OUTCOME_LABELS)
        return None if fields is None else Outcome(**fields)
