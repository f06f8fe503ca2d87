"""Caption-level human scores as a dataset released them, for the metric lab."""

from __future__ import annotations

from django.db import models

from annotation.models import Caption, Study


class DatasetScore(models.Model):
    """A caption's human score as a published dataset gives it (Nebula, Polaris: the mean
    over its raters, the ratings themselves not released).

    It is a human judgment the study did not collect, so it is kept apart from ``Judgment``
    (whose rows are one person's answer in the study's mode), as ``PairJudgment`` keeps
    Pascal-50S's pairs; the metric lab correlates metrics with it beside the mode's own
    human scores (``services/metrics.py:human_scores``).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="dataset_scores")
    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="dataset_scores")
    name = models.CharField(max_length=100, help_text="The score's name in the report.")
    value = models.FloatField()
    source = models.CharField(max_length=200, blank=True, help_text="File it was imported from.")
    line = models.PositiveIntegerField(default=0, help_text="Entry of the import file.")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["caption", "name"], name="dataset_score_once")
        ]

    def __str__(self) -> str:
        return f"{self.name}={self.value:g}"
