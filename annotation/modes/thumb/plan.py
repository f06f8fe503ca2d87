"""THumB's planner inputs (``Planner``): two systems of stated quality, by simulation."""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.base import Planner
from rubrics import planner


class ThumbPlanner(Planner):
    # Two stages per caption: the first annotator's scores and the second's review.
    default_judgments = 2
    # A stage of THumB is one image's five captions scored for precision, recall and
    # fluency: 60 s is our assumption (no THumB timing is published), used only when the
    # study has no timed judgments of its own.
    default_seconds = 60.0
    # The report's paired bootstrap of 1,000 resamples per simulation: about 10 times
    # HUMANr's CPU per unit of rubrics.planner.check_budget (measured, see there).
    budget_weight = 10.0

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        """Always the stated assumptions: a pilot from the study would need the report's
        whole assembly of stages. Two systems with a mean Total of ``mean`` and
        ``difference`` between them."""
        result: Any = planner.plan_thumb(
            n_images=sizes,
            assumptions=planner.ThumbAssumptions.two_systems(
                assumptions["mean"], assumptions["difference"]
            ),
            compare=("A", "B"),
            judgments_per_caption=judgments_per_item,
            # The report's own 1,000 resamples: with 100 the percentile interval of each
            # simulated study came out 2-5% narrower than the spread of the studies' means
            # (issue 27; tests/rubrics/test_planner.py compares with a brute-force simulation).
            n_resamples=1000,
            **common,
        )
        return result, "assumptions"
