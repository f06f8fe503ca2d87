"""The VICR scale (PROTOCOLS.md section 2, paper Table 2) and the game's constants."""

from __future__ import annotations

from typing import Any

__all__ = [
    "LEVELS",
    "MAX_RATING",
    "MIN_RATING",
    "PRIMED_RATINGS",
    "SCALE",
    "SCALE_LABELS",
    "V_MAX",
    "ScaleLevel",
]

MIN_RATING = 1
MAX_RATING = 5
LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)
V_MAX = 4  # largest population variance of ratings on a 1-5 scale (Algorithm 1)
PRIMED_RATINGS = 2  # each game pair starts with 2 primed ratings (section 2, Priming)


class ScaleLevel(str):
    """One VICR scale level (section 2): the full text as a ``str``, plus ``level``/``label``."""

    level: int
    label: str

    def __new__(cls, level: int, label: str, text: str) -> ScaleLevel:
        obj = super().__new__(cls, text)
        obj.level = level
        obj.label = label
        return obj

    @property
    def text(self) -> str:
        """The full level text of PROTOCOLS.md section 2 as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScaleLevel, (self.level, self.label, self.text))


#: Short labels for buttons and charts (ours; the paper gives only the full texts).
SCALE_LABELS: dict[int, str] = {
    5: "Complete, with interpretation",
    4: "Mostly complete, with layout",
    3: "Objects right, no layout",
    2: "Partly right",
    1: "Wrong",
}

_SCALE_TEXTS: dict[int, str] = {
    5: (
        "Objects, a general scene, and actions are correctly identified if present in the "
        "image. The caption describes what is seen and where things are in space. "
        "Interpretation of overall setting and/or event is included."
    ),
    4: (
        "Objects and/or a general scene and/or an action are correctly identified but not "
        "every element is completely identified. The caption describes what is seen and "
        "where things are in space. There is no interpretation of an event."
    ),
    3: (
        "Relevant objects are correctly identified. The caption describes what is seen but "
        "not where objects are in space. There is no description of the overall setting and "
        "no interpretation of an event."
    ),
    2: (
        "Objects are partially correctly identified with some errors, but the caption is "
        "accurate enough to give an idea of what is happening in the image. The caption "
        "identifies most of the objects but might not identify everything. There is no "
        "interpretation of what anything means."
    ),
    1: (
        "Objects are incorrectly identified. The caption gives the wrong idea about what is "
        "happening in the image."
    ),
}

#: The 5 levels keyed 1..5 (highest first, as shown to players). Each value is the exact
#: text of PROTOCOLS.md section 2 (a ``str``) with ``.level``, ``.label`` and ``.text``.
SCALE: dict[int, ScaleLevel] = {
    level: ScaleLevel(level, SCALE_LABELS[level], _SCALE_TEXTS[level]) for level in (5, 4, 3, 2, 1)
}
