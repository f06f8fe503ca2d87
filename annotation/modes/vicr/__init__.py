"""The VICR rating game (PROTOCOLS.md section 2): tutorial, probation, game, report.

From Narins et al. 2023, "Validated Image Caption Rating Dataset" (NeurIPS Datasets and
Benchmarks): players learn the 1-to-5 scale on pairs with expert ratings (the tutorial, and
probation when they fall short), then rate image-caption pairs in a game scored against the
consensus of the pair's earlier ratings (Algorithm 1). ``protocol`` holds the rules and
the player's phases; ``pages``, ``report`` and ``export`` hold the rest.
"""

from django.db.models import Q

from annotation.modes.base import WorkerChecks, register
from annotation.modes.vicr.export import VicrExport
from annotation.modes.vicr.pages import VicrPages
from annotation.modes.vicr.plan import VicrPlanner, adaptive_saving
from annotation.modes.vicr.protocol import (
    BLOCK_KINDS,
    EXCLUDED,
    GAME,
    PROBATION,
    TUTORIAL,
    UNLIMITED,
    VicrProtocol,
    VicrSettings,
    player_state,
)
from annotation.modes.vicr.report import AGREEMENT_LABELS, VicrReport
from annotation.modes.vicr.simulate import simulated_answers


@register
class VicrMode(VicrProtocol):
    pages_class = VicrPages
    report_class = VicrReport
    export_class = VicrExport
    planner_class = VicrPlanner
    menu_order = 20
    kind_labels = {TUTORIAL: "Tutorial", PROBATION: "Probation", GAME: "Game pairs"}
    # The end of a tutorial, of a probation attempt and the first-game check
    # (``result.transition``), failed when it leads anywhere but the game.
    worker_checks = WorkerChecks(
        "tutorial, probation and first-game checks",
        counted=Q(judgments__result__has_key="transition"),
        failed=Q(judgments__result__transition__to__in=[PROBATION, EXCLUDED]),
    )
    simulate = simulated_answers
    adaptive_saving = adaptive_saving


__all__ = [
    "AGREEMENT_LABELS",
    "BLOCK_KINDS",
    "EXCLUDED",
    "GAME",
    "PROBATION",
    "TUTORIAL",
    "UNLIMITED",
    "VicrExport",
    "VicrMode",
    "VicrPages",
    "VicrReport",
    "VicrSettings",
    "player_state",
]
