"""The THumB rules of one caption: score values, the fluency error table, Total, validation.

Source: Kasai et al., "Transparent Human Evaluation for Image Captioning" (NAACL 2022),
sections 2.2.1-2.2.3 and Table 6, as distilled in ``../shared/PROTOCOLS.md`` sections 0
and 1. Penalties are POSITIVE deductions here (the THumB 1.0 release stores them <= 0;
negate them before calling anything here). ValueError names the field at fault.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CONCISENESS_VALUES",
    "FLUENCY_ERRORS",
    "HUMAN_SYSTEM",
    "INCLUSIVE_VALUES",
    "MAX_FLUENCY_PENALTY",
    "SCORE_VALUES",
    "CaptionScores",
    "FluencyError",
    "fluency_penalty",
    "normalise",
    "total",
    "validate_caption_scores",
]

HUMAN_SYSTEM = "Human"
"""System name of human-written captions (PROTOCOLS.md section 0)."""

SCORE_VALUES: tuple[int, ...] = (1, 2, 3, 4, 5)
"""Allowed precision and recall values (paper section 2.2.1)."""

CONCISENESS_VALUES: tuple[float, ...] = (0.0, 0.5)
"""Allowed conciseness penalties (paper section 2.2.2)."""

INCLUSIVE_VALUES: tuple[float, ...] = (0.0, 0.5, 2.0)
"""Allowed inclusive-language penalties: none, subjective comment, severe (section 2.2.2)."""

_TOL = 1e-6  # tolerance for "on the 0.1 grid" and value-set membership checks


# ---------------------------------------------------------------------------
# Text normalisation (paper section 2.2.3, "Text Processing")
# ---------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Normalise a caption for display and metrics (paper section 2.2.3, Text Processing).

    Strip surrounding whitespace, uppercase the first character, remove the
    spaces before a final period, and add a final period when the text does not
    end with one. Only a final ``.`` counts as a period (``"Wow!"`` becomes
    ``"Wow!."``, the literal rule). Raises ValueError on an empty caption.
    """
    if not isinstance(text, str):
        raise ValueError(f"caption text must be a string, got {type(text).__name__}")
    clean = text.strip()
    if not clean:
        raise ValueError("caption text is empty")
    if clean.endswith("."):
        clean = clean[:-1].rstrip() + "."
    else:
        clean += "."
    if clean == ".":
        raise ValueError("caption text has no words")
    return clean[0].upper() + clean[1:]


# ---------------------------------------------------------------------------
# Fluency error table (paper Table 6, appendix A.1)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FluencyError:
    """One fluency error type of paper Table 6: a fixed penalty or an annotator-picked range."""

    key: str
    label: str
    example: str
    penalty: float | None = None
    """Fixed penalty, or None when the annotator picks an amount from ``amount_range``."""
    amount_range: tuple[float, float, float] | None = None
    """(minimum, maximum, step) for annotator-picked amounts, else None."""

    @property
    def is_fixed(self) -> bool:
        """Whether the penalty is fixed (paper Table 6)."""
        return self.penalty is not None

    @property
    def max_amount(self) -> float:
        """Largest penalty this error type can contribute (paper Table 6)."""
        if self.penalty is not None:
            return self.penalty
        assert self.amount_range is not None
        return self.amount_range[1]


