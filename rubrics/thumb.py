"""THumB 1.0 rubric: rules, validation and the per-system report.

Source: Kasai et al., "Transparent Human Evaluation for Image Captioning"
(NAACL 2022), as distilled in ``../shared/PROTOCOLS.md`` sections 0 and 1.

Scores of one caption:

* precision P and recall R, integers 1-5 (paper section 2.2.1);
* three penalties, stored as POSITIVE deductions (paper section 2.2.2):
  fluency (sum of the selected error types of paper Table 6), conciseness
  (0 or 0.5) and inclusive language (0, 0.5 or 2);
* Total = (P + R) / 2 - (fluency + conciseness + inclusive).

The THumB 1.0 release stores penalties as values <= 0; negate them before
calling anything here (the functions refuse negative penalties).

Choices this module makes where the paper is silent (documented where applied):

* a fluency error type is either selected or not for a caption (the paper's
  casing example "tv, christmas" is one selection covering two words); the
  caption's fluency penalty is the sum over the selected types;
* integral floats such as ``4.0`` are accepted as integer scores (the THumB 1.0
  release stores P and R as floats); ``True``/``False`` are refused;
* ``report`` uses nan-aware means when an image lacks a system's caption (see
  its docstring); undefined statistics are returned as ``None``, never NaN;
* ``check_agreement`` counts a checked caption as changed when any of its fields
  differs from the final scores (the paper's "did not change the scores").
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics import checks
from rubrics.agreement import cohen_kappa, pearson
from rubrics.resampling import as_generator, paired_cluster_bootstrap_means, percentile_levels
from rubrics.robustness import paired_reversal

__all__ = [
    "CONCISENESS_VALUES",
    "EXAMPLES",
    "FLUENCY_ERRORS",
    "HUMAN_SYSTEM",
    "INCLUSIVE_VALUES",
    "MAX_FLUENCY_PENALTY",
    "PRECISION_DEFINITION",
    "RECALL_DEFINITION",
    "RULES",
    "SCORE_VALUES",
    "CaptionJudgments",
    "CaptionScores",
    "FluencyError",
    "RubricExample",
    "RubricRule",
    "ScoreArrays",
    "check_agreement",
    "check_sample",
    "developmental_images",
    "fluency_penalty",
    "normalise",
    "report",
    "stage_agreement",
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


# ---------------------------------------------------------------------------
# Rubric texts shown on the annotation page
# ---------------------------------------------------------------------------

PRECISION_DEFINITION = (
    "Precision (P, 1-5) measures how precise the caption is given the image. It guards against "
    "hallucinated objects and covers objects and their properties, attributes, occasions, "
    "locations and the relations between objects. Reserve 4 for relatively minor issues: an "
    "attribute that is almost correct (pink vs. red), or something the image does not "
    "contradict but does not guarantee either."
)
"""Definition of precision shown to annotators (paper section 2.2.1)."""

RECALL_DEFINITION = (
    "Recall (R, 1-5) measures how much of the salient information in the image (objects, "
    "attributes, relations, colour) the caption covers. Generic, uninformative captions score "
    "low: 'small animal' is precise for an otter but much less informative than 'otter'. Ask: "
    "what image does this caption lead me to imagine? When it fits many images that differ "
    "substantially from this one, recall is low."
)
"""Definition of recall shown to annotators (paper section 2.2.1)."""


@dataclass(frozen=True)
class RubricRule:
    """One rule of THumB the annotation guide shows (paper section 2.2.3)."""

    key: str
    title: str
    text: str


RULES: tuple[RubricRule, ...] = (
    RubricRule(
        "double_penalties",
        "Avoid double penalties",
        "When an error is accounted for in precision, correct it before scoring recall: score "
        "recall as if the caption said the right thing (a dog that is really an otter costs "
        "precision only). This correction does not apply to hallucinated objects, which have no "
        "counterpart in the image.",
    ),
    RubricRule(
        "counts_are_attributes",
        "Object counts are attributes",
        "A wrong count is a precision error ('three frisbees' when there are two). A vague "
        "'some frisbees' when the count is clearly two is a recall problem.",
    ),
    RubricRule(
        "black_and_white",
        "Black-and-white photos",
        "Ignore whether a caption mentions that the photo is black and white or grey-scale.",
    ),
    RubricRule(
        "implied_information",
        "Implied information",
        "Do not take recall points off for information the caption already implies (a "
        "double-decker bus is typically red).",
    ),
    RubricRule(
        "imagine",
        "Recall: what would you imagine?",
        "For recall ask: what image does this caption lead me to imagine? If it fits many "
        "images that differ substantially from this one, recall should be low.",
    ),
)
"""The rules of paper section 2.2.3 as PROTOCOLS.md states them."""


@dataclass(frozen=True)
class RubricExample:
    """One worked example of paper Table 1 (no conciseness or inclusive penalty)."""

    example_id: str
    systems: tuple[str, ...]
    caption: str
    precision: int
    recall: int
    fluency: float
    total: float


EXAMPLES: tuple[RubricExample, ...] = (
    RubricExample("1-A", ("Up-Down",), "A dog playing with a frisbee on the ground.", 3, 4, 0, 3.5),
    RubricExample(
        "1-B",
        ("VinVL-base",),
        "A otter is laying on the sand next to two frisbees.",
        5,
        4,
        0.1,
        4.4,
    ),
    RubricExample(
        "1-C",
        ("VinVL-large",),
        "A small animal laying on a rock with three frisbees.",
        4,
        3,
        0,
        3.5,
    ),
    RubricExample("2-A", ("Up-Down",), "A close up of a plate of broccoli.", 5, 3, 0, 4.0),
    RubricExample(
        "2-B",
        ("Unified-VLP", "VinVL-base", "VinVL-large"),
        "A plate of pasta and broccoli on a table.",
        4,
        4,
        0,
        4.0,
    ),
    RubricExample(
        "2-C",
        ("Human",),
        "A multi colored dish with broccoli and white twisted pasta in it.",
        5,
        5,
        0.1,
        4.9,
    ),
    RubricExample(
        "3-A", ("Unified-VLP",), "A little girl holding a video game controller.", 3, 4, 0, 3.5
    ),
    RubricExample(
        "3-B", ("VinVL-large",), "A little girl is blow drying her hair on a couch.", 4, 5, 0, 4.5
    ),
    RubricExample(
        "3-C", ("Human",), "A little girl holding a blow dryer next to her head.", 5, 5, 0, 5.0
    ),
    RubricExample("4-A", ("Up-Down",), "A black cat laying in a red suitcase.", 3, 5, 0, 4.0),
    RubricExample(
        "4-B",
        ("Unified-VLP", "VinVL-base", "VinVL-large"),
        "A black cat sitting on top of a red suitcase.",
        5,
        5,
        0,
        5.0,
    ),
    RubricExample(
        "4-C",
        ("Human",),
        "A large black cat laying on top of a pink piece of luggage.",
        4,
        5,
        0,
        4.5,
    ),
    RubricExample(
        "5-A",
        ("Up-Down", "Unified-VLP"),
        "A man standing in front of a display of donuts.",
        3,
        2,
        0,
        2.5,
    ),
    RubricExample(
        "5-B", ("VinVL-large",), "A woman standing behind a counter at a donut shop.", 5, 3, 0, 4.0
    ),
    RubricExample(
        "5-C",
        ("Human",),
        "Woman selling doughnuts with doughnut stock in the background.",
        5,
        5,
        0.3,
        4.7,
    ),
)
"""Paper Table 1 worked examples, caption texts as printed there."""


# ---------------------------------------------------------------------------
# Arrays for the report
# ---------------------------------------------------------------------------

_FIELDS = ("precision", "recall", "fluency", "conciseness", "inclusive")


def _score_array(values: ArrayLike, name: str, n: int | None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name}: has {arr.shape[0]} rows, expected {n}")
    if arr.dtype == object:
        if any(v is None for v in arr):
            raise ValueError(f"{name}: missing value (None)")
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: values must be numbers") from exc
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: values must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: row {bad} is missing or not finite ({arr[bad]!r})")
    return arr


def _check_scores(arr: np.ndarray, name: str) -> np.ndarray:
    bad = (arr != np.round(arr)) | (arr < 1) | (arr > 5)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}: row {i} must be an integer 1-5, got {arr[i]!r}")
    return arr


def _check_fluency(arr: np.ndarray) -> np.ndarray:
    grid = np.abs(arr * 10 - np.round(arr * 10)) > _TOL
    bad = grid | (arr < -_TOL) | (arr > MAX_FLUENCY_PENALTY + _TOL)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"fluency: row {i} must be a positive deduction from 0 to {MAX_FLUENCY_PENALTY} "
            f"on the 0.1 step, got {arr[i]!r}"
        )
    return np.abs(np.round(arr, 1))


def _check_in(arr: np.ndarray, allowed: Sequence[float], name: str) -> np.ndarray:
    ok = np.zeros(arr.shape, dtype=bool)
    for a in allowed:
        ok |= np.abs(arr - a) <= _TOL
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        vals = ", ".join(f"{a:g}" for a in allowed)
        raise ValueError(f"{name}: row {i} must be one of {vals} (positive), got {arr[i]!r}")
    return np.abs(np.round(arr, 1))


@dataclass(frozen=True, kw_only=True)
class ScoreArrays:
    """THumB scores of n captions as aligned 1-D arrays (paper section 2.2).

    ``precision`` and ``recall``: integers 1-5; ``fluency``, ``conciseness``,
    ``inclusive``: positive deductions (None means all zero). Values are
    validated and converted to float arrays on construction (ValueError names
    the field and the first bad row).
    """

    precision: np.ndarray
    recall: np.ndarray
    fluency: np.ndarray | None = None
    conciseness: np.ndarray | None = None
    inclusive: np.ndarray | None = None

    def __post_init__(self) -> None:
        p = _check_scores(_score_array(self.precision, "precision", None), "precision")
        n = p.shape[0]
        r = _check_scores(_score_array(self.recall, "recall", n), "recall")
        zeros = np.zeros(n)
        f = zeros if self.fluency is None else _score_array(self.fluency, "fluency", n)
        c = zeros if self.conciseness is None else _score_array(self.conciseness, "conciseness", n)
        i = zeros if self.inclusive is None else _score_array(self.inclusive, "inclusive", n)
        object.__setattr__(self, "precision", p)
        object.__setattr__(self, "recall", r)
        object.__setattr__(self, "fluency", _check_fluency(f))
        object.__setattr__(self, "conciseness", _check_in(c, CONCISENESS_VALUES, "conciseness"))
        object.__setattr__(self, "inclusive", _check_in(i, INCLUSIVE_VALUES, "inclusive"))

    def __len__(self) -> int:
        return int(self.precision.shape[0])

    @property
    def penalties(self) -> np.ndarray:
        """Summed penalties per caption (paper section 2.2.2)."""
        return self.fluency + self.conciseness + self.inclusive  # type: ignore[operator]

    @property
    def totals(self) -> np.ndarray:
        """Total per caption, (P + R) / 2 - penalties (paper section 2.2)."""
        return np.round((self.precision + self.recall) / 2 - self.penalties, 1)


@dataclass(frozen=True, kw_only=True)
class CaptionJudgments(ScoreArrays):
    """Final THumB judgments, one row per (image, system) caption (paper section 2.2).

    ``image_ids``: any hashable ids compared by equality (1-D array-like);
    ``systems``: system names as strings (``"Human"`` for human captions).
    Identical texts of several systems are scored once upstream and the scores
    copied to one row per system. Each (image, system) pair may occur once.
    """

    image_ids: np.ndarray
    systems: np.ndarray

    def __post_init__(self) -> None:
        super().__post_init__()
        n = len(self)
        ids = checks.id_array(self.image_ids, "image_ids", n)
        systems = np.asarray(self.systems)
        if systems.ndim != 1 or systems.shape[0] != n:
            raise ValueError(f"systems: expected {n} rows, got shape {systems.shape}")
        if n and not all(isinstance(s, str) and s for s in systems.tolist()):
            raise ValueError("systems: every system must be a non-empty string")
        object.__setattr__(self, "image_ids", ids)
        object.__setattr__(self, "systems", systems.astype(str))

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> CaptionJudgments:
        """Build from dicts (image_id, system, precision, recall, penalties) (paper section 2.2)."""
        rows = list(records)
        return cls(
            image_ids=np.array([r["image_id"] for r in rows]),
            systems=np.array([r["system"] for r in rows], dtype=str),
            precision=np.array([r.get("precision") for r in rows], dtype=object),
            recall=np.array([r.get("recall") for r in rows], dtype=object),
            fluency=np.array([r.get("fluency", 0.0) for r in rows], dtype=object),
            conciseness=np.array([r.get("conciseness", 0.0) for r in rows], dtype=object),
            inclusive=np.array([r.get("inclusive", 0.0) for r in rows], dtype=object),
        )


# ---------------------------------------------------------------------------
# Statistics helpers
# ---------------------------------------------------------------------------


def _float_or_none(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _or_none(statistic: Callable[..., float], *args: Any) -> float | None:
    """The statistic, or None where rubrics.agreement says it is undefined (ValueError)."""
    try:
        return statistic(*args)
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

_REPORT_FIELDS = ("precision", "recall", "fluency", "conciseness", "inclusive", "total")


def _system_order(systems: Sequence[str], mean_total: np.ndarray, human: str) -> list[int]:
    def key(j: int) -> tuple[int, float, str]:
        return (0 if systems[j] == human else 1, -float(mean_total[j]), systems[j])

    return sorted(range(len(systems)), key=key)


def report(
    judgments: CaptionJudgments,
    *,
    metrics: Mapping[str, ArrayLike] | None = None,
    human_system: str = HUMAN_SYSTEM,
    weights: tuple[float, float] = (0.5, 0.5),
    n_resamples: int = 1000,
    confidence: float = 0.90,
    seed: int | np.random.Generator = 0,
) -> dict[str, Any]:
    """Per-system THumB report (paper section 3.1, Tables 2-4) as a JSON-serialisable dict.

    Input: ``judgments`` has one row per (image, system) caption with the final
    (stage-2) scores. ``metrics`` optionally maps a metric name to per-row
    automatic scores aligned with ``judgments`` (NaN = not scored, dropped
    pairwise).

    Statistics:

    * per system, the mean of P, R, each penalty, Total and the weighted Total
      ``w_p * P + w_r * R - penalties`` (``weights = (w_p, w_r)``; the default
      (0.5, 0.5) reproduces Total), each with a ``confidence`` interval by
      PAIRED percentile bootstrap over images: each resample draws images with
      replacement and the same drawn images are used for every system
      (``n_resamples`` resamples, percentiles (1 - confidence)/2 and
      (1 + confidence)/2: the 5th and 95th by default), computed by
      ``rubrics.resampling.paired_cluster_bootstrap_means``;
    * "# best" / "# worst" per system (Table 3): a caption is best when its P
      and its R are each >= those of every other caption of its image (ties
      count, so several systems can be best on one image), worst when each is
      <=; only images with at least two captions count;
    * P and R histograms (counts of 1..5) for human vs machine captions and per
      system;
    * with ``metrics``: instance-level Pearson r of each metric with P, R and
      Total over captions, with and without the human captions (Table 4);
    * ``robustness``: for each pair of systems adjacent by mean Total (highest
      first, Human included), the fewest images whose removal puts the lower
      system's mean Total strictly above the upper's, exact
      (``rubrics.robustness.paired_reversal``), over the images where both have
      a caption.

    Missing captions: when an image lacks a system's caption, that system's
    means are over the images where it has one (nan-aware), and in a bootstrap
    resample a system's mean is over the drawn images where it has a caption.
    ``n_images`` per system says how many images it covers. Resamples that draw
    none of a system's images (possible only for very sparse systems) are left
    out of that system's percentiles. Undefined values are ``None``.

    Systems are ordered human first, then by mean Total (descending), then name.
    """
    if not isinstance(judgments, CaptionJudgments):
        raise ValueError("judgments: must be a CaptionJudgments instance")
    n = len(judgments)
    if n == 0:
        raise ValueError("judgments: no rows")
    n_resamples = checks.integer(n_resamples, "n_resamples")
    conf = checks.confidence(confidence)
    if not isinstance(weights, Sequence) or len(weights) != 2:
        raise ValueError(f"weights: must be a pair (w_p, w_r), got {weights!r}")
    w_p = _number(weights[0], "weights[0] (precision)")
    w_r = _number(weights[1], "weights[1] (recall)")
    if w_p < 0 or w_r < 0:
        raise ValueError(f"weights: must be non-negative, got {weights!r}")
    rng = as_generator(seed)

    img_keys, img = np.unique(judgments.image_ids, return_inverse=True)
    sys_names, sys_idx = np.unique(judgments.systems, return_inverse=True)
    n_img, n_sys = img_keys.shape[0], sys_names.shape[0]
    cell = img * n_sys + sys_idx
    if np.unique(cell).shape[0] != n:
        counts = np.bincount(cell, minlength=n_img * n_sys)
        dup = int(np.flatnonzero(counts > 1)[0])
        raise ValueError(
            f"judgments: image {img_keys[dup // n_sys]!r} has several rows for system "
            f"{sys_names[dup % n_sys]!r}; pass one row per (image, system)"
        )

    pen = judgments.penalties
    per_row = {
        "precision": judgments.precision,
        "recall": judgments.recall,
        "fluency": judgments.fluency,
        "conciseness": judgments.conciseness,
        "inclusive": judgments.inclusive,
        "total": judgments.totals,
        "weighted_total": w_p * judgments.precision + w_r * judgments.recall - pen,
    }
    fields = list(per_row)
    n_fields = len(fields)

    # images x (fields * systems) matrix of values (0 where absent) and presence.
    present = np.zeros((n_img, n_sys))
    present[img, sys_idx] = 1.0
    values = np.zeros((n_img, n_fields, n_sys))
    for k, name in enumerate(fields):
        values[img, k, sys_idx] = per_row[name]
    values = values.reshape(n_img, n_fields * n_sys)
    n_per_sys = present.sum(axis=0)

    # Paired bootstrap over images, nan-aware: sizes are the presence (0/1) of each
    # system's caption, repeated for every field.
    boot = paired_cluster_bootstrap_means(
        values, np.tile(present, n_fields), n_resamples, conf, rng
    )
    point = boot.mean.reshape(n_fields, n_sys)
    lo = boot.low.reshape(n_fields, n_sys)
    hi = boot.high.reshape(n_fields, n_sys)
    q = percentile_levels(conf)

    # best / worst (Table 3): equal to the image's max (min) in both P and R.
    nan = np.full((n_img, n_sys), np.nan)
    pm, rm = nan.copy(), nan.copy()
    pm[img, sys_idx] = judgments.precision
    rm[img, sys_idx] = judgments.recall
    has = present.astype(bool)
    multi = (has.sum(axis=1) >= 2)[:, None]
    with np.errstate(invalid="ignore"):
        best = has & multi & (pm == np.nanmax(pm, axis=1, keepdims=True))
        best &= rm == np.nanmax(rm, axis=1, keepdims=True)
        worst = has & multi & (pm == np.nanmin(pm, axis=1, keepdims=True))
        worst &= rm == np.nanmin(rm, axis=1, keepdims=True)
    n_best = best.sum(axis=0)
    n_worst = worst.sum(axis=0)

    order = _system_order(sys_names.tolist(), point[fields.index("total")], human_system)
    per_system: dict[str, Any] = {}
    for j in order:
        entry: dict[str, Any] = {
            "n_images": int(n_per_sys[j]),
            "is_human": bool(sys_names[j] == human_system),
        }
        for k, name in enumerate(fields):
            entry[name] = {
                "mean": _float_or_none(point[k, j]),
                "ci_low": _float_or_none(lo[k, j]),
                "ci_high": _float_or_none(hi[k, j]),
            }
        entry["n_best"] = int(n_best[j])
        entry["n_worst"] = int(n_worst[j])
        per_system[str(sys_names[j])] = entry

    is_human = judgments.systems == human_system

    def hist(mask: np.ndarray) -> dict[str, list[int]]:
        """Counts of the scores 1..5 among the masked captions."""
        return {
            name: np.bincount(getattr(judgments, name)[mask].astype(int), minlength=6)[1:].tolist()
            for name in ("precision", "recall")
        }

    histograms = {
        "human": hist(is_human),
        "machine": hist(~is_human),
        "per_system": {str(sys_names[j]): hist(sys_idx == j) for j in order},
    }

    correlations: dict[str, Any] | None = None
    if metrics is not None:
        if not isinstance(metrics, Mapping):
            raise ValueError("metrics: must map metric name -> per-row scores")
        correlations = {}
        targets = {
            "precision": judgments.precision,
            "recall": judgments.recall,
            "total": judgments.totals,
        }
        for name, raw in metrics.items():
            try:
                m = np.asarray(raw, dtype=float)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"metrics[{name!r}]: values must be numbers or NaN") from exc
            if m.ndim != 1 or m.shape[0] != n:
                raise ValueError(f"metrics[{name!r}]: expected {n} rows, got shape {m.shape}")
            scored = np.isfinite(m)
            out: dict[str, Any] = {}
            for label, mask in (("with_human", scored), ("without_human", scored & ~is_human)):
                out[label] = {"n": int(mask.sum())}
                for t, tv in targets.items():
                    out[label][t] = _or_none(pearson, m[mask], tv[mask])
            correlations[str(name)] = out

    # Ranking robustness (issue 15): adjacent systems by mean Total, on the images where
    # both have a caption; removing an image removes both captions (paired).
    total_matrix = np.full((n_img, n_sys), np.nan)
    total_matrix[img, sys_idx] = judgments.totals
    leaderboard = sorted(order, key=lambda j: (-float(point[fields.index("total"), j]), j))
    robustness = []
    for upper, lower in zip(leaderboard, leaderboard[1:], strict=False):
        both = has[:, upper] & has[:, lower]
        entry = {"upper": str(sys_names[upper]), "lower": str(sys_names[lower])}
        if both.any():
            entry.update(
                paired_reversal(total_matrix[both, upper], total_matrix[both, lower]).as_dict()
            )
        else:
            entry.update({"removed": None, "total": 0, "share": None})
        robustness.append(entry)

    return {
        "n_images": int(n_img),
        "n_captions": int(n),
        "human_system": human_system,
        "robustness": robustness,
        "systems": [str(sys_names[j]) for j in order],
        "per_system": per_system,
        "histograms": histograms,
        "weights": {"precision": w_p, "recall": w_r},
        "bootstrap": {
            "method": "paired percentile bootstrap over images",
            "n_resamples": n_resamples,
            "confidence": conf,
            "percentiles": q,
            "seed": int(seed) if not isinstance(seed, np.random.Generator) else None,
        },
        "correlations": correlations,
    }


def _review_changes(
    before: ScoreArrays, after: ScoreArrays, names: tuple[str, str]
) -> dict[str, np.ndarray]:
    """Per field (and ``any``), which rows ``after`` changed from ``before``; checks alignment."""
    for name, s in zip(names, (before, after), strict=True):
        if not isinstance(s, ScoreArrays):
            raise ValueError(f"{name}: must be ScoreArrays or CaptionJudgments")
    n = len(before)
    if n == 0:
        raise ValueError(f"{names[0]}: no rows")
    if len(after) != n:
        raise ValueError(f"{names[1]}: has {len(after)} rows, {names[0]} has {n}")
    if isinstance(before, CaptionJudgments) and isinstance(after, CaptionJudgments):
        same = np.array_equal(before.image_ids, after.image_ids) and np.array_equal(
            before.systems, after.systems
        )
        if not same:
            raise ValueError(
                f"{names[1]}: rows are not aligned with {names[0]} (image ids or systems)"
            )
    changed = {f: np.abs(getattr(before, f) - getattr(after, f)) > _TOL for f in _FIELDS}
    changed["any"] = np.logical_or.reduce([changed[f] for f in _FIELDS])
    return changed


def _kappas(before: ScoreArrays, after: ScoreArrays) -> dict[str, float | None]:
    return {
        "precision": _or_none(cohen_kappa, before.precision, after.precision),
        "recall": _or_none(cohen_kappa, before.recall, after.recall),
    }


def stage_agreement(stage1: ScoreArrays, stage2: ScoreArrays) -> dict[str, Any]:
    """Stage-1 vs stage-2 agreement (paper section 2.1): Cohen's kappa of P and R, share modified.

    ``stage1`` and ``stage2`` hold the scores of the same captions, row by row
    (pass one row per scored caption text, so that identical texts of several
    systems count once). Kappa is unweighted, as the paper reports it; a
    field's modified share is the fraction of captions whose stage-2 value
    differs from stage 1; ``any`` is the share of captions with any field
    modified. Kappa is None when undefined (chance agreement 1).
    """
    changed = _review_changes(stage1, stage2, ("stage1", "stage2"))
    return {
        "n_captions": len(stage1),
        "kappa": _kappas(stage1, stage2),
        "modified_share": {name: float(rows.mean()) for name, rows in changed.items()},
    }


def check_agreement(final: ScoreArrays, check: ScoreArrays) -> dict[str, Any]:
    """A third annotator's check of the final (stage-2) scores (paper section 2.1, footnote 3).

    The paper: "we found that a third annotator did not change the scores for all 100
    captions randomly sampled for meta-evaluations". Its statistic is how many of the
    checked captions the third annotator changed, so this returns, over the rows (one per
    checked caption text, aligned like ``stage_agreement``'s):

    * ``unchanged``: captions whose every field the check confirmed (the paper: 100 of 100);
    * ``changed``: captions with the field changed, per field and ``any`` field, and
      ``changed_share`` the same as fractions of ``n_captions``;
    * ``kappa``: unweighted Cohen's kappa of P and of R between the final scores and the
      check, the statistic the paper gives for its stages, for comparison with them (None
      when undefined, e.g. when every checked caption has the same P).
    """
    changed = _review_changes(final, check, ("final", "check"))
    n = len(final)
    counts = {name: int(rows.sum()) for name, rows in changed.items()}
    return {
        "n_captions": n,
        "unchanged": n - counts["any"],
        "changed": counts,
        "changed_share": {name: count / n for name, count in counts.items()},
        "kappa": _kappas(final, check),
    }


#: Separates the check's random stream from every other use of the study seed.
_CHECK_STREAM = 0x7C4EC3


def check_sample(n_captions: int, n_checked: int, *, seed: int) -> list[int]:
    """Which captions the third annotator checks: ``min(n_checked, n_captions)`` distinct
    indices of ``range(n_captions)``, drawn uniformly without replacement, ascending.

    The draw depends only on ``seed`` and the two counts (the paper's "100 captions
    randomly sampled", section 2.1 footnote 3), so a study draws the same sample every time
    from the same caption list. ``n_checked = 0`` checks nothing.
    """
    size = checks.integer(n_captions, "n_captions", low=0)
    wanted = checks.integer(n_checked, "n_checked", low=0)
    seed = checks.integer(seed, "seed", low=-(2**63), high=2**63 - 1)
    rng = np.random.default_rng(np.random.SeedSequence([_CHECK_STREAM, seed % 2**64]))
    return sorted(rng.choice(size, size=min(wanted, size), replace=False).tolist())


def developmental_images(image_order: Sequence[Any], n_developmental: int) -> set[Any]:
    """The images of the developmental phase: the first ``n_developmental`` of ``image_order``.

    Paper section 2.1: "We first performed developmental evaluations of 250 captions for 50
    images and created rubrics. [...] After the developmental phase, the kappa coefficient
    [...] was 0.86 in precision and 0.82 in recall for the rest of the evaluated captions."
    ``image_order`` is the study's order (each image once); their judgments still count for
    the scores, only the stage agreement leaves them out.
    """
    n = checks.integer(n_developmental, "n_developmental", low=0)
    order = list(image_order)
    if len(set(order)) != len(order):
        raise ValueError("image_order: each image must occur once")
    return set(order[:n])
