"""THumB's planner inputs (``Planner``): two systems of stated quality, by simulation."""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.base import Planner
from rubrics import planner


class ThumbPlanner(Planner):
    # Two stages per caption: the first annotator's scores and the second's review.
    default_judgments = 2

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
            n_resamples=100,
            **common,
        )
        return result, "assumptions"