FLUENCY_ERRORS: dict[str, FluencyError] = {
    e.key: e
    for e in (
        FluencyError(
            "spelling",
            "Obvious spelling error, one vs. two words",
            "cel phone, surf board",
            penalty=0.1,
        ),
        FluencyError(
            "grammar", "Grammatical error that can be easily fixed", "a otter", penalty=0.1
        ),
        FluencyError("casing", "Casing issue", "tv, christmas", penalty=0.1),
        FluencyError("hyphenation", "Hyphenation", "horse drawn carriage", penalty=0.1),
        FluencyError(
            "unnatural_wording",
            "Interpretable but unnatural wording",
            "double decked bus",
            penalty=0.1,
        ),
        FluencyError(
            "punctuation",
            "Non-trivial punctuation",
            "A bird standing in the wooded area with leaves all around.",
            penalty=0.2,
        ),
        FluencyError(
            "misleading_spelling",
            "Misleading spelling error",
            "A good stands in the grass next to the water. (good -> goose)",
            penalty=0.5,
        ),
        FluencyError(
            "duplication", "Duplication", "A display case of donuts and doughnuts.", penalty=0.5
        ),
        FluencyError(
            "ambiguity", "Ambiguity", "A cat is on a table with a cloth on it.", penalty=0.5
        ),
        FluencyError(
            "awkward_construction",
            "Awkward construction",
            "There is a freshly made pizza out of the oven.",
            amount_range=(0.1, 0.5, 0.1),
        ),
        FluencyError(
            "broken_sentence",
            "Broken sentence",
            "A large concrete sign small buildings behind it.",
            amount_range=(0.5, 2.0, 0.1),
        ),
    )
}
"""Paper Table 6 as data: type key -> error type (label, example, penalty or range)."""

MAX_FLUENCY_PENALTY: float = round(sum(e.max_amount for e in FLUENCY_ERRORS.values()), 1)
"""Largest possible fluency penalty of one caption: every type selected at its maximum (4.7)."""


# ---------------------------------------------------------------------------
# Scalar validation helpers
# ---------------------------------------------------------------------------


def _number(value: Any, name: str) -> float:
    if value is None:
        raise ValueError(f"{name}: missing value")
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return x


def _score(value: Any, name: str) -> int:
    x = _number(value, name)
    if x != int(x):
        raise ValueError(f"{name}: must be an integer 1-5, got {value!r}")
    if not 1 <= x <= 5:
        raise ValueError(f"{name}: must be an integer 1-5, got {value!r}")
    return int(x)


def _on_tenth_grid(x: float) -> bool:
    return abs(x * 10 - round(x * 10)) <= _TOL


def _in_set(x: float, allowed: Sequence[float]) -> float | None:
    for a in allowed:
        if abs(x - a) <= _TOL:
            return a
    return None


def _fluency_total(value: Any, name: str = "fluency") -> float:
    x = _number(value, name)
    if x < -_TOL or x > MAX_FLUENCY_PENALTY + _TOL:
        raise ValueError(
            f"{name}: must be a positive deduction between 0 and {MAX_FLUENCY_PENALTY}, "
            f"got {value!r}"
        )
    if not _on_tenth_grid(x):
        raise ValueError(f"{name}: must be a multiple of 0.1, got {value!r}")
    return round(abs(x), 1)


def _conciseness(value: Any, name: str = "conciseness") -> float:
    x = _number(value, name)
    a = _in_set(x, CONCISENESS_VALUES)
    if a is None:
        raise ValueError(f"{name}: must be 0 or 0.5 (a positive deduction), got {value!r}")
    return a


def _inclusive(value: Any, name: str = "inclusive") -> float:
    x = _number(value, name)
    a = _in_set(x, INCLUSIVE_VALUES)
    if a is None:
        raise ValueError(f"{name}: must be 0, 0.5 or 2 (a positive deduction), got {value!r}")
    return a


def _fluency_amount(key: Any, amount: Any) -> float:
    if not isinstance(key, str) or key not in FLUENCY_ERRORS:
        raise ValueError(
            f"fluency: unknown error type {key!r}; known types: {', '.join(FLUENCY_ERRORS)}"
        )
    err = FLUENCY_ERRORS[key]
    name = f"fluency[{key}]"
    if err.penalty is not None:
        if amount is None:
            return err.penalty
        x = _number(amount, name)
        if abs(x - err.penalty) > _TOL:
            raise ValueError(f"{name}: fixed penalty {err.penalty}; pass None, got {amount!r}")
        return err.penalty
    assert err.amount_range is not None
    lo, hi, _step = err.amount_range
    if amount is None:
        raise ValueError(f"{name}: the annotator must pick an amount from {lo} to {hi}")
    x = _number(amount, name)
    if x < lo - _TOL or x > hi + _TOL:
        raise ValueError(f"{name}: amount must be from {lo} to {hi}, got {amount!r}")
    if not _on_tenth_grid(x):
        raise ValueError(f"{name}: amount must be a multiple of 0.1, got {amount!r}")
    return round(x, 1)


