"""The questions of a context item, as the mode's modules import them.

The wording, scales and sources live in ``rubrics/context/questions.py`` (pure protocol
data); this module re-exports them for the mode's pages, validation, export and judge,
with the names the mode used first (``LOWEST``, ``SCALE_TOP``) kept as aliases.
"""

from __future__ import annotations

from rubrics.context.questions import (
    AFTER,
    BEFORE,
    MISSING_QUESTION,
    QUESTIONS,
    SCALE_MAX,
    SCALE_MIN,
    Question,
)

__all__ = [
    "AFTER",
    "BEFORE",
    "LOWEST",
    "MISSING_QUESTION",
    "QUESTIONS",
    "SCALE_MAX",
    "SCALE_MIN",
    "SCALE_TOP",
    "Question",
]

LOWEST, SCALE_TOP = SCALE_MIN, SCALE_MAX
