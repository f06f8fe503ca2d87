"""The data browser's part of the mode contract: what a judgment says of which caption.

The data browser (``/studies/<id>/items/`` and ``GET /api/studies/<id>/items/``, see
``annotation/selectors_items.py``) lists a study's images with their captions and, under
each caption, the judgments about it. Where a judgment's captions and answer live differs
per mode (THumB scores every caption group of its image in ``payload["captions"]``, VICR
rates the caption in ``item.spec["caption_id"]``, HUMANr and the arena compare two), so the
browser asks the mode: ``mode.browse.notes(study, judgments)`` turns judgments into
``CaptionNote``s, each naming one caption (or none: the image as a whole), the answer in
words and the numbers the browser averages into the caption's human scores.

The default knows nothing of the payload's shape: every judgment becomes one note of its
item's image as a whole, its payload written out as ``key: value`` words. A mode overrides
``notes`` (in its ``browse.py``) to put each judgment under the captions it is about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from annotation.models import Judgment, Study

#: Longest text a note quotes of a payload value (a spans note, a free-text comment).
NOTE_VALUE_CHARS = 80


@dataclass(frozen=True)
class CaptionNote:
    """What one judgment says of one caption.

    ``caption_id``: the caption (None: the judgment's image as a whole, shown beside the
    image); ``what``: the answer in words a researcher reads ("rated 4", "P 4, R 5, total
    4.5"); ``scores``: ``{name: value}`` the browser averages over the caption's judgments
    that are not excluded (the caption's human scores; empty: this note adds none).
    """

    caption_id: int | None
    what: str
    scores: dict[str, float] = field(default_factory=dict)


def payload_words(payload: Any) -> str:
    """A payload as ``key: value`` words, scalars only (nested values counted), sorted by
    key so two judgments read alike; long texts cut to ``NOTE_VALUE_CHARS``."""
    if not isinstance(payload, dict):
        return _short(payload)
    words = []
    for key in sorted(payload, key=str):
        value = payload[key]
        if isinstance(value, dict | list):
            words.append(f"{key}: {len(value)} entr{'y' if len(value) == 1 else 'ies'}")
        else:
            words.append(f"{key}: {_short(value)}")
    return ", ".join(words) or "(empty answer)"


def _short(value: Any) -> str:
    text = "—" if value is None else str(value)
    return text if len(text) <= NOTE_VALUE_CHARS else text[: NOTE_VALUE_CHARS - 1] + "…"


def number(value: Any) -> float | None:
    """``value`` as a float if it is a number (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class Browse:
    """How the data browser shows the mode's judgments (see the module doc).

    ``score_names``: the human scores ``notes`` may give, in the order the browser shows
    them (names not listed come after, sorted). ``notes`` is called with the judgments of
    one page, each with ``item`` loaded; it must not query per judgment (the page's query
    count stays constant in its size: a test counts them).
    """

    score_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mode: Any):  # the Mode (base.py imports this module)
        self.mode = mode

    def notes(self, study: Study, judgments: Iterable[Judgment]) -> dict[int, list[CaptionNote]]:
        """``{judgment id: [CaptionNote, ...]}``. Default: one note of the image as a whole
        per judgment, its payload in words."""
        return {
            judgment.pk: [CaptionNote(None, payload_words(judgment.payload))]
            for judgment in judgments
        }