# ---------------------------------------------------------------------------
# Scalar API
# ---------------------------------------------------------------------------


def fluency_penalty(errors: Mapping[str, float | None] | None) -> float:
    """Fluency penalty of one caption, the sum of its selected errors (paper Table 6, A.1).

    ``errors`` maps an error type key of ``FLUENCY_ERRORS`` to the amount: None
    for fixed-penalty types (or exactly their fixed penalty), the annotator's
    pick for range types (on the 0.1 step). Each type is selected at most once.
    Returns the sum rounded to one decimal; ``{}`` or None gives 0.0.
    """
    if errors is None:
        return 0.0
    if not isinstance(errors, Mapping):
        raise ValueError(f"fluency: errors must map error type -> amount, got {errors!r}")
    return round(sum(_fluency_amount(k, v) for k, v in errors.items()), 1)


def total(
    precision: Any,
    recall: Any,
    fluency: Any = 0.0,
    conciseness: Any = 0.0,
    inclusive: Any = 0.0,
) -> float:
    """Total of one caption (paper section 2.2): (P + R) / 2 - (fluency + conciseness + inclusive).

    Penalties are positive deductions: ``fluency`` is the summed fluency penalty
    (0 to 4.7 on the 0.1 step), ``conciseness`` 0 or 0.5, ``inclusive`` 0, 0.5
    or 2. The result lies on the 0.1 grid and is rounded to one decimal.
    """
    p = _score(precision, "precision")
    r = _score(recall, "recall")
    f = _fluency_total(fluency)
    c = _conciseness(conciseness)
    i = _inclusive(inclusive)
    return round((p + r) / 2 - (f + c + i), 1)


@dataclass(frozen=True)
class CaptionScores:
    """Validated THumB scores of one caption (paper section 2.2)."""

    precision: int
    recall: int
    fluency_errors: dict[str, float]
    """Selected fluency error types -> penalty each contributes."""
    fluency: float
    conciseness: float
    inclusive: float

    @property
    def total(self) -> float:
        """Total of these scores (paper section 2.2)."""
        return total(self.precision, self.recall, self.fluency, self.conciseness, self.inclusive)

    def as_dict(self) -> dict[str, Any]:
        """These scores and their Total as a JSON-serialisable dict (paper section 2.2)."""
        return {
            "precision": self.precision,
            "recall": self.recall,
            "fluency_errors": dict(self.fluency_errors),
            "fluency": self.fluency,
            "conciseness": self.conciseness,
            "inclusive": self.inclusive,
            "total": self.total,
        }


def validate_caption_scores(
    precision: Any,
    recall: Any,
    fluency_errors: Mapping[str, float | None] | None = None,
    conciseness: Any = 0.0,
    inclusive: Any = 0.0,
) -> CaptionScores:
    """Validate one caption's annotation form (paper section 2.2); ValueError names the field.

    ``fluency_errors`` is the mapping accepted by ``fluency_penalty``; the
    returned ``CaptionScores.fluency_errors`` holds the resolved amount of
    every selected type.
    """
    p = _score(precision, "precision")
    r = _score(recall, "recall")
    if fluency_errors is None:
        fluency_errors = {}
    if not isinstance(fluency_errors, Mapping):
        raise ValueError(f"fluency: errors must map error type -> amount, got {fluency_errors!r}")
    resolved = {k: _fluency_amount(k, v) for k, v in fluency_errors.items()}
    return CaptionScores(
        precision=p,
        recall=r,
        fluency_errors=resolved,
        fluency=round(sum(resolved.values()), 1),
        conciseness=_conciseness(conciseness),
        inclusive=_inclusive(inclusive),
    )
