"""VICR's planner inputs (``Planner``): the study's own ratings as the pilot when it has
enough, else a stated rater model, by simulation."""

from __future__ import annotations

from typing import Any

from annotation.models import Judgment, Study
from annotation.modes.base import Planner
from annotation.modes.vicr.protocol import GAME
from rubrics import adaptive, planner

#: The planner's pilot: at least this many VICR pairs with 2+ kept game ratings, else the
#: stated rater model (``rubrics.adaptive.fit_rater_model`` needs a few pairs per level).
PLAN_PILOT_MIN_PAIRS = 10


class VicrPlanner(Planner):
    unit = "pairs"
    # The planner's least: the agreement is measured between ratings of one pair.
    default_judgments = 3
    min_judgments = 3
    # One rating of one image-caption pair on a 1-5 scale: 8 s is our assumption, used only
    # when the study has no timed judgments of its own.
    default_seconds = 8.0
    min_judgments_reason = "VICR's agreement needs at least 3 ratings."
    width_note = " (the spread of the agreement ×100 over the simulated studies)"
    fields = {
        "exact": "Share of ratings at the true level (0 to 1)",
        "adjacent": "Share of ratings one level off (0 to 1)",
    }
    judgments_help = "Ratings per image-caption pair (at least 3)."
    pilot_note = "this study's own ratings (a rater model fitted to them)"

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        """The study is its own pilot with ``PLAN_PILOT_MIN_PAIRS`` pairs of 2+ kept game
        ratings (the rater model is fitted to them); otherwise the stated model
        ``RaterModel.symmetric(exact, adjacent)``."""
        levels = self.mode.settings(study).scale_levels
        ratings: dict[int, list[int]] = {}
        for item_id, rating in (
            Judgment.objects.filter(study=study, item__kind=GAME, excluded=False)
            .order_by("-id")
            .values_list("item_id", "payload__rating")[:20_000]
        ):
            ratings.setdefault(item_id, []).append(int(rating))
        rated = [r for r in ratings.values() if len(r) >= 2]
        pilot, source = "assumptions", {}
        if len(rated) >= PLAN_PILOT_MIN_PAIRS:
            pilot, source = "study", {"pilot": rated}
        else:
            model = adaptive.RaterModel.symmetric(
                levels, exact=assumptions["exact"], adjacent=assumptions["adjacent"]
            )
            source = {"model": model}
        result: Any = planner.plan_vicr(
            n_pairs=sizes,
            ratings_per_pair=[judgments_per_item],
            levels=levels,
            repetitions=10,
            **source,
            **common,
        )
        return result, pilot
