"""Error spans in the data browser: a judgment marks one caption (``item.spec["caption"]``)
and scores it; the score (0-100, ESA) is the caption's human score, as the report's."""

from __future__ import annotations

from collections.abc import Iterable

from annotation.models import Judgment, Study
from annotation.modes.browsing import Browse, CaptionNote, number
from annotation.modes.spans.protocol import CAPTION


class SpansBrowse(Browse):
    score_names = ("score",)

    def notes(self, study: Study, judgments: Iterable[Judgment]) -> dict[int, list[CaptionNote]]:
        out: dict[int, list[CaptionNote]] = {}
        for judgment in judgments:
            caption_id = (judgment.item.spec or {}).get("caption")
            if judgment.item.kind != CAPTION or caption_id is None:
                out[judgment.pk] = super().notes(study, [judgment])[judgment.pk]
                continue
            payload, result = judgment.payload or {}, judgment.result or {}
            score = number(payload.get("score"))
            marks = payload.get("spans") or []
            if payload.get("unusable"):
                words = ["unusable"]
            else:
                words = ["no score" if score is None else f"score {score:g}"]
            words.append(f"{len(marks)} mark{'' if len(marks) == 1 else 's'}")
            counts = [
                f"{result[key]} {key}" for key in ("major", "minor", "omissions") if result.get(key)
            ]
            if counts:
                words[-1] += " (" + ", ".join(counts) + ")"
            scores = {"score": score} if score is not None else {}
            out[judgment.pk] = [CaptionNote(int(caption_id), ", ".join(words), scores)]
        return out
