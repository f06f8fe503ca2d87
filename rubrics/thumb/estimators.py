"""The statistics of THumB's per-system report, each a small estimator with a frozen result.

Each estimator takes validated ``CaptionJudgments`` (and the ``CaptionGrid`` that places
them in an images x systems table) and returns a frozen result whose ``as_dict()`` is its
part of the report's JSON; ``rubrics.thumb.report`` composes them. Paper: Kasai et al.,
"Transparent Human Evaluation for Image Captioning" (NAACL 2022), section 3.1, Tables 2-4.

Systems are indexed by their position in ``CaptionGrid.systems`` (sorted names); the
report orders them for display. Undefined values are ``None``, never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics.agreement import pearson
from rubrics.resampling import paired_cluster_bootstrap_means, percentile_levels
from rubrics.robustness import NeighbourReversal, paired_reversal
from rubrics.thumb.scores import SCORE_FIELDS, CaptionJudgments

__all__ = [
    "MEAN_FIELDS",
    "BestWorst",
    "CaptionGrid",
    "Correlation",
    "Interval",
    "MetricCorrelation",
    "ScoreCounts",
    "SystemMeans",
    "NeighbourReversal",
    "best_worst",
    "caption_grid",
    "metric_correlations",
    "ranking_robustness",
    "score_counts",
    "system_means",
]

MEAN_FIELDS = (*SCORE_FIELDS, "total", "weighted_total")
"""The per-caption values whose per-system means the report gives, in its order."""


def or_none(statistic: Callable[..., float], *args: Any) -> float | None:
    """The statistic, or None where rubrics.agreement says it is undefined (ValueError)."""
    try:
        return statistic(*args)
    except ValueError:
        return None


def _float_or_none(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class CaptionGrid:
    """Where each caption (row of the judgments) sits in the images x systems table."""

    images: NDArray
    """The distinct image ids, sorted."""
    systems: NDArray[np.str_]
    """The distinct system names, sorted: a system's index is its position here."""
    image: NDArray[np.intp]
    """Per row, the index of its image."""
    system: NDArray[np.intp]
    """Per row, the index of its system."""

    @property
    def present(self) -> NDArray[np.bool_]:
        """Which (image, system) cells have a caption, shape (images, systems)."""
        has = np.zeros((self.images.shape[0], self.systems.shape[0]), dtype=bool)
        has[self.image, self.system] = True
        return has

    def table(self, values: NDArray) -> NDArray[np.float64]:
        """Per-row values as an (images, systems) table, NaN where a cell has no caption."""
        out = np.full((self.images.shape[0], self.systems.shape[0]), np.nan)
        out[self.image, self.system] = values
        return out


def caption_grid(judgments: CaptionJudgments) -> CaptionGrid:
    """Place each caption in the images x systems table; ValueError when a cell has two."""
    images, image = np.unique(judgments.image_ids, return_inverse=True)
    systems, system = np.unique(judgments.systems, return_inverse=True)
    n_img, n_sys = images.shape[0], systems.shape[0]
    cell = image * n_sys + system
    if np.unique(cell).shape[0] != len(judgments):
        counts = np.bincount(cell, minlength=n_img * n_sys)
        dup = int(np.flatnonzero(counts > 1)[0])
        raise ValueError(
            f"judgments: image {images[dup // n_sys]!r} has several rows for system "
            f"{systems[dup % n_sys]!r}; pass one row per (image, system)"
        )
    return CaptionGrid(images=images, systems=systems, image=image, system=system)


@dataclass(frozen=True)
class Interval:
    """A mean and its bootstrap interval; None where undefined."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high}


@dataclass(frozen=True)
class SystemMeans:
    """Per system, the mean of each of ``MEAN_FIELDS`` with its paired bootstrap interval.

    ``mean``, ``low`` and ``high`` have shape (fields, systems), NaN where undefined;
    ``n_images`` counts each system's captions (one per image).
    """

    mean: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    n_images: NDArray[np.int64]
    percentiles: tuple[float, float]
    """The two percentiles (in percent) the intervals are taken at."""

    @property
    def total(self) -> NDArray[np.float64]:
        """Each system's mean Total."""
        return self.mean[MEAN_FIELDS.index("total")]

    def interval(self, field: str, system: int) -> Interval:
        """One system's mean of one field with its interval."""
        k = MEAN_FIELDS.index(field)
        return Interval(
            mean=_float_or_none(self.mean[k, system]),
            ci_low=_float_or_none(self.low[k, system]),
            ci_high=_float_or_none(self.high[k, system]),
        )


