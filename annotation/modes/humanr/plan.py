"""HUMANr's planner inputs (``Planner``): a Human baseline and one model, by simulation."""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.base import Planner
from rubrics import planner


class HumanrPlanner(Planner):
    # One judgment per comparison, as in the paper.
    default_judgments = 1
    # One comparison is two captions of one image on a slider: 10 s is our assumption, used
    # only when the study has no timed judgments of its own.
    default_seconds = 10.0

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        """Always the stated assumptions (a pilot would need the report's assembly of
        groups): the Human baseline at 0 and a model at ``-difference``, slider spread
        ``spread``."""
        spread = assumptions["spread"]
        result: Any = planner.plan_humanr(
            n_images=sizes,
            assumptions=planner.HumanrAssumptions(
                {
                    "Human": planner.slider_pmf(0.0, spread),
                    "Model": planner.slider_pmf(-assumptions["difference"], spread),
                }
            ),
            judgments_per_item=[judgments_per_item],
            compare="Model",
            n_permutations=200,
            **common,
        )
        return result, "assumptions"
