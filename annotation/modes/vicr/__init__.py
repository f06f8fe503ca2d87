"""The VICR rating game (PROTOCOLS.md section 2): tutorial, probation, game, report.

From Narins et al. 2023, "Validated Image Caption Rating Dataset" (NeurIPS Datasets and
Benchmarks): players learn the 1-to-5 scale on pairs with expert ratings (the tutorial, and
probation when they fall short), then rate image-caption pairs in a game scored against the
consensus of the pair's earlier ratings (Algorithm 1). ``protocol`` holds the rules and
the player's phases; ``pages``, ``report`` and ``export`` hold the rest.
"""

from annotation.modes.base import register
from annotation.modes.vicr.export import VicrExport
from annotation.modes.vicr.pages import VicrPages
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


@register
class VicrMode(VicrProtocol):
    pages_class = VicrPages
    report_class = VicrReport
    export_class = VicrExport


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
