"""HUMANr's planner inputs (``Planner``): the study's own comparisons as the pilot when it
has enough, else a Human baseline and the study's models by stated assumptions; by
simulation either way."""

from __future__ import annotations

from typing import Any

from annotation.models import Assignment, Caption, Judgment, Study
from annotation.modes.base import Planner
from annotation.modes.humanr.protocol import GROUP
from annotation.modes.humanr.report import record, report_rows
from rubrics import humanr as rules
from rubrics import planner

#: The planner's pilot: the study's own kept comparisons once the Human baseline and every
#: model have them on at least this many images (the pilot is resampled by image).
PLAN_PILOT_MIN_IMAGES = 10
#: The pilot is the study's latest finished groups, at most this many (10 judgments each):
#: a planner request reads a bounded number of rows whatever the study's size.
PLAN_PILOT_MAX_GROUPS = 2_000


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
    pilot_note = "this study's own kept comparisons, resampled by image"
    uses_systems = True
    target_note = " and whose power to tell the first model from Human reaches 80%"

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        """The study is its own pilot (``pilot``) when it has enough; otherwise the stated
        assumptions: the Human baseline at 0 and each model at ``-difference``, slider
        spread ``spread``. The power is the first model's against Human."""
        # The study's own machine systems (a hypothetical "Model" before it has captions).
        models = [name for name in self.systems(study) if name != Caption.HUMAN] or ["Model"]
        own = self.pilot(study, models, judgments_per_item)
        if own is not None:
            result: Any = planner.plan_humanr(
                n_images=sizes, pilot=own, compare=models[0], n_permutations=200, **common
            )
            return result, "study"
        spread = assumptions["spread"]
        model = planner.slider_pmf(-assumptions["difference"], spread)
        result = planner.plan_humanr(
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

    def pilot(
        self, study: Study, models: list[str], judgments_per_item: int
    ) -> rules.Responses | None:
        """The study's latest finished groups as the report reads them, or None when they
        cannot be the pilot: the researcher asks about another number of workers per
        comparison than the study's own (a pilot's comparisons come with the judgments they
        had), or the Human baseline or a model has kept comparisons on fewer than
        ``PLAN_PILOT_MIN_IMAGES`` images."""
        if judgments_per_item != self.mode.settings(study).workers_per_comparison:
            return None
        groups = list(
            Assignment.objects.filter(
                item__study=study, item__kind=GROUP, status=Assignment.Status.SUBMITTED
            )
            .order_by("-id")
            .values_list("id", flat=True)[:PLAN_PILOT_MAX_GROUPS]
        )
        if not groups:
            return None
        rows = report_rows(Judgment.objects.filter(study=study, assignment_id__in=groups))
        responses = rules.Responses.from_records(record(*row[:6]) for row in rows)
        images = planner.humanr_pilot_images(responses)
        needed = [Caption.HUMAN, *models]
        if any(images.get(name, 0) < PLAN_PILOT_MIN_IMAGES for name in needed):
            return None
        return responses
