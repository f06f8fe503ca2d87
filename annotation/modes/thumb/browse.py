"""THumB in the data browser: a judgment scores every caption group of its image.

``payload["captions"]`` holds one entry per group (one normalised text, the captions of
every system that wrote it in ``caption_ids``); each caption of a group gets a note with
the group's scores. The caption's human scores are P, R and Total of the final stage
(stage 2's, stage 1's in a study without stage 2), the judgments the report scores; the
other stages, fluency rounds, checks and catch trials are listed but not averaged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from annotation.models import Judgment, Study
from annotation.modes.browsing import Browse, CaptionNote, number
from annotation.modes.thumb.report import final_stage_of

#: How the notes name each score of a group, in the order they are written.
SHOWN = (
    ("precision", "P"),
    ("recall", "R"),
    ("fluency", "fluency −"),
    ("conciseness", "conciseness −"),
    ("inclusive", "inclusive −"),
    ("total", "Total"),
)


class ThumbBrowse(Browse):
    score_names = ("P", "R", "Total")

    def notes(self, study: Study, judgments: Iterable[Judgment]) -> dict[int, list[CaptionNote]]:
        final_stage = final_stage_of(self.mode.settings(study))
        out: dict[int, list[CaptionNote]] = {}
        for judgment in judgments:
            kind = judgment.item.kind
            groups = (judgment.payload or {}).get("captions")
            notes = []
            for group in groups.values() if isinstance(groups, dict) else ():
                if not isinstance(group, dict):
                    continue
                what = _words(group)
                scores = _scores(group) if kind == final_stage else {}
                for caption_id in group.get("caption_ids") or ():
                    notes.append(CaptionNote(int(caption_id), what, scores))
            out[judgment.pk] = notes
        return out


def _words(group: dict[str, Any]) -> str:
    words = []
    for key, label in SHOWN:
        value = number(group.get(key))
        # A penalty of 0 is the usual case; only the deductions made are worth reading.
        if value is not None and not (label.endswith("−") and value == 0):
            words.append(f"{label}{value:g}" if label.endswith("−") else f"{label} {value:g}")
    errors = group.get("fluency_errors")
    if isinstance(errors, dict) and errors:
        words.append("fluency errors: " + ", ".join(sorted(str(e) for e in errors)))
    return ", ".join(words) or "no deduction"  # a fluency round that found no error


def _scores(group: dict[str, Any]) -> dict[str, float]:
    values = {
        name: number(group.get(key))
        for key, name in (("precision", "P"), ("recall", "R"), ("total", "Total"))
    }
    return {name: value for name, value in values.items() if value is not None}
