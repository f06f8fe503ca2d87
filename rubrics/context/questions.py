"""The context mode's questions and scales (wording: see SOURCE and docs/protocol-choices.md).

Dimension names are fixed by the mode's judgment payloads: part 0 (before the image, every
rater) answers ``BEFORE``; part 1 (after the image, sighted raters only) answers ``AFTER``
and a free-text "what is missing".
"""

from __future__ import annotations

__all__ = ["AFTER", "BEFORE", "GROUPS", "SCALE_MAX", "SCALE_MIN"]

BEFORE = ("overall", "imaginability", "relevance", "irrelevance")
"""Dimensions rated before the image is shown (every rater)."""

AFTER = ("overall", "accuracy")
"""Dimensions rated after the image is shown (sighted raters only)."""

GROUPS = ("blv", "sighted")
"""Rater groups, reported apart: blind or low-vision, and sighted."""

SCALE_MIN, SCALE_MAX = 1, 5
