"""A judge's THumB answer: one caption's P, R and penalties, checked like a person's form."""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Caption, Study
from annotation.modes.base import Judging
from annotation.modes.thumb.protocol import ThumbProtocol
from rubrics import thumb as rubric


class ThumbJudging(Judging):
    unit = "caption"
    answer_help = (
        '{"precision": 1-5, "recall": 1-5, "fluency_errors": {...}, "conciseness": 0|0.5, '
        '"inclusive": 0|0.5|2} (the THumB form of one caption)'
    )

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ServiceError("answer: give the caption's scores as a JSON object.")
        # The stage-1 form's own check (no review tick: a judge does not review).
        return ThumbProtocol._validate_group(
            "answer", "answer", data, fluency_only=False, review=False
        )

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        total = rubric.total(
            answer["precision"],
            answer["recall"],
            answer["fluency"],
            answer["conciseness"],
            answer["inclusive"],
        )
        return {
            "P": float(answer["precision"]),
            "R": float(answer["recall"]),
            "Total": float(total),
        }

    def scale(self, study: Study) -> dict[str, tuple[int, int]]:
        return {"P": (1, 5), "R": (1, 5)}

    def units(self, study: Study) -> list[tuple[int | None, int, int | None]]:
        """Every study caption (a THumB item is an image's whole caption set)."""
        rows = Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
        return [(None, pk, None) for pk in rows.order_by("id").values_list("pk", flat=True)]

    def task_prompt(self, study: Study) -> str:
        errors = "\n".join(
            f"- {key}: {error.label}" for key, error in rubric.FLUENCY_ERRORS.items()
        )
        return (
            "Score the caption of the image with the THumB rubric.\n\n"
            f"{rubric.PRECISION_DEFINITION}\n\n{rubric.RECALL_DEFINITION}\n\n"
            "Fluency errors (name each one found; awkward and broken take an amount):\n"
            f"{errors}\n\n"
            "Conciseness penalty: 0, or 0.5 for an overly repetitive or exhaustive caption. "
            "Inclusive-language penalty: 0, 0.5 for a subjective comment about appearance, "
            "2 for a severe case.\n\nCaption: {caption}\n\n"
            'Reply with only a JSON object: {"precision": <1-5>, "recall": <1-5>, '
            '"fluency_errors": {}, "conciseness": 0, "inclusive": 0}'
        )