def system_means(
    judgments: CaptionJudgments,
    grid: CaptionGrid,
    weights: tuple[float, float],
    n_resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> SystemMeans:
    """Per-system means of P, R, each penalty, Total and the weighted Total (Table 2).

    The weighted Total is ``w_p * P + w_r * R - penalties`` for ``weights = (w_p, w_r)``
    ((0.5, 0.5) reproduces Total). Intervals are PAIRED percentile bootstrap over images
    (``rubrics.resampling.paired_cluster_bootstrap_means``): each resample draws images
    with replacement, the same drawn images for every system. A system missing from some
    images has its means over the images where it has a caption (nan-aware), in the data
    and in each resample; resamples that draw none of its images are left out of its
    percentiles.
    """
    w_p, w_r = weights
    per_row = [getattr(judgments, name) for name in SCORE_FIELDS]
    per_row += [
        judgments.totals,
        w_p * judgments.precision + w_r * judgments.recall - judgments.penalties,
    ]
    n_img, n_sys = grid.images.shape[0], grid.systems.shape[0]
    n_fields = len(MEAN_FIELDS)
    # images x (fields * systems): values 0 where absent, and the presence (0/1) of each
    # system's caption repeated for every field as the bootstrap's cluster sizes.
    present = grid.present.astype(float)
    values = np.zeros((n_img, n_fields, n_sys))
    for k, column in enumerate(per_row):
        values[grid.image, k, grid.system] = column
    boot = paired_cluster_bootstrap_means(
        values.reshape(n_img, n_fields * n_sys),
        np.tile(present, n_fields),
        n_resamples,
        confidence,
        rng,
    )
    return SystemMeans(
        mean=boot.mean.reshape(n_fields, n_sys),
        low=boot.low.reshape(n_fields, n_sys),
        high=boot.high.reshape(n_fields, n_sys),
        n_images=present.sum(axis=0).astype(np.int64),
        percentiles=tuple(percentile_levels(confidence)),
    )


@dataclass(frozen=True)
class BestWorst:
    """Per system, on how many images its caption is best and worst (Table 3)."""

    n_best: NDArray[np.int64]
    n_worst: NDArray[np.int64]


def best_worst(judgments: CaptionJudgments, grid: CaptionGrid) -> BestWorst:
    """ "# best" / "# worst" per system (paper Table 3).

    A caption is best when its P and its R are each >= those of every other caption of
    its image (ties count, so several systems can be best on one image), worst when each
    is <=; only images with at least two captions count.
    """
    has = grid.present
    pm = grid.table(judgments.precision)
    rm = grid.table(judgments.recall)
    multi = (has.sum(axis=1) >= 2)[:, None]
    with np.errstate(invalid="ignore"):
        best = has & multi & (pm == np.nanmax(pm, axis=1, keepdims=True))
        best &= rm == np.nanmax(rm, axis=1, keepdims=True)
        worst = has & multi & (pm == np.nanmin(pm, axis=1, keepdims=True))
        worst &= rm == np.nanmin(rm, axis=1, keepdims=True)
    return BestWorst(n_best=best.sum(axis=0), n_worst=worst.sum(axis=0))


@dataclass(frozen=True)
class ScoreCounts:
    """How many of some captions have each P and each R score: counts of 1, 2, ..., 5."""

    precision: tuple[int, ...]
    recall: tuple[int, ...]

    def as_dict(self) -> dict[str, list[int]]:
        return {"precision": list(self.precision), "recall": list(self.recall)}


def score_counts(judgments: CaptionJudgments, mask: NDArray[np.bool_]) -> ScoreCounts:
    """Counts of the P and R scores 1..5 among the masked captions (the paper's Figure 2)."""

    def counts(values: NDArray) -> tuple[int, ...]:
        return tuple(np.bincount(values[mask].astype(int), minlength=6)[1:].tolist())

    return ScoreCounts(precision=counts(judgments.precision), recall=counts(judgments.recall))


@dataclass(frozen=True)
class Correlation:
    """Pearson's r of one metric with P, R and Total over ``n`` captions; None if undefined."""

    n: int
    precision: float | None
    recall: float | None
    total: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "precision": self.precision,
            "recall": self.recall,
            "total": self.total,
        }


