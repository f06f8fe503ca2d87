"""The test-rating report: a histogram of the ratings, and its figure."""

from typing import Any

from matplotlib.figure import Figure

from annotation.models import Judgment, Study
from annotation.modes.base import Report


class RatingReport(Report):
    template = "modes/ratingmode/report.html"
    figure_names = ("ratings",)
    summary_keys = ("histogram",)

    def human_scores(self, study: Study) -> tuple[dict[str, list[tuple[int, float]]], str]:
        """Every kept rating of a caption, with Kendall's tau-c (ratings are 5 levels)."""
        rows = Judgment.objects.filter(study=study, excluded=False).values_list(
            "item__spec", "payload"
        )
        return {
            "rating": [(spec["caption"], float(payload["rating"])) for spec, payload in rows]
        }, "kendall_tau_c"

    def run(self, study: Study, progress) -> dict[str, Any]:
        ratings = [j.payload["rating"] for j in Judgment.objects.filter(study=study)]
        return {"histogram": [ratings.count(value) for value in range(1, 6)]}

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name != "ratings":
            raise KeyError(name)
        figure = Figure(figsize=(3, 2))
        figure.add_subplot().bar(range(1, 6), result["histogram"])
        return figure
