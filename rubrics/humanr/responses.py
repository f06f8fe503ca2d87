"""HUMANr responses: one row per answered trial, validated on construction (section 4.2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics import checks
from rubrics.humanr.scoring import NEUTRAL, SLIDER_MAX, SLIDER_MIN, check_raw


def _bool_array(values: ArrayLike, name: str, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name}: expected {n} rows, got shape {arr.shape}")
    if arr.dtype == object:
        for i, v in enumerate(arr):
            if v is None:
                raise ValueError(f"{name}: row {i} is missing")
            if not isinstance(v, bool | np.bool_):
                raise ValueError(f"{name}: row {i} must be True or False, got {v!r}")
        return arr.astype(bool)
    if arr.dtype.kind != "b":
        raise ValueError(f"{name}: must be booleans, got dtype {arr.dtype}")
    return arr


@dataclass(frozen=True, kw_only=True)
class Responses:
    """HUMANr responses as aligned 1-D arrays, one row per answered trial (section 4.2).

    * ``worker_ids``, ``image_ids``, ``group_ids``: hashable ids. A group is
      identified by (worker, group id): one group served to one worker.
    * ``systems``: the machine system of a Human-vs-model comparison, or
      ``"Human"`` for a Human-vs-Human pair; ignored on attention-check rows
      (any string, e.g. ``""``).
    * ``raw``: the slider answer, an integer 1-9.
    * ``human_on_left``: comparison rows: the human (reference) caption was on
      the left; attention-check rows: the correct caption was on the left.
    * ``is_attention_check``: the row is the group's attention check.
    * ``dropped``: optional extra exclusions (e.g. a researcher's flag); rows of
      a (worker, group) with a failed attention check are dropped anyway.

    Validated on construction; ValueError names the field and the first bad row.
    """

    worker_ids: np.ndarray
    image_ids: np.ndarray
    systems: np.ndarray
    raw: np.ndarray
    human_on_left: np.ndarray
    is_attention_check: np.ndarray
    group_ids: np.ndarray
    dropped: np.ndarray | None = None

    def __post_init__(self) -> None:
        raw = np.asarray(self.raw)
        if raw.ndim != 1:
            raise ValueError(f"raw: must be one-dimensional, got shape {raw.shape}")
        n = raw.shape[0]
        if n == 0:
            raise ValueError("raw: no responses")
        if raw.dtype == object:
            for i, v in enumerate(raw):
                check_raw(v, f"raw[{i}]")
            raw = raw.astype(float)
        if raw.dtype.kind not in "iuf" or raw.dtype.kind == "b":
            raise ValueError(f"raw: slider values must be integers 1-9, got dtype {raw.dtype}")
        bad = ~np.isfinite(raw) | (raw != np.round(raw)) | (raw < SLIDER_MIN) | (raw > SLIDER_MAX)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"raw: row {i} must be an integer 1-9, got {raw[i]!r}")
        object.__setattr__(self, "raw", raw.astype(np.int64))
        object.__setattr__(self, "worker_ids", checks.id_array(self.worker_ids, "worker_ids", n))
        object.__setattr__(self, "image_ids", checks.id_array(self.image_ids, "image_ids", n))
        object.__setattr__(self, "group_ids", checks.id_array(self.group_ids, "group_ids", n))
        check = _bool_array(self.is_attention_check, "is_attention_check", n)
        object.__setattr__(self, "is_attention_check", check)
        object.__setattr__(
            self, "human_on_left", _bool_array(self.human_on_left, "human_on_left", n)
        )
        dropped = (
            np.zeros(n, dtype=bool)
            if self.dropped is None
            else _bool_array(self.dropped, "dropped", n)
        )
        object.__setattr__(self, "dropped", dropped)
        systems = np.asarray(self.systems)
        if systems.dtype == object:  # attention-check rows may carry None as system
            systems = np.array(["" if x is None else x for x in systems], dtype=object)
        systems = checks.id_array(systems, "systems", n).astype(str)
        comp = ~check
        if comp.any() and (systems[comp] == "").any():
            i = int(np.flatnonzero(comp & (systems == ""))[0])
            raise ValueError(f"systems: comparison row {i} has no system")
        object.__setattr__(self, "systems", systems)

    def __len__(self) -> int:
        return int(self.raw.shape[0])

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Responses:
        """Build from dicts keyed by the singular field names (section 4.2); dropped optional."""
        rows = list(records)

        def col(key: str, default: Any = None) -> np.ndarray:
            out = np.empty(len(rows), dtype=object)
            out[:] = [r.get(key, default) for r in rows]
            return out

        return cls(
            worker_ids=col("worker_id"),
            image_ids=col("image_id"),
            systems=col("system", ""),
            raw=col("raw"),
            human_on_left=col("human_on_left"),
            is_attention_check=col("is_attention_check", False),
            group_ids=col("group_id"),
            dropped=col("dropped", False),
        )

    def values(self) -> np.ndarray:
        """Comparison value ``(s - 5) / 4`` of every row (section 4.2)."""
        s = np.where(self.human_on_left, self.raw, 10 - self.raw)
        return (s - NEUTRAL) / 4.0

    def check_failed(self) -> np.ndarray:
        """Per row: an attention check that failed (oriented s >= 5) (section 4.2)."""
        s = np.where(self.human_on_left, self.raw, 10 - self.raw)
        return self.is_attention_check & (s >= NEUTRAL)
