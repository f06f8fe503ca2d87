"""THumB scores of many captions as validated, aligned arrays: the input of the statistics.

``ScoreArrays`` holds the five scores of n captions (paper section 2.2); its subclass
``CaptionJudgments`` adds which image and system each caption belongs to, the input of
``rubrics.thumb.report``. Both validate on construction (ValueError names the field and
the first bad row).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics import checks
from rubrics.thumb.rules import _TOL, CONCISENESS_VALUES, INCLUSIVE_VALUES, MAX_FLUENCY_PENALTY

__all__ = ["SCORE_FIELDS", "CaptionJudgments", "ScoreArrays"]

SCORE_FIELDS = ("precision", "recall", "fluency", "conciseness", "inclusive")
"""The five scores of a caption, in the order the reports list them."""


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
