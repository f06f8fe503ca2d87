"""The test-rating planner: its ratings read as one 5-level rating per caption."""

from annotation.models import Study
from annotation.modes.base import Planner
from rubrics import adaptive, planner


class RatingPlanner(Planner):
    unit = "captions"
    default_judgments = 3
    min_judgments = 2
    min_judgments_reason = "The test-rating planner needs at least 2 ratings per caption."

    def plan(self, study: Study, *, sizes, judgments_per_item, assumptions, common):
        model = adaptive.RaterModel.symmetric(
            5, exact=assumptions["exact"], adjacent=assumptions["adjacent"]
        )
        result = planner.plan_vicr(
            n_pairs=sizes,
            ratings_per_pair=[judgments_per_item],
            levels=5,
            repetitions=2,
            model=model,
            **common,
        )
        return result, "assumptions"
