"""The spans mode's words on the live dashboard."""

from __future__ import annotations

from annotation.modes.dashboarding import Dashboard


class SpansDashboard(Dashboard):
    item_words = "caption to mark"
