"""The arena: battles between captioning systems (PROTOCOLS.md section 5).

A worker sees an image and two captions of two different systems, sides drawn per lease,
and answers one of LMArena's four outcomes (optionally ImageInWords' five per-criterion
labels); the report fits a Bradley-Terry leaderboard on LMArena's scale with bootstrap
intervals, beside a length-controlled one (``rubrics/arena.py``, ``rubrics/arena_style.py``).
Gold battles feed the catch-trial exclusion rule (``annotation/modes/catch.py``).
"""

from django.db.models import Q

from annotation.modes.arena.export import ArenaExport
from annotation.modes.arena.pages import ArenaPages
from annotation.modes.arena.protocol import BATTLE, CATCH, ArenaProtocol, ArenaSettings
from annotation.modes.arena.report import ArenaReport
from annotation.modes.arena.simulate import simulated_answers
from annotation.modes.base import WorkerChecks, register


@register
class ArenaMode(ArenaProtocol):
    pages_class = ArenaPages
    report_class = ArenaReport
    export_class = ArenaExport
    kind_labels = {BATTLE: "Battles", CATCH: "Gold battles"}
    # After the three published rating protocols.
    menu_order = 40
    # A gold battle whose real caption did not win.
    worker_checks = WorkerChecks(
        "gold battles",
        counted=Q(judgments__item__kind=CATCH),
        failed=Q(judgments__item__kind=CATCH, judgments__result__catch__caught=False),
    )
    simulate = simulated_answers


__all__ = ["ArenaExport", "ArenaMode", "ArenaPages", "ArenaReport", "ArenaSettings"]