@dataclass(frozen=True)
class MetricCorrelation:
    """One metric's instance-level correlations, with and without human captions (Table 4)."""

    with_human: Correlation
    without_human: Correlation

    def as_dict(self) -> dict[str, Any]:
        return {
            "with_human": self.with_human.as_dict(),
            "without_human": self.without_human.as_dict(),
        }


def _metric_column(name: Any, raw: ArrayLike, n: int) -> NDArray[np.float64]:
    try:
        column = np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metrics[{name!r}]: values must be numbers or NaN") from exc
    if column.ndim != 1 or column.shape[0] != n:
        raise ValueError(f"metrics[{name!r}]: expected {n} rows, got shape {column.shape}")
    return column


def metric_correlations(
    judgments: CaptionJudgments, metrics: Mapping[str, ArrayLike], human_system: str
) -> dict[str, MetricCorrelation]:
    """Instance-level Pearson r of each metric with P, R and Total over captions (Table 4).

    ``metrics`` maps a metric name to per-row scores aligned with ``judgments`` (NaN = not
    scored, dropped pairwise). Each is correlated over all scored captions and over the
    scored machine captions (``human_system``'s left out).
    """
    if not isinstance(metrics, Mapping):
        raise ValueError("metrics: must map metric name -> per-row scores")
    is_human = judgments.systems == human_system
    out = {}
    for name, raw in metrics.items():
        m = _metric_column(name, raw, len(judgments))
        scored = np.isfinite(m)

        def over(mask: NDArray[np.bool_], m: NDArray = m) -> Correlation:
            return Correlation(
                n=int(mask.sum()),
                precision=or_none(pearson, m[mask], judgments.precision[mask]),
                recall=or_none(pearson, m[mask], judgments.recall[mask]),
                total=or_none(pearson, m[mask], judgments.totals[mask]),
            )

        out[str(name)] = MetricCorrelation(
            with_human=over(scored), without_human=over(scored & ~is_human)
        )
    return out


def ranking_robustness(
    judgments: CaptionJudgments, grid: CaptionGrid, mean_total: NDArray[np.float64]
) -> tuple[NeighbourReversal, ...]:
    """For each pair of systems adjacent by mean Total (highest first, ties by name), the
    fewest images whose removal puts the lower system's mean Total strictly above the
    upper's, exact (``rubrics.robustness.paired_reversal``).

    Only the images where both have a caption count; removing an image removes both
    captions (paired).
    """
    has = grid.present
    totals = grid.table(judgments.totals)
    leaderboard = sorted(range(grid.systems.shape[0]), key=lambda j: (-float(mean_total[j]), j))
    pairs = []
    for upper, lower in zip(leaderboard, leaderboard[1:], strict=False):
        both = has[:, upper] & has[:, lower]
        reversal = paired_reversal(totals[both, upper], totals[both, lower]) if both.any() else None
        pairs.append(
            NeighbourReversal(
                upper=str(grid.systems[upper]), lower=str(grid.systems[lower]), reversal=reversal
            )
        )
    return tuple(pairs)


def system_order(grid: CaptionGrid, mean_total: NDArray[np.float64], human: str) -> list[int]:
    """System indices for display: the human system first, then by mean Total, then name."""
    names: Sequence[str] = grid.systems.tolist()

    def key(j: int) -> tuple[int, float, str]:
        return (0 if names[j] == human else 1, -float(mean_total[j]), names[j])

    return sorted(range(len(names)), key=key)
