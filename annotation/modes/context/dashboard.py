"""The context mode's panel of the live dashboard: progress per domain and rater group.

Items only, never raters: how many descriptions-in-context each group has finished and
how many ratings they hold. Nothing here counts or lists participants by their declared
vision (a member of the study sees this panel; vision is never shown per participant).
"""

from __future__ import annotations

from django.db.models import Count, F, Q, Sum

from annotation.models import Item
from annotation.modes.base import Dashboard
from annotation.modes.context.protocol import BLV, SIGHTED

GROUP_WORDS = {BLV: "Blind or low-vision raters", SIGHTED: "Sighted raters"}


class ContextDashboard(Dashboard):
    panel_template = "modes/context/_dashboard_panel.html"
    item_words = "description in one context, for one group of raters"
    no_checks_note = "This mode has no check of the participants beyond the minimum reading time."

    def panel_context(self, study):
        rows = (
            Item.objects.filter(study=study)
            .order_by()
            .values("spec__domain", "kind")
            .annotate(
                # Items a people design left out (target 0, issue 40) are not asked: they
                # are neither counted nor finished.
                items=Count("id", filter=Q(target__gt=0)),
                finished=Count("id", filter=Q(judgment_count__gte=F("target"), target__gt=0)),
                ratings=Sum("judgment_count"),
                wanted=Sum("target"),
            )
        )
        table: dict[str, dict[str, dict[str, int]]] = {}
        for row in rows:
            domain = row["spec__domain"] or "(no domain)"
            table.setdefault(domain, {})[row["kind"]] = {
                "items": row["items"],
                "finished": row["finished"],
                "ratings": row["ratings"] or 0,
                "wanted": row["wanted"] or 0,
            }
        if not table:
            return None
        groups = [g for g in (BLV, SIGHTED) if any(g in cells for cells in table.values())]
        return {
            "groups": [{"kind": g, "words": GROUP_WORDS[g]} for g in groups],
            "domains": [
                {"domain": domain, "cells": [table[domain].get(g) for g in groups]}
                for domain in sorted(table)
            ],
        }
