"""A judge's error-span answer: marks and an ESA score on one caption, checked like a
person's (``rubrics.spans.validate_judgment`` with the study's settings)."""

from __future__ import annotations

from typing import Any

from annotation.errors import InvalidInput
from annotation.models import Item, Judgment, Study
from annotation.modes.base import Judging
from annotation.modes.spans.protocol import CAPTION, MAX_SPANS_JSON, _field_of
from rubrics import spans as rules


class SpansJudging(Judging):
    unit = "caption"
    answer_help = (
        '{"spans": [{"start", "end", "severity", "category", "text"}], "score": 0-100, '
        '"unusable": false} (code-point offsets into the caption)'
    )

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise InvalidInput("answer: give the marks and score as a JSON object.")
        marks = data.get("spans", [])
        if not isinstance(marks, list) or len(str(marks)) > MAX_SPANS_JSON:
            raise InvalidInput("spans: the marks must be a list (not too long).", field="spans")
        config = self.mode.settings(study)
        try:
            clean = rules.validate_judgment(
                captions[0].text,
                marks,
                score=data.get("score"),
                unusable=data.get("unusable", False),
                categories=config.category_list(),
                max_spans=config.max_spans,
                allow_overlap=config.allow_overlap,
            )
        except ValueError as exc:
            message = str(exc)
            raise InvalidInput(
                message[:1].upper() + message[1:], field=_field_of(message)
            ) from None
        return {
            "spans": [
                {
                    "start": m.start,
                    "end": m.end,
                    "severity": m.severity,
                    "category": m.category,
                    "text": m.text,
                    "note": m.note,
                    "omission": m.omission,
                }
                for m in clean.spans
            ],
            "score": clean.score,
            "unusable": clean.unusable,
        }

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        return {"score": float(answer["score"])}

    def human_scores(self, study: Study) -> dict[str, list[tuple[int, float]]]:
        """The ESA score of every kept judgment (the report's per-system means use them)."""
        rows = Judgment.objects.filter(study=study, excluded=False, item__kind=CAPTION)
        out = [
            (int(spec["caption"]), float(payload["score"]))
            for spec, payload in rows.values_list("item__spec", "payload")
            if payload.get("score") is not None
        ]
        return {"score": out} if out else {}

    def item_unit(self, item: Item) -> tuple[int, int | None] | None:
        return (item.spec["caption"], None) if item.kind == CAPTION else None

    def task_prompt(self, study: Study) -> str:
        categories = ", ".join(self.mode.settings(study).category_list()) or "any"
        return (
            "Mark the errors of the caption against the image (Error Span Annotation): each "
            "error span is minor or major, given by its start and end offsets in code points "
            f"into the caption and its exact text; categories: {categories}. Then give the "
            "caption an overall score from 0 (no meaning preserved) to 100 (perfect), with "
            "the marked errors in view.\n\nCaption: {caption}\n\n"
            'Reply with only a JSON object: {"spans": [{"start": <int>, "end": <int>, '
            '"severity": "minor" | "major", "category": <text>, "text": <the span>}], '
            '"score": <0-100>}'
        )
