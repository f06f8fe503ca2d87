"""The VICR mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from django.db.models import Q

from annotation.modes.base import Demo, WorkerChecks, register
from annotation.modes.vicr.browse import VicrBrowse
from annotation.modes.vicr.capacity import workers_needed
from annotation.modes.vicr.captions import PURPOSES, VicrCaptionColumns
from annotation.modes.vicr.dashboard import VicrDashboard
from annotation.modes.vicr.export import VicrExport
from annotation.modes.vicr.importers import IMPORT_NOTES, RatingsImporter
from annotation.modes.vicr.judging import VicrJudging
from annotation.modes.vicr.pages import VicrPages
from annotation.modes.vicr.plan import VicrPlanner
from annotation.modes.vicr.protocol import (
    EXCLUDED,
    GAME,
    PROBATION,
    TUTORIAL,
    VicrProtocol,
)
from annotation.modes.vicr.report import VicrReport
from annotation.modes.vicr.simulate import simulated_answers


@register
class VicrMode(VicrProtocol):
    pages_class = VicrPages
    browse_class = VicrBrowse
    report_class = VicrReport
    judging_class = VicrJudging
    export_class = VicrExport
    importer_classes = (RatingsImporter,)
    import_notes = IMPORT_NOTES
    caption_purposes = PURPOSES
    caption_columns_class = VicrCaptionColumns
    planner_class = VicrPlanner
    dashboard_class = VicrDashboard
    menu_order = 20
    # The demo's pools hold 10 tutorial and 20 probation pairs, fewer than the protocol's
    # blocks need once they are drawn per player (10, and 20 for each of 2 attempts), and
    # fewer than the default gate_pool_multiple of 3 asks: the demo plays half-size blocks
    # from pools twice one player's draw. Its tutorial pass mark, 8 of 10, is one point above
    # what any constant answer (all 1s, ..., all 5s) can earn on any draw of 5 of its 10
    # pairs (at most 7: two exact and three one level off), so a bot answering "3" cannot
    # pass (issue 29 row 17; tests/annotation/test_integrity2_vicr.py checks every constant
    # on every draw). Probation needs the same 8 of 10: its pool has five pairs rated 1 and
    # five rated 2, so no pass mark short of full marks stops every lucky draw, but at 8 a
    # constant answer passes an attempt on under 3% of draws (the test counts them).
    demo = Demo(
        live="Demo: VICR rating game",
        finished="Demo (finished): VICR rating game",
        finished_workers=12,
        settings={
            "tutorial_pairs": 5,
            "tutorial_pass": 8,
            "probation_pairs": 5,
            "probation_pass": 8,
            "gate_pool_multiple": 2,
        },
        captions="vicr_captions.csv",
        item_words="captions to rate (game, tutorial and probation)",
        extra_captions=(("vicr_tutorial.csv", TUTORIAL), ("vicr_probation.csv", PROBATION)),
    )
    kind_labels = {TUTORIAL: "Tutorial", PROBATION: "Probation", GAME: "Game pairs"}
    # The end of a tutorial, of a probation attempt and the first-game check
    # (``result.transition``), failed when it leads anywhere but the game.
    worker_checks = WorkerChecks(
        "tutorial, probation and first-game checks",
        counted=Q(judgments__result__has_key="transition"),
        failed=Q(judgments__result__transition__to__in=[PROBATION, EXCLUDED]),
    )
    simulate = simulated_answers
    workers_needed = workers_needed
