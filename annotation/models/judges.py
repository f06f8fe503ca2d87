"""Automatic judges: raters that are not people (a VLM asked the humans' question, a learned
metric, or answers imported from a published release).

A ``Judge`` belongs to one study; each ``JudgeAnswer`` answers one unit of the study's mode
(a caption, or an ordered pair of captions as shown) as the mode's ``judging`` component
checked it (``annotation/modes/base.py``, ``Judging``). They are kept apart from
``Judgment`` on purpose: no human score, count, progress bar or export of human judgments
reads these tables, so a judge can never leak into what people said. Answers are never
deleted; a repeated run of the same judge on the same unit is a new ``run`` number.
"""

from django.db import models
from django.db.models import Q

from annotation.models import Caption, Item, Study


class Judge(models.Model):
    """Who answered: a name, the model behind it and the prompt version it was asked with."""

    class Kind(models.TextChoices):
        VLM = "vlm", "Vision-language model"
        METRIC = "metric", "Learned metric"
        IMPORTED = "imported", "Imported answers"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=100)
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=50, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.IMPORTED)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "prompt_version", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "name", "model", "prompt_version"], name="judge_unique_in_study"
            )
        ]

    def __str__(self) -> str:
        version = f" ({self.prompt_version})" if self.prompt_version else ""
        return f"{self.name}{version}"


class JudgeAnswer(models.Model):
    """One judge's answer to one unit: ``caption`` alone, or ``caption`` then ``caption_b``
    in the order the judge was shown them (a pair asked both ways is two rows)."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="answers")
    item = models.ForeignKey(
        Item, on_delete=models.PROTECT, null=True, blank=True, related_name="judge_answers"
    )
    caption = models.ForeignKey(Caption, on_delete=models.PROTECT, related_name="+")
    caption_b = models.ForeignKey(
        Caption, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    run = models.PositiveSmallIntegerField(
        default=0, help_text="Repeat number of the same question (runs at temperature > 0)."
    )
    answer = models.JSONField(help_text="The answer as the mode's validation cleaned it.")
    scores = models.JSONField(help_text="The per-unit scores the report compares with humans.")
    raw_reply = models.TextField(blank=True, help_text="What the judge replied, verbatim.")
    line = models.PositiveIntegerField(default=0, help_text="Line of the import file.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "caption", "run"],
                condition=Q(caption_b__isnull=True),
                name="one_judge_answer_per_caption_and_run",
            ),
            models.UniqueConstraint(
                fields=["judge", "caption", "caption_b", "run"],
                condition=Q(caption_b__isnull=False),
                name="one_judge_answer_per_pair_and_run",
            ),
        ]

    def __str__(self) -> str:
        return f"answer {self.pk} of judge {self.judge_id}"
