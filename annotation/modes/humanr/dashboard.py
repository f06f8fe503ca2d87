"""HUMANr's panel of the live dashboard: what adaptive allocation settled (issue 29)."""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.dashboarding import Dashboard
from annotation.modes.humanr.protocol import adaptive_summary


class HumanrDashboard(Dashboard):
    panel_template = "modes/humanr/_dashboard_panel.html"
    item_words = "group of comparisons"

    def panel_context(self, study: Study) -> dict[str, Any] | None:
        allocation = adaptive_summary(study)
        return None if allocation is None else {"allocation": allocation}
