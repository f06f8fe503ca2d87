"""A judge's HUMANr answer: the 1-9 slider between the caption shown left and the right one."""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.modes.base import Judging
from annotation.modes.humanr.protocol import _parse_raw
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
