"""Scoring one HUMANr answer: the slider, its orientation and the attention check (section 4.2).

The protocol itself is described in the package docstring (``rubrics.humanr``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from typing import Any

import numpy as np

from rubrics import resampling

HUMAN_SYSTEM = "Human"
"""System name of the Human-vs-Human baseline comparisons (PROTOCOLS.md section 0)."""

SLIDER_MIN = 1
SLIDER_MAX = 9
NEUTRAL = 5
"""Slider answers are integers 1-9; 5 means both captions match equally well (section 4.2)."""

GROUP_SIZE = 10
"""Trials per group: 9 comparisons of 9 different images plus 1 attention check (section 4.2)."""


def check_raw(raw: Any, name: str = "raw") -> int:
    """A slider answer as an int 1-9; ValueError naming ``name`` for anything else."""
    if raw is None:
        raise ValueError(f"{name}: missing slider value (the worker must choose)")
    if isinstance(raw, bool | np.bool_) or not isinstance(raw, numbers.Real):
        raise ValueError(f"{name}: slider value must be an integer 1-9, got {raw!r}")
    x = float(raw)
    if not math.isfinite(x) or x != int(x) or not SLIDER_MIN <= x <= SLIDER_MAX:
        raise ValueError(f"{name}: slider value must be an integer 1-9, got {raw!r}")
    return int(x)


def _side(flag: Any, name: str) -> bool:
    if flag is None:
        raise ValueError(f"{name}: missing (which side the caption was shown on)")
    if not isinstance(flag, bool | np.bool_):
        raise ValueError(f"{name}: must be True or False, got {flag!r}")
    return bool(flag)


def orient(raw: Any, human_on_left: Any) -> int:
    """Orient a 1-9 answer so the human (reference) caption is on the left (section 4.2).

    Returns ``raw`` when the human caption was shown on the left, else
    ``10 - raw``; low values then mean the human caption was preferred.
    """
    r = check_raw(raw)
    return r if _side(human_on_left, "human_on_left") else 10 - r


def comparison_value(raw: Any, human_on_left: Any) -> float:
    """Value of one comparison, ``(s - 5) / 4`` in [-1, 1] with s the oriented answer (section 4.2).

    Negative means the human caption was preferred, 0 no preference, positive
    that the machine caption was preferred.
    """
    return (orient(raw, human_on_left) - NEUTRAL) / 4


def attention_check_failed(raw: Any, correct_on_left: Any) -> bool:
    """Whether an attention check failed: oriented answer s >= 5, neutral included (section 4.2).

    ``correct_on_left`` says whether the image's own caption (not the one from
    a random other image) was shown on the left.
    """
    r = check_raw(raw)
    s = r if _side(correct_on_left, "correct_on_left") else 10 - r
    return s >= NEUTRAL


def choose_reference(
    caption_a: Hashable, caption_b: Hashable, seed: int | np.random.Generator
) -> tuple[Hashable, Hashable]:
    """Pick at random which caption of a Human-vs-Human pair is the reference (section 4.2).

    Returns ``(reference, other)``; the caller stores it and later passes
    ``human_on_left=True`` when the reference was shown on the left.
    """
    rng = resampling.as_generator(seed)
    return (caption_a, caption_b) if rng.random() < 0.5 else (caption_b, caption_a)
