"""The context mode's report: per system and per (system, domain), BLV and sighted apart.

``context_report`` takes one ``ContextRating`` per judgment (a rater's answers to one
item: the before-image part, and for sighted raters the after-image part) and returns a
frozen ``ContextResult``; ``ContextResult.as_dict()`` is JSON-safe.

For each system, over all its domains and for each domain alone (a ``ContextCell``):

* each group's ("blv", "sighted") mean of each dimension (before: ``BEFORE``; after:
  ``AFTER``, sighted raters only) with a rater-clustered t interval (``stats``);
* BLV minus sighted for each before-image dimension, the two variances added (a rater
  belongs to one group, so the groups are independent samples of raters);
* the sighted raters' change of "overall" after seeing the image: after minus before of
  the same judgment (paired), clustered by rater;
* Krippendorff's ordinal alpha of each dimension within each group, items as units (the
  groups rate different items: an item is caption x context x group).

Why clustered intervals and how undefined values are reported: see ``rubrics.context.stats``.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubrics import checks
from rubrics.context.questions import AFTER, BEFORE, GROUPS, SCALE_MAX, SCALE_MIN
from rubrics.context.stats import (
    Agreement,
    Estimate,
    clustered_mean,
    group_difference,
    ordinal_alpha,
)

__all__ = [
    "METHOD",
    "ContextCell",
    "ContextRating",
    "ContextResult",
    "GroupCell",
    "SystemResult",
    "context_report",
]

METHOD = (
    "mean with a rater-clustered (sandwich) standard error, G/(G-1) corrected, and a t "
    "interval with G-1 degrees of freedom (G raters); BLV minus sighted adds the two "
    "variances (Welch-Satterthwaite degrees of freedom); before/after change paired per "
    "judgment; agreement: Krippendorff's ordinal alpha within each group, items as units"
)
"""How the report's intervals were computed, stored with the report."""


