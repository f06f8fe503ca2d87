"""The arena's part of the live dashboard: its words (its gold battles are its worker
check) and, for an adaptive study, the design's panel: which report it reads, when the next
refresh comes (``ArenaReport.refresh_due``) and which system pairs it serves most."""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.arena.report import refresh_state
from annotation.modes.dashboarding import Dashboard

#: Pairs the panel names, the design's most served first.
PAIRS_SHOWN = 3


class ArenaDashboard(Dashboard):
    panel_template = "modes/arena/_dashboard_panel.html"
    item_words = "battle (an image and the captions of two systems)"

    def panel_context(self, study: Study) -> dict[str, Any] | None:
        """The adaptive design's state; None for a uniform study. Three queries: the two of
        ``refresh_state`` and the design's (read from that report once per process,
        ``pair_probabilities``)."""
        config = self.mode.settings(study)
        state = refresh_state(study, config)
        if state is None:
            return None
        design = self.mode.pair_probabilities(study)
        even = 1 / len(design) if design else 0.0
        most = sorted(design.items(), key=lambda pair: (-pair[1], pair[0]))[:PAIRS_SHOWN]
        return {
            "goal": goal_words(config),
            "report_battles": state.seen if state.report_at else None,
            "report_at": state.report_at,
            "since": state.answered - state.seen,
            "refresh": config.adaptive_refresh,
            "next_in": state.next_in,
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
