"""A judge's VICR answer: one caption's rating on the study's scale, checked like a player's."""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Item, Judgment, Study
from annotation.modes.base import Judging
from annotation.modes.vicr.protocol import GAME, _parse_rating
from rubrics import vicr as rules


class VicrJudging(Judging):
    unit = "caption"
    answer_help = '{"rating": 1-5} (1-4 on a four-level study)'

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ServiceError("answer: give the rating as a JSON object.")
        levels = self.mode.settings(study).scale_levels
        return {"rating": _parse_rating(data.get("rating"), levels)}

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        return {"rating": float(answer["rating"])}

    def scale(self, study: Study) -> dict[str, tuple[int, int]]:
        return {"rating": (1, self.mode.settings(study).scale_levels)}

    def human_labels(self, study: Study) -> list[tuple[int, Any, Any]]:
        """Every stored game rating, excluded ones too, as the report's reliability section
        takes them (the model judges raters, not pairs)."""
        rows = Judgment.objects.filter(study=study, item__kind=GAME).values_list(
            "participant_id", "item__spec", "payload"
        )
        return [(p, spec["caption_id"], int(payload["rating"])) for p, spec, payload in rows]

    def item_unit(self, item: Item) -> tuple[int, int | None] | None:
        return (item.spec["caption_id"], None) if item.kind == GAME else None

    def task_prompt(self, study: Study) -> str:
        levels = self.mode.settings(study).scale_levels
        guide = "\n".join(f"{level}: {rules.SCALE[level].text}" for level in range(levels, 0, -1))
        return (
            "Rate how well the caption describes the image, on the rating guide below "
            f"(1 to {levels}).\n\nRating guide:\n{guide}\n\nCaption: {{caption}}\n\n"
            'Reply with only a JSON object: {"rating": <1 to ' + str(levels) + ">}"
        )

    def parse_reply(self, text: str) -> Any:
        """A bare rating ("4") or a JSON object with ``rating``."""
        stripped = text.strip().rstrip(".")
        return {"rating": int(stripped)} if stripped.isdigit() else super().parse_reply(text)
