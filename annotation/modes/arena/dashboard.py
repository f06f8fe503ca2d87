"""The arena's words on the live dashboard (its gold battles are its worker check)."""

from __future__ import annotations

from annotation.modes.dashboarding import Dashboard


class ArenaDashboard(Dashboard):
    item_words = "battle (an image and the captions of two systems)"
