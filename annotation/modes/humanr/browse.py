"""HUMANr in the data browser: a trial compares two captions of one image, the human
reference and another (``Judgment.result``: the sides shown and their caption ids).

Both captions get a note naming the other one. The compared caption's human score is the
trial's value, ``(s - 5) / 4`` in [-1, 1] (negative: the human caption preferred), the
number HUMANr averages per system; attention checks are listed, never averaged.
"""

from __future__ import annotations

from collections.abc import Iterable

from annotation.models import Judgment, Study
from annotation.modes.browsing import Browse, CaptionNote, number
from annotation.modes.humanr.protocol import CHECK


class HumanrBrowse(Browse):
    score_names = ("value",)

    def notes(self, study: Study, judgments: Iterable[Judgment]) -> dict[int, list[CaptionNote]]:
        out: dict[int, list[CaptionNote]] = {}
        for judgment in judgments:
            result = judgment.result or {}
            reference, other = result.get("reference_caption_id"), result.get("other_caption_id")
            raw = (judgment.payload or {}).get("raw")
            side = "left" if result.get("reference_on_left") else "right"
            trial = f"trial {judgment.part + 1}, answer {raw} of 9, reference on the {side}"
            if result.get("kind") == CHECK:
                verdict = "failed" if result.get("check_failed") else "passed"
                what = f"attention check {verdict} ({trial})"
                out[judgment.pk] = [
                    CaptionNote(int(caption_id), what)
                    for caption_id in (reference, other)
                    if caption_id is not None
                ]
                continue
            value = number(result.get("value"))
            shown = "no value" if value is None else f"value {value:+.2f}"
            notes = []
            if reference is not None:
                notes.append(CaptionNote(int(reference), f"as the reference: {shown} ({trial})"))
            if other is not None:
                scores = {"value": value} if value is not None else {}
                notes.append(
                    CaptionNote(int(other), f"against the reference: {shown} ({trial})", scores)
                )
            out[judgment.pk] = notes
        return out
