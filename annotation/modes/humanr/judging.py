"""A judge's HUMANr answer: the 1-9 slider between the caption shown left and the right one."""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Item, Study
from annotation.modes.base import Judging
from annotation.modes.humanr.pages import QUESTION
from annotation.modes.humanr.protocol import GROUP, _parse_raw
from rubrics import humanr as rules


class HumanrJudging(Judging):
    unit = "pair"
    answer_help = '{"raw": 1-9} (1: only the caption shown first matches, 9: only the second)'

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ServiceError("answer: give the slider value as a JSON object.")
        return {"raw": _parse_raw(data.get("raw"))}

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        # The human pairs count the neutral 5 as no preference (human_pairs drops it): here
        # it is a tie, so the tie rule of the report applies to it.
        raw = answer["raw"]
        return {"choice": 0.0 if raw < rules.NEUTRAL else 1.0 if raw > rules.NEUTRAL else 0.5}

    def units(self, study: Study) -> list[tuple[int | None, int, int | None]]:
        """Each comparison of the groups (attention checks are no question for a judge),
        the reference (human) caption shown first."""
        out: dict[tuple[int, int], int] = {}
        for item in Item.objects.filter(study=study, kind=GROUP).order_by("id"):
            for trial in item.spec["trials"]:
                first, second = trial.get("reference_caption_id"), trial.get("other_caption_id")
                if trial.get("kind") == "comparison" and first and second:
                    out.setdefault((first, second), item.pk)
        return [(item, first, second) for (first, second), item in out.items()]

    def task_prompt(self, study: Study) -> str:
        return (
            f"{QUESTION}\n\nCaption A: {{caption_a}}\nCaption B: {{caption_b}}\n\n"
            "Answer on a scale from 1 to 9: 1 = only caption A matches the image, 5 = both "
            "match equally well, 9 = only caption B matches the image.\n\n"
            'Reply with only a JSON object: {"raw": <1 to 9>}'
        )

    def parse_reply(self, text: str) -> Any:
        """A bare slider value ("7") or a JSON object with ``raw``."""
        stripped = text.strip().rstrip(".")
        return {"raw": int(stripped)} if stripped.isdigit() else super().parse_reply(text)