def _ids(value: Any, name: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer id, got {value!r}")
    return int(value)


def _answers(value: Any, dims: tuple[str, ...], name: str) -> dict[str, int]:
    """The ratings of ``dims`` as ints 1-5; a free-text "missing" answer is ignored."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a mapping of {', '.join(dims)}, got {value!r}")
    extra = set(value) - set(dims) - {"missing"}
    if extra or any(d not in value for d in dims):
        raise ValueError(f"{name} must hold exactly {', '.join(dims)}, got {sorted(value)}")
    return {d: checks.integer(value[d], f"{name}[{d!r}]", SCALE_MIN, SCALE_MAX) for d in dims}


@dataclass(frozen=True)
class ContextRating:
    """One judgment of the context mode: one rater's answers to one item.

    ``before``: the before-image ratings (keys ``BEFORE``, ints 1-5); ``after``: the
    after-image ratings (keys ``AFTER``; a "missing" free-text key is accepted and
    ignored), None when the rater did not (yet) answer it. BLV raters never get the
    after-image part, so a "blv" rating with ``after`` is refused. Validated on
    construction (ValueError names the field).
    """

    participant: int
    item: int
    caption: int
    system: str
    domain: str
    group: str
    before: dict[str, int]
    after: dict[str, int] | None = None

    def __post_init__(self) -> None:
        for name in ("participant", "item", "caption"):
            object.__setattr__(self, name, _ids(getattr(self, name), name))
        for name in ("system", "domain"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string")
        if self.group not in GROUPS:
            raise ValueError(f"group must be one of {', '.join(GROUPS)}, got {self.group!r}")
        object.__setattr__(self, "before", _answers(self.before, BEFORE, "before"))
        if self.after is not None:
            if self.group == "blv":
                raise ValueError("after: BLV raters are never given the after-image part")
            object.__setattr__(self, "after", _answers(self.after, AFTER, "after"))


@dataclass(frozen=True)
class GroupCell:
    """One group's ratings in a cell: each dimension's mean and agreement.

    ``before`` / ``after``: dimension -> ``Estimate`` (the "blv" group's ``after`` has no
    ratings: its estimates say so); ``agreement_before`` / ``agreement_after``: dimension
    -> ``Agreement``. ``n_ratings``: judgments; ``n_items``: items rated.
    """

    group: str
    n_ratings: int
    n_raters: int
    n_items: int
    before: dict[str, Estimate]
    after: dict[str, Estimate]
    agreement_before: dict[str, Agreement]
    agreement_after: dict[str, Agreement]

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_ratings": self.n_ratings,
            "n_raters": self.n_raters,
            "n_items": self.n_items,
            "before": {d: e.as_dict() for d, e in self.before.items()},
            "after": {d: e.as_dict() for d, e in self.after.items()},
            "agreement": {
                "before": {d: a.as_dict() for d, a in self.agreement_before.items()},
                "after": {d: a.as_dict() for d, a in self.agreement_after.items()},
            },
        }


@dataclass(frozen=True)
class ContextCell:
    """One system's results over all domains (``domain`` None) or in one domain.

    ``groups``: "blv" and "sighted" (always both); ``difference``: BLV minus sighted per
    before-image dimension; ``change``: the sighted raters' after minus before "overall".
    """

    system: str
    domain: str | None
    groups: dict[str, GroupCell]
    difference: dict[str, Estimate]
    change: Estimate

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "domain": self.domain,
            "groups": {g: cell.as_dict() for g, cell in self.groups.items()},
            "difference": {d: e.as_dict() for d, e in self.difference.items()},
            "change": self.change.as_dict(),
        }


@dataclass(frozen=True)
class SystemResult:
    """One system: ``all`` (every domain together) and ``domains`` (name -> cell, sorted)."""

    system: str
    all: ContextCell
    domains: dict[str, ContextCell]

    def as_dict(self) -> dict[str, Any]:
        return {
            "all": self.all.as_dict(),
            "domains": {d: cell.as_dict() for d, cell in self.domains.items()},
        }


@dataclass(frozen=True)
class ContextResult:
    """The report: ``systems`` by name (sorted), the confidence and the method used."""

    confidence: float
    n_ratings: int
    n_raters: dict[str, int]
    systems: dict[str, SystemResult]
    method: str = field(default=METHOD)

    def as_dict(self) -> dict[str, Any]:
        return {
            "confidence": self.confidence,
            "method": self.method,
            "n_ratings": self.n_ratings,
            "n_raters": dict(self.n_raters),
            "systems": {s: r.as_dict() for s, r in self.systems.items()},
        }


@dataclass(frozen=True)
class _Columns:
    """The ratings as aligned arrays (after-image columns NaN where not answered)."""

    participant: np.ndarray
    item: np.ndarray
    system: np.ndarray
    domain: np.ndarray
    group: np.ndarray
    before: np.ndarray  # (n, len(BEFORE))
    after: np.ndarray  # (n, len(AFTER)), NaN where not answered

    @classmethod
    def of(cls, rows: list[ContextRating]) -> _Columns:
        after = np.full((len(rows), len(AFTER)), np.nan)
        for i, r in enumerate(rows):
            if r.after is not None:
                after[i] = [r.after[d] for d in AFTER]
        return cls(
            participant=np.array([r.participant for r in rows], dtype=np.int64),
            item=np.array([r.item for r in rows], dtype=np.int64),
            system=np.array([r.system for r in rows], dtype=object),
            domain=np.array([r.domain for r in rows], dtype=object),
            group=np.array([r.group for r in rows], dtype=object),
            before=np.array(
                [[r.before[d] for d in BEFORE] for r in rows], dtype=np.float64
            ).reshape(len(rows), len(BEFORE)),
            after=after,
        )


def _check_consistent(rows: list[ContextRating]) -> None:
    """One group per rater, one (caption, system, domain, group) per item, one rating per pair."""
    group_of: dict[int, str] = {}
    item_of: dict[int, tuple[int, str, str, str]] = {}
    seen: set[tuple[int, int]] = set()
    for r in rows:
        if group_of.setdefault(r.participant, r.group) != r.group:
            raise ValueError(f"participant {r.participant} appears in both groups")
        key = (r.caption, r.system, r.domain, r.group)
        if item_of.setdefault(r.item, key) != key:
            raise ValueError(
                f"item {r.item} has ratings with different caption, system, domain or group"
            )
        if (r.participant, r.item) in seen:
            raise ValueError(f"participant {r.participant} rated item {r.item} twice")
        seen.add((r.participant, r.item))


def _group_cell(cols: _Columns, mask: np.ndarray, group: str, confidence: float) -> GroupCell:
    rows = mask & (cols.group == group)
    answered = rows & ~np.isnan(cols.after[:, 0])
    who, items = cols.participant, cols.item
    before = {
        d: clustered_mean(cols.before[rows, j], who[rows], confidence=confidence)
        for j, d in enumerate(BEFORE)
    }
    after = {
        d: clustered_mean(cols.after[answered, j], who[answered], confidence=confidence)
        for j, d in enumerate(AFTER)
    }
    return GroupCell(
        group=group,
        n_ratings=int(rows.sum()),
        n_raters=int(np.unique(who[rows]).size),
        n_items=int(np.unique(items[rows]).size),
        before=before,
        after=after,
        agreement_before={
            d: ordinal_alpha(cols.before[rows, j], items[rows]) for j, d in enumerate(BEFORE)
        },
        agreement_after={
            d: ordinal_alpha(cols.after[answered, j], items[answered]) for j, d in enumerate(AFTER)
        },
    )


def _cell(
    cols: _Columns, mask: np.ndarray, system: str, domain: str | None, confidence: float
) -> ContextCell:
    groups = {g: _group_cell(cols, mask, g, confidence) for g in GROUPS}
    blv, sighted = groups["blv"], groups["sighted"]
    difference = {
        d: group_difference(blv.before[d], sighted.before[d], confidence=confidence) for d in BEFORE
    }
    paired = mask & (cols.group == "sighted") & ~np.isnan(cols.after[:, 0])
    overall_before, overall_after = BEFORE.index("overall"), AFTER.index("overall")
    change = clustered_mean(
        cols.after[paired, overall_after] - cols.before[paired, overall_before],
        cols.participant[paired],
        confidence=confidence,
    )
    return ContextCell(system, domain, groups, difference, change)


def context_report(ratings: Iterable[ContextRating], *, confidence: float = 0.95) -> ContextResult:
    """The context mode's report of ``ratings`` (see the module docstring).

    Raises ValueError for input that cannot be a context study's (a rating that is not a
    ``ContextRating``, a rater in both groups, an item with two captions, systems,
    domains or groups, a rater rating an item twice); never for thin data: empty groups,
    one rater and constant ratings give None with a note.
    """
    level = checks.confidence(confidence)
    rows = list(ratings)
    for i, r in enumerate(rows):
        if not isinstance(r, ContextRating):
            raise ValueError(f"ratings[{i}] must be a ContextRating, got {type(r).__name__}")
    _check_consistent(rows)
    cols = _Columns.of(rows)
    systems: dict[str, SystemResult] = {}
    for system in sorted(set(cols.system.tolist())):
        in_system = cols.system == system
        domains = {
            domain: _cell(cols, in_system & (cols.domain == domain), system, domain, level)
            for domain in sorted(set(cols.domain[in_system].tolist()))
        }
        systems[system] = SystemResult(system, _cell(cols, in_system, system, None, level), domains)
    n_raters = {g: int(np.unique(cols.participant[cols.group == g]).size) for g in GROUPS}
    return ContextResult(level, len(rows), n_raters, systems)
