"""VICR's part of the live dashboard: its panel of what adaptive stopping saved (issue 15)
and each player's agreement from its report."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Coalesce

from annotation.models import Item, Study
from annotation.modes.dashboarding import Dashboard
from annotation.modes.vicr.protocol import GAME


class VicrDashboard(Dashboard):
    panel_template = "modes/vicr/_dashboard_panel.html"
    item_words = "image-caption pair"
    catch_trials = True

    def panel_context(self, study: Study) -> dict[str, Any] | None:
        saving = adaptive_saving(self.mode, study)
        return None if saving is None else {"saving": saving}

    def worker_agreement(self, result: dict[str, Any]) -> dict[str, float]:
        # The report's players: each against the consensus of the others (``exact``).
        return {
            player["pseudonym"]: player.get("exact")
            for player in result.get("players") or []
            if isinstance(player, dict) and player.get("pseudonym")
        }


def adaptive_saving(mode, study: Study) -> dict[str, int] | None:
    """What VICR's adaptive stopping saved; None when the setting is off.

    A pair stopped early has its ``target`` lowered below ``max_ratings`` by the submission
    that settled it; the ratings it will never collect are ``max_ratings - target``
    (``target`` counts the leases that were out when it stopped, which may still be
    answered). ``ratings_fixed``: what every game pair at ``max_ratings`` would have cost.
    One query.
    """
    config = mode.settings(study)
    if not config.adaptive_stopping:
        return None
    cap = config.max_ratings
    totals = Item.objects.filter(study=study, kind=GAME).aggregate(
        pairs=Count("id"),
        stopped=Count("id", filter=Q(target__lt=cap)),
        below=Coalesce(Sum(cap - F("target"), filter=Q(target__lt=cap)), 0),
    )
    return {
        "pairs_stopped": totals["stopped"],
        "ratings_saved": totals["below"],
        "ratings_fixed": totals["pairs"] * cap,
    }
