"""The test-rating report: a histogram of the ratings, and its figure."""

from typing import Any

from matplotlib.figure import Figure

from annotation.models import Judgment, Study
from annotation.modes import Report


class RatingReport(Report):
    figure_names = ("ratings",)

    def run(self, study: Study, progress) -> dict[str, Any]:
        ratings = [j.payload["rating"] for j in Judgment.objects.filter(study=study)]
        return {"histogram": [ratings.count(value) for value in range(1, 6)]}

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name != "ratings":
            raise KeyError(name)
        figure = Figure(figsize=(3, 2))
        figure.add_subplot().bar(range(1, 6), result["histogram"])
        return figure
