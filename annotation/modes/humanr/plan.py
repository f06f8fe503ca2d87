"""HUMANr's planner inputs (``Planner``): a Human baseline and one model, by simulation."""

from __future__ import annotations

from typing import Any

from annotation.models import Caption, Study
from annotation.modes.base import Planner
from rubrics import planner


class HumanrPlanner(Planner):
    # One judgment per comparison, as in the paper.
    default_judgments = 1
    # One comparison is two captions of one image on a slider: 10 s is our assumption, used
    # only when the study has no timed judgments of its own.
    default_seconds = 10.0
    fields = {
        "difference": "Smallest gap below the Human captions that matters (-1 to 1 scale)",
        "spread": "Spread of the slider answers (steps)",
    }
    judgments_help = "Workers per comparison of two captions of one image."
    uses_systems = True
    target_note = " and whose power to tell the first model from Human reaches 80%"

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        """Always the stated assumptions (a pilot would need the report's assembly of
        groups): the Human baseline at 0 and each model at ``-difference``, slider spread
        ``spread``."""
        spread = assumptions["spread"]
        # The study's own machine systems (a hypothetical "Model" before it has captions),
        # each ``difference`` below the Human baseline; the power is the first one's.
        models = [name for name in self.systems(study) if name != Caption.HUMAN] or ["Model"]
        model = planner.slider_pmf(-assumptions["difference"], spread)
        result: Any = planner.plan_humanr(
            n_images=sizes,
            assumptions=planner.HumanrAssumptions(
                {Caption.HUMAN: planner.slider_pmf(0.0, spread)} | {name: model for name in models}
            ),
            judgments_per_item=[judgments_per_item],
            compare=models[0],
            n_permutations=200,
            **common,
        )
        return result, "assumptions"
