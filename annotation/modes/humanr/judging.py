"""A judge's HUMANr answer: the 1-9 slider between the caption shown left and the right one."""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Item, Judgment, Study
from annotation.modes.base import Judging
from annotation.modes.humanr.pages import QUESTION
from annotation.modes.humanr.protocol import CHECK, GROUP, _parse_raw
from annotation.modes.humanr.report import record, report_rows
from rubrics import humanr as rules
from rubrics.humanr.estimators import exclusions


class HumanrJudging(Judging):
    unit = "pair"
    # HUMANr's per-system value is the mean comparison value over kept comparisons
    # (rubrics.humanr): per unit, people's mean value and the judge's on the same scale.
    estimate = "share"
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

    # -- people and a judge together (services/people_judges.py)

    def people_values(self, study: Study) -> dict[str, dict[Any, list[float]]]:
        """``{"HUMANr": {(lower id, higher id): [values]}}``: every comparison the report
        keeps (finished groups, not excluded, no failed check in its group), its value
        ``(s - 5) / 4`` in [-1, 1] oriented to the unit's scored caption (the compared
        system's; ``_scored``), neutral answers included as the report counts them."""
        rows = report_rows(Judgment.objects.filter(study=study, item__kind=GROUP))
        if not rows:
            return {}
        responses = rules.Responses.from_records(record(*row[:6]) for row in rows)
        dropped = exclusions(responses).dropped
        values = responses.values()
        scored = _scored(study)
        out: dict[Any, list[float]] = {}
        for index, row in enumerate(rows):
            result = row[4]
            if result.get("kind") == CHECK or dropped[index]:
                continue
            reference, other = result["reference_caption_id"], result["other_caption_id"]
            unit = (min(reference, other), max(reference, other))
            target = scored.get(unit, (other, ""))[0]
            value = float(values[index])
            out.setdefault(unit, []).append(value if other == target else -value)
        return {SCORE: out} if out else {}

    def judge_values(
        self, study: Study, answers: list[tuple[int, int | None, dict[str, Any], dict[str, float]]]
    ) -> dict[str, dict[Any, float]]:
        """``{"HUMANr": {unit: value}}``: the judge's slider on the people's scale, toward
        the unit's scored caption, its runs and both orders averaged."""
        scored = _scored(study)
        sums: dict[Any, list[float]] = {}
        for first, second, answer, _scores in answers:
            if second is None:
                continue
            unit = (min(first, second), max(first, second))
            if unit not in scored:
                continue  # a pair no group compares
            value = (answer["raw"] - rules.NEUTRAL) / 4.0  # toward the caption shown second
            sums.setdefault(unit, []).append(value if second == scored[unit][0] else -value)
        return {SCORE: {unit: sum(v) / len(v) for unit, v in sums.items()}} if sums else {}

    def unit_systems(self, study: Study, units: set[Any]) -> dict[Any, str]:
        """The compared system of each unit ("Human" for the Human-vs-Human baseline)."""
        scored = _scored(study)
        return {unit: scored[unit][1] for unit in units if unit in scored}

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


#: The name of HUMANr's per-unit value in the people + judge report.
SCORE = "HUMANr"


def _scored(study: Study) -> dict[tuple[int, int], tuple[int, str]]:
    """Per unit ``(lower id, higher id)`` of the study's comparisons: the caption its value
    is oriented to (the trial's other caption: the compared system's) and that system. A
    Human-vs-Human pair asked with either reference keeps its first trial's orientation."""
    out: dict[tuple[int, int], tuple[int, str]] = {}
    for item in Item.objects.filter(study=study, kind=GROUP).order_by("id"):
        for trial in item.spec["trials"]:
            reference, other = trial.get("reference_caption_id"), trial.get("other_caption_id")
            if trial.get("kind") == "comparison" and reference and other:
                unit = (min(reference, other), max(reference, other))
                out.setdefault(unit, (other, trial.get("system", "")))
    return out
