"""THumB's per-system report (paper section 3.1, Tables 2-4): the estimators composed.

``report`` validates its options, runs the estimators of ``rubrics.thumb.estimators`` and
returns a frozen ``ThumbReport``; ``ThumbReport.as_dict()`` is the JSON the study's report
stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics import checks
from rubrics.resampling import as_generator
from rubrics.thumb.estimators import (
    MEAN_FIELDS,
    BestWorst,
    CaptionGrid,
    Interval,
    MetricCorrelation,
    NeighbourReversal,
    ScoreCounts,
    SystemMeans,
    best_worst,
    caption_grid,
    metric_correlations,
    ranking_robustness,
    score_counts,
    system_means,
    system_order,
)
from rubrics.thumb.rules import HUMAN_SYSTEM, _number
from rubrics.thumb.scores import CaptionJudgments

__all__ = ["BootstrapSettings", "Histograms", "SystemRow", "ThumbReport", "report"]


@dataclass(frozen=True)
class SystemRow:
    """One system's row of Tables 2 and 3: its means with intervals, "# best", "# worst"."""

    name: str
    n_images: int
    is_human: bool
    precision: Interval
    recall: Interval
    fluency: Interval
    conciseness: Interval
    inclusive: Interval
    total: Interval
    weighted_total: Interval
    n_best: int
    n_worst: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_images": self.n_images,
            "is_human": self.is_human,
            **{field: getattr(self, field).as_dict() for field in MEAN_FIELDS},
            "n_best": self.n_best,
            "n_worst": self.n_worst,
        }


@dataclass(frozen=True)
class Histograms:
    """P and R score counts of the human captions, the machine captions and each system."""

    human: ScoreCounts
    machine: ScoreCounts
    per_system: dict[str, ScoreCounts]

    def as_dict(self) -> dict[str, Any]:
        return {
            "human": self.human.as_dict(),
            "machine": self.machine.as_dict(),
            "per_system": {name: counts.as_dict() for name, counts in self.per_system.items()},
        }


@dataclass(frozen=True)
class BootstrapSettings:
    """How the intervals were computed; ``seed`` is None when a Generator was passed."""

    n_resamples: int
    confidence: float
    percentiles: tuple[float, float]
    seed: int | None
    method: str = "paired percentile bootstrap over images"

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "n_resamples": self.n_resamples,
            "confidence": self.confidence,
            "percentiles": list(self.percentiles),
            "seed": self.seed,
        }


@dataclass(frozen=True)
class ThumbReport:
    """The per-system report: ``rows`` in display order (human first, then by mean Total)."""

    n_images: int
    n_captions: int
    human_system: str
    rows: tuple[SystemRow, ...]
    histograms: Histograms
    weights: tuple[float, float]
    bootstrap: BootstrapSettings
    robustness: tuple[NeighbourReversal, ...]
    correlations: dict[str, MetricCorrelation] | None

    @property
    def systems(self) -> list[str]:
        """System names in display order."""
        return [row.name for row in self.rows]

    def row(self, system: str) -> SystemRow:
        """One system's row; KeyError for a system the report does not have."""
        for row in self.rows:
            if row.name == system:
                return row
        raise KeyError(system)

    def as_dict(self) -> dict[str, Any]:
        """The report as the JSON-serialisable dict a study's report stores."""
        correlations = self.correlations
        return {
            "n_images": self.n_images,
            "n_captions": self.n_captions,
            "human_system": self.human_system,
            "robustness": [pair.as_dict() for pair in self.robustness],
            "systems": self.systems,
            "per_system": {row.name: row.as_dict() for row in self.rows},
            "histograms": self.histograms.as_dict(),
            "weights": {"precision": self.weights[0], "recall": self.weights[1]},
            "bootstrap": self.bootstrap.as_dict(),
            "correlations": (
                None
                if correlations is None
                else {name: c.as_dict() for name, c in correlations.items()}
            ),
        }


