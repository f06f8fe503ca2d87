"""VICR in the data browser: a judgment rates the one caption of its pair
(``item.spec["caption_id"]``). Game ratings are the caption's human score (the ratings the
report and the metric lab read); tutorial and probation ratings are listed, not averaged."""

from __future__ import annotations

from collections.abc import Iterable

from annotation.models import Judgment, Study
from annotation.modes.browsing import Browse, CaptionNote, number
from annotation.modes.vicr.protocol import GAME


class VicrBrowse(Browse):
    score_names = ("rating",)

    def notes(self, study: Study, judgments: Iterable[Judgment]) -> dict[int, list[CaptionNote]]:
        out: dict[int, list[CaptionNote]] = {}
        for judgment in judgments:
            caption_id = (judgment.item.spec or {}).get("caption_id")
            rating = number((judgment.payload or {}).get("rating"))
            kind = judgment.item.kind
            # The phase (tutorial, probation, game) is shown beside every judgment already.
            what = "no rating" if rating is None else f"rated {rating:g}"
            scores = {"rating": rating} if kind == GAME and rating is not None else {}
            out[judgment.pk] = [
                CaptionNote(None if caption_id is None else int(caption_id), what, scores)
            ]
        return out
