"""Reproducibility, ranking robustness and position bias of the HUMANr report.

:func:`half_splits` (paper Fig. 4 left), :func:`std_by_image_count` (Fig. 4 right),
:func:`ranking_robustness` (issue 15) and :func:`position_bias`, each over the kept
comparisons of ``rubrics.humanr.estimators.kept_comparisons``, into a frozen result whose
``as_dict()`` is its part of the report's JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubrics import checks, resampling
from rubrics.humanr.estimators import (
    Interval,
    KeptComparisons,
    Summary,
    listed,
    summary,
    t_interval,
)
from rubrics.robustness import Reversal, unpaired_reversal


def _float_or_none(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class SystemSplits:
    """One system over the half-splits: both halves' HUMANr values, and A - B."""

    halves: Summary
    difference: Summary
    n_undefined_splits: int
    half_a: tuple[float | None, ...] | None = None
    half_b: tuple[float | None, ...] | None = None

    def as_dict(self, distributions: bool = True) -> dict[str, Any]:
        """``distributions=False`` leaves out ``half_a`` and ``half_b`` even when kept."""
        out: dict[str, Any] = {
            "halves": self.halves.as_dict(),
            "difference": self.difference.as_dict(),
            "n_undefined_splits": self.n_undefined_splits,
        }
        if distributions and self.half_a is not None and self.half_b is not None:
            out["half_a"] = list(self.half_a)
            out["half_b"] = list(self.half_b)
        return out


@dataclass(frozen=True)
class HalfSplits:
    """Random half-splits of the workers with kept comparisons (half A: floor(W/2))."""

    n_splits: int
    n_workers: int
    half_a_size: int
    systems: tuple[SystemSplits, ...]

    def as_dict(self) -> dict[str, int]:
        """The report's top-level ``half_splits``; each system's entry holds its own."""
        return {
            "n_splits": self.n_splits,
            "n_workers": self.n_workers,
            "half_a_size": self.half_a_size,
        }


def half_splits(
    kept: KeptComparisons,
    n_splits: int,
    rng: np.random.Generator,
    include_distributions: bool = False,
) -> HalfSplits | None:
    """HUMANr of each half per split (paper Fig. 4 left); None for fewer than 2 workers.

    Splits where a half has no comparison of a system are left out of its summaries and
    counted; ``include_distributions`` keeps every split's half values.
    """
    n_w = kept.n_workers
    if n_w < 2:
        return None
    a = resampling.half_splits(n_w, n_splits, rng).astype(float)
    b = 1.0 - a
    with np.errstate(invalid="ignore", divide="ignore"):
        ha = (a @ kept.worker_sums) / (a @ kept.worker_counts)
        hb = (b @ kept.worker_sums) / (b @ kept.worker_counts)
    diff = ha - hb
    systems = []
    for j in range(len(kept.systems)):
        d = diff[:, j]
        values = {}
        if include_distributions:
            values = {
                "half_a": tuple(_float_or_none(x) for x in ha[:, j]),
                "half_b": tuple(_float_or_none(x) for x in hb[:, j]),
            }
        systems.append(
            SystemSplits(
                halves=summary(np.concatenate([ha[:, j], hb[:, j]])),
                difference=summary(d),
                n_undefined_splits=int((~np.isfinite(d)).sum()),
                **values,
            )
        )
    return HalfSplits(n_splits, n_w, n_w // 2, tuple(systems))


@dataclass(frozen=True)
class ImageCountStd:
    """The std of each system's HUMANr over random subsets of ``n_images`` images."""

    n_images: int
    std: dict[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        return {"n_images": self.n_images, "std": dict(self.std)}


def default_image_counts(n_images: int) -> list[int]:
    """10, 20, 50, 100, ... below ``n_images``."""
    grid = []
    k = 10
    while k < n_images:
        for m in (1, 2, 5):
            if m * k < n_images:
                grid.append(m * k)
        k *= 10
    return grid


def std_by_image_count(
    kept: KeptComparisons,
    image_counts: Sequence[int] | None,
    n_image_draws: int,
    rng: np.random.Generator,
) -> list[ImageCountStd]:
    """For each k of ``image_counts`` (default :func:`default_image_counts`), the std over
    ``n_image_draws`` random k-subsets of the images of each system's HUMANr on them
    (paper Fig. 4 right)."""
    n_img, n_sys = kept.n_images, len(kept.systems)
    ks = default_image_counts(n_img) if image_counts is None else list(image_counts)
    ks = [checks.integer(k, "each of image_counts", 1, n_img) for k in ks]
    if not (ks and n_img):
        return []
    # rank[d, i]: position of image i in draw d's random order (a uniform permutation);
    # the images with rank < k form a uniform random k-subset, nested across k.
    rank = rng.permuted(np.tile(np.arange(n_img), (n_image_draws, 1)), axis=1)
    sums_cnts = np.concatenate([kept.image_sums, kept.image_counts], axis=1)
    out = []
    for k in ks:
        sub = (rank < k).astype(float) @ sums_cnts
        with np.errstate(invalid="ignore", divide="ignore"):
            vals = sub[:, :n_sys] / sub[:, n_sys:]
        std = {}
        for j, name in enumerate(kept.systems):
            x = vals[:, j][np.isfinite(vals[:, j])]
            std[name] = float(x.std(ddof=1)) if x.shape[0] > 1 else None
        out.append(ImageCountStd(int(k), std))
    return out


@dataclass(frozen=True)
class PositionBias:
    """The mean raw answer over all kept comparisons (5 = no side preferred) and its
    t-interval (not clipped)."""

    n: int
    mean_raw: float | None
    t_interval: Interval | None

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mean_raw": self.mean_raw, "t_interval": listed(self.t_interval)}


def position_bias(kept: KeptComparisons, confidence: float) -> PositionBias:
    raw = kept.raw
    if not raw.shape[0]:
        return PositionBias(0, None, None)
    ti = t_interval(raw.astype(float), confidence)
    return PositionBias(int(raw.shape[0]), float(raw.mean()), None if ti is None else ti.bounds)


@dataclass(frozen=True)
class RankReversal:
    """The fewest kept comparisons whose removal puts ``lower`` strictly above ``upper``."""

    upper: str
    lower: str
    reversal: Reversal

    def as_dict(self) -> dict[str, Any]:
        return {"upper": self.upper, "lower": self.lower, **self.reversal.as_dict()}


def ranking_robustness(kept: KeptComparisons, ranked: Sequence[str]) -> list[RankReversal]:
    """Each pair of systems adjacent in ``ranked`` (issue 15); a comparison belongs to one
    system, so removals are counted per system (unpaired, exact)."""
    index = {name: j for j, name in enumerate(kept.systems)}
    reversals = []
    for upper, lower in zip(ranked, ranked[1:], strict=False):
        reversal = unpaired_reversal(kept.of_system(index[upper]), kept.of_system(index[lower]))
        reversals.append(RankReversal(upper, lower, reversal))
    return reversals