def _weights(weights: Any) -> tuple[float, float]:
    if not isinstance(weights, Sequence) or len(weights) != 2:
        raise ValueError(f"weights: must be a pair (w_p, w_r), got {weights!r}")
    w_p = _number(weights[0], "weights[0] (precision)")
    w_r = _number(weights[1], "weights[1] (recall)")
    if w_p < 0 or w_r < 0:
        raise ValueError(f"weights: must be non-negative, got {weights!r}")
    return w_p, w_r


def _rows(
    grid: CaptionGrid, means: SystemMeans, extremes: BestWorst, order: list[int], human: str
) -> tuple[SystemRow, ...]:
    """Each system's row of Tables 2 and 3, in display ``order``."""
    return tuple(
        SystemRow(
            name=str(grid.systems[j]),
            n_images=int(means.n_images[j]),
            is_human=bool(grid.systems[j] == human),
            **{field: means.interval(field, j) for field in MEAN_FIELDS},
            n_best=int(extremes.n_best[j]),
            n_worst=int(extremes.n_worst[j]),
        )
        for j in order
    )


def _histograms(
    judgments: CaptionJudgments, grid: CaptionGrid, order: list[int], human: str
) -> Histograms:
    """Score counts of the human captions, the machine captions and each system in order."""
    is_human = judgments.systems == human
    return Histograms(
        human=score_counts(judgments, is_human),
        machine=score_counts(judgments, ~is_human),
        per_system={str(grid.systems[j]): score_counts(judgments, grid.system == j) for j in order},
    )


def report(
    judgments: CaptionJudgments,
    *,
    metrics: Mapping[str, ArrayLike] | None = None,
    human_system: str = HUMAN_SYSTEM,
    weights: tuple[float, float] = (0.5, 0.5),
    n_resamples: int = 1000,
    confidence: float = 0.90,
    seed: int | np.random.Generator = 0,
) -> ThumbReport:
    """Per-system THumB report (paper section 3.1, Tables 2-4).

    ``judgments`` has one row per (image, system) caption with the final (stage-2)
    scores; ``metrics`` optionally maps a metric name to per-row automatic scores
    aligned with it (NaN = not scored). The report holds, per system:

    * ``system_means``: the means of P, R, each penalty, Total and the weighted Total
      ``w_p * P + w_r * R - penalties`` (``weights = (w_p, w_r)``), each with a
      ``confidence`` interval by paired percentile bootstrap over images
      (``n_resamples`` resamples, percentiles (1 -+ confidence) / 2);
    * ``best_worst``: "# best" / "# worst" (Table 3);
    * ``score_counts``: P and R histograms of human vs machine captions and per system;
    * ``metric_correlations`` (with ``metrics``): Pearson r of each metric with P, R and
      Total, with and without the human captions (Table 4);
    * ``ranking_robustness``: for systems adjacent by mean Total, the fewest images
      whose removal reverses their order.

    When an image lacks a system's caption, that system's statistics are over the images
    where it has one; ``n_images`` per system says how many. Rows are ordered human
    first, then by mean Total (descending), then name. Undefined values are None.
    """
    if not isinstance(judgments, CaptionJudgments):
        raise ValueError("judgments: must be a CaptionJudgments instance")
    if len(judgments) == 0:
        raise ValueError("judgments: no rows")
    n_resamples = checks.integer(n_resamples, "n_resamples")
    conf = checks.confidence(confidence)
    w = _weights(weights)
    rng = as_generator(seed)
    grid = caption_grid(judgments)
    means = system_means(judgments, grid, w, n_resamples, conf, rng)
    order = system_order(grid, means.total, human_system)
    rows = _rows(grid, means, best_worst(judgments, grid), order, human_system)
    histograms = _histograms(judgments, grid, order, human_system)
    correlations = (
        None if metrics is None else metric_correlations(judgments, metrics, human_system)
    )
    return ThumbReport(
        n_images=int(grid.images.shape[0]),
        n_captions=len(judgments),
        human_system=human_system,
        rows=rows,
        histograms=histograms,
        weights=w,
        bootstrap=BootstrapSettings(
            n_resamples=n_resamples,
            confidence=conf,
            percentiles=means.percentiles,
            seed=int(seed) if not isinstance(seed, np.random.Generator) else None,
        ),
        robustness=ranking_robustness(judgments, grid, means.total),
        correlations=correlations,
    )
