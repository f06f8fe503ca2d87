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
    fields = {
        "mean": "Mean score (Total, 1 to 5) of the better system",
        "difference": "Smallest difference between two systems that matters",
    }
    judgments_help = "Judgments per caption: THumB's two stages (scoring, then review) make 2."
    uses_systems = True
    target_note = " and whose power to tell the first two systems apart reaches 80%"

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        """Always the stated assumptions: a pilot from the study would need the report's
        whole assembly of stages.

        The study's own systems (``systems``; hypothetical "A" and "B" before it has
        captions): the first (Human when it has human captions) at a mean Total of
        ``mean``, every other ``difference`` below it, and the power compares the first two
        (so the cost counts every system's captions, as the study will)."""
        systems = self.systems(study)
        if len(systems) < 2:
            systems = ["A", "B"]
        better = assumptions["mean"]
        worse = better - assumptions["difference"]
        result: Any = planner.plan_thumb(
            n_images=sizes,
            assumptions=planner.ThumbAssumptions(
                means={name: better if i == 0 else worse for i, name in enumerate(systems)}
            ),
            compare=(systems[0], systems[1]),
            judgments_per_caption=judgments_per_item,
            # The report's own 1,000 resamples: with 100 the percentile interval of each
            # simulated study came out 2-5% narrower than the spread of the studies' means
            # (issue 27; tests/rubrics/test_planner.py compares with a brute-force simulation).
            n_resamples=1000,
            **common,
        )
        return result, "assumptions"
