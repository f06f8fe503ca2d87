"""The arena in the data browser: a battle judgment compares captions A and B of one image
(``item.spec``); ``result["winner"]`` is the outcome in that canonical order, whichever side
was shown left. Each caption gets a note: won, lost or tied against the other system. The
caption's human score is its win share (1 a win, 0.5 a tie, 0 a loss), the battles'
plain reading; a gold battle (a caption against an altered copy) is listed, not averaged.
"""

from __future__ import annotations

from collections.abc import Iterable

from annotation.models import Judgment, Study
from annotation.modes.arena.protocol import CATCH
from annotation.modes.browsing import Browse, CaptionNote

#: The canonical winner's value for caption A (B's is one minus it) and how it reads.
WINS = {"model_a": (1.0, "won"), "model_b": (0.0, "lost"), "tie": (0.5, "tie"),
        "tie (bothbad)": (0.5, "tie, both bad")}  # fmt: skip


class ArenaBrowse(Browse):
    score_names = ("win share",)

    def notes(self, study: Study, judgments: Iterable[Judgment]) -> dict[int, list[CaptionNote]]:
        out: dict[int, list[CaptionNote]] = {}
        for judgment in judgments:
            spec, result = judgment.item.spec or {}, judgment.result or {}
            if judgment.item.kind == CATCH:
                caught = (result.get("catch") or {}).get("caught")
                what = "gold battle against an altered copy: " + ("caught" if caught else "missed")
                caption_id = spec.get("caption_id")
                out[judgment.pk] = [CaptionNote(int(caption_id), what)] if caption_id else []
                continue
            value, word = WINS.get(result.get("winner"), (None, "no outcome"))
            # B's reading is A's turned round: a win for A is a loss for B; ties stay.
            flipped = {"won": "lost", "lost": "won"}.get(word, word)
            sides = (
                ("a", "b", word, value),
                ("b", "a", flipped, None if value is None else 1 - value),
            )
            notes = []
            for own, other, shown, share in sides:
                caption_id = spec.get(f"caption_{own}")
                if caption_id is None:
                    continue
                what = f"{shown} against {spec.get(f'system_{other}', '?')}"
                scores = {"win share": share} if share is not None else {}
                notes.append(CaptionNote(int(caption_id), what, scores))
            out[judgment.pk] = notes
        return out
