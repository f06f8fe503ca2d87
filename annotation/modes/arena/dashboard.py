"""The arena's part of the live dashboard: its words (its gold battles are its worker
check) and, for an adaptive study, the design's panel: which report it reads, when the next
refresh comes (``ArenaReport.refresh_due``) and which system pairs it serves most."""

from __future__ import annotations

from typing import Any

from annotation.models import Job, Judgment, Study
from annotation.modes.arena.protocol import BATTLE
from annotation.modes.dashboarding import Dashboard

#: Pairs the panel names, the design's most served first.
PAIRS_SHOWN = 3


class ArenaDashboard(Dashboard):
    panel_template = "modes/arena/_dashboard_panel.html"
    item_words = "battle (an image and the captions of two systems)"

    def panel_context(self, study: Study) -> dict[str, Any] | None:
        """The adaptive design's state; None for a uniform study. Three queries: the
        battles answered, the latest report's count and time, and the design (read from
        that report once per process, ``pair_probabilities``)."""
        config = self.mode.settings(study)
        if not config.adaptive:
            return None
        answered = Judgment.objects.filter(study=study, item__kind=BATTLE).count()
        latest = (
            Job.objects.filter(study=study, kind=Job.Kind.REPORT, status=Job.Status.DONE)
            .order_by("-id")
            .values("finished_at", "result__battles_stored")
            .first()
        )
        seen = int((latest or {}).get("result__battles_stored") or 0)
        design = self.mode.pair_probabilities(study)
        even = 1 / len(design) if design else 0.0
        most = sorted(design.items(), key=lambda pair: (-pair[1], pair[0]))[:PAIRS_SHOWN]
        refresh = config.adaptive_refresh
        return {
            "goal": goal_words(config),
            "report_battles": seen if latest else None,
            "report_at": latest["finished_at"] if latest else None,
            "since": answered - seen,
            "refresh": refresh,
            "next_in": max(refresh - (answered - seen), 0) if refresh else None,
            "pairs": len(design),
            "even_percent": round(100 * even, 1),
            "most": [(a, b, round(100 * p, 1)) for (a, b), p in most],
            "adapted": any(abs(p - even) > 1e-9 for p in design.values()),
        }


def goal_words(config) -> str:
    """What the design settles, in the settings' terms."""
    if config.adaptive_goal == "top":
        return f"which {config.adaptive_top} systems are the best"
    if config.adaptive_goal == "system":
        return f"{config.adaptive_system} against each other system"
    return "the whole order of the systems"
