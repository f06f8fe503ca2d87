"""THumB's words on the live dashboard: it serves catch trials and checks captions."""

from __future__ import annotations

from annotation.modes.dashboarding import Dashboard


class ThumbDashboard(Dashboard):
    item_words = "caption set (an image's captions at one stage)"
    catch_trials = True
    # The third annotator re-scores stage 2: a check of captions, so no worker_checks.
    no_checks_note = "This mode checks captions (a third annotator), not participants."
