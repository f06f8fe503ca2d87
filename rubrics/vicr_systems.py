"""Per-system results of a VICR study: each system's mean game rating and the differences
between systems, with percentile-bootstrap intervals clustered by image (pure numpy).

VICR's paper reports agreement, not systems; a researcher comparing captioning systems
with VICR ratings needs both. The unit is a pair (one caption of one image, rated by
several players): its score is the mean of its final-view ratings, so a pair rated by
seven players weighs as much as one rated by three (a caption is the thing compared, not
a player). A system's mean is the mean of its pairs' scores.

Intervals follow the report conventions of ``rubrics.resampling`` (the THumB and HUMANr
reports): percentile intervals of a bootstrap that draws *images* with replacement and
uses the same drawn images for every system (``paired_cluster_bootstrap_means``), so a
system's interval reflects which images were sampled and the differences are paired.

A difference ``upper - lower`` is paired by image, as HUMANr's test against its baseline:
on each image where both systems have a pair, d = mean score of ``upper``'s pairs there -
mean score of ``lower``'s; the difference is the mean of d over those images and its
interval comes from the same bootstrap draw (extra columns of one matrix product). When
every system has a caption of every image (the usual design) the difference is exactly
the difference of the two means; otherwise it is over the shared images only, and the
row says over how many.

:func:`fit_systems` composes small estimators (:func:`image_table`, :func:`system_means`,
:func:`paired_differences`, :func:`neighbour_robustness`), each returning a frozen result;
:class:`SystemResults` serialises to the report's JSON with ``as_dict()``.
:func:`system_results` is that dict, in one call.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rubrics import checks, resampling
from rubrics.robustness import NeighbourReversal, paired_reversal

__all__ = [
    "MAX_ALL_PAIRS_SYSTEMS",
    "ImageTable",
    "NeighbourReversal",
    "SystemDifference",
    "SystemMean",
    "PairedDifferences",
    "SystemResults",
    "fit_systems",
    "image_table",
    "neighbour_robustness",
    "paired_differences",
    "system_differences",
    "system_means",
    "system_results",
]

#: Up to this many systems every pair of systems is compared (45 differences); above it,
#: only systems next to each other in the ranking, so the bootstrap's columns grow with
#: the systems, not their square.
MAX_ALL_PAIRS_SYSTEMS = 10


@dataclass(frozen=True)
class ImageTable:
    """Scores summed and pairs counted per image (rows) and system (columns).

    ``images`` and ``names`` are the sorted labels of the rows and columns; ``order`` lists
    the columns by mean score, highest first (ties by name).
    """

    images: np.ndarray
    names: np.ndarray
    sums: np.ndarray
    sizes: np.ndarray

    @property
    def means(self) -> np.ndarray:
        """Each system's mean over its pairs."""
        return self.sums.sum(axis=0) / self.sizes.sum(axis=0)

    @property
    def image_means(self) -> np.ndarray:
        """Each system's mean score per image; NaN where it has no pair of the image."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.sizes

    @property
    def order(self) -> list[int]:
        means = self.means
        return sorted(range(self.names.size), key=lambda j: (-means[j], str(self.names[j])))


def image_table(images: Sequence[Any], systems: Sequence[str], values: np.ndarray) -> ImageTable:
    """Tabulate parallel (image, system, score) entries, one per pair."""
    image_labels, image_index = np.unique(np.asarray(images), return_inverse=True)
    names, system_index = np.unique(np.asarray([str(s) for s in systems]), return_inverse=True)
    sums = np.zeros((image_labels.size, names.size))
    sizes = np.zeros((image_labels.size, names.size))
    np.add.at(sums, (image_index, system_index), values)
    np.add.at(sizes, (image_index, system_index), 1.0)
    return ImageTable(images=image_labels, names=names, sums=sums, sizes=sizes)


@dataclass(frozen=True)
class PairedDifferences:
    """Per compared (upper, lower) column pair: the per-image differences summed over the
    images both systems have (``sums``) and those images marked 1 (``sizes``)."""

    compared: tuple[tuple[int, int], ...]
    sums: np.ndarray
    sizes: np.ndarray


def paired_differences(table: ImageTable, all_pairs: bool) -> PairedDifferences:
    """Image-paired differences of every pair of systems in ranking order, or of the
    neighbouring ones only when ``all_pairs`` is False."""
    order, n_sys = table.order, table.names.size
    compared = (
        [(order[a], order[b]) for a in range(n_sys) for b in range(a + 1, n_sys)]
        if all_pairs
        else list(zip(order, order[1:], strict=False))
    )
    image_means = table.image_means
    sums = np.zeros((table.images.size, len(compared)))
    sizes = np.zeros((table.images.size, len(compared)))
    for k, (upper, lower) in enumerate(compared):
        d = image_means[:, upper] - image_means[:, lower]
        shared = ~np.isnan(d)
        sums[shared, k] = d[shared]
        sizes[shared, k] = 1.0
    return PairedDifferences(compared=tuple(compared), sums=sums, sizes=sizes)


@dataclass(frozen=True)
class SystemMean:
    """One system's mean score, its interval, its pairs and the images they show."""

    system: str
    mean: float
    ci_low: float | None
    ci_high: float | None
    pairs: int
    images: int


@dataclass(frozen=True)
class SystemDifference:
    """``upper - lower`` over the images both systems have (None when they share none)."""

    upper: str
    lower: str
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    images: int
    excludes_zero: bool | None


def system_means(table: ImageTable, low: np.ndarray, high: np.ndarray) -> tuple[SystemMean, ...]:
    """The systems in ranking order, with the bootstrap bounds of their columns."""
    means = table.means
    return tuple(
        SystemMean(
            str(table.names[j]),
            float(means[j]),
            *_interval(low[j], high[j]),
            int(table.sizes[:, j].sum()),
            int((table.sizes[:, j] > 0).sum()),
        )
        for j in table.order
    )


def system_differences(
    table: ImageTable, paired: PairedDifferences, low: np.ndarray, high: np.ndarray
) -> tuple[SystemDifference, ...]:
    """Each compared pair's mean image-paired difference with its bootstrap bounds."""
    rows = []
    for k, (upper, lower) in enumerate(paired.compared):
        shared = int(paired.sizes[:, k].sum())
        ci_low, ci_high = _interval(low[k], high[k])
        rows.append(
            SystemDifference(
                upper=str(table.names[upper]),
                lower=str(table.names[lower]),
                difference=float(paired.sums[:, k].sum() / shared) if shared else None,
                ci_low=ci_low,
                ci_high=ci_high,
                images=shared,
                excludes_zero=(
                    bool(ci_low > 0 or ci_high < 0)
                    if ci_low is not None and ci_high is not None
                    else None
                ),
            )
        )
    return tuple(rows)


def neighbour_robustness(table: ImageTable) -> tuple[NeighbourReversal, ...]:
    """``rubrics.robustness.paired_reversal`` for each pair of neighbours in the ranking."""
    order, sizes, image_means = table.order, table.sizes, table.image_means
    rows = []
    for upper, lower in zip(order, order[1:], strict=False):
        both = (sizes[:, upper] > 0) & (sizes[:, lower] > 0)
        reversal = (
            paired_reversal(image_means[both, upper], image_means[both, lower])
            if both.any()
            else None
        )
        rows.append(NeighbourReversal(str(table.names[upper]), str(table.names[lower]), reversal))
    return tuple(rows)


@dataclass(frozen=True)
class SystemResults:
    """Per-system means, paired differences and the robustness of the neighbours' order."""

    systems: tuple[SystemMean, ...]
    differences: tuple[SystemDifference, ...]
    robustness: tuple[NeighbourReversal, ...]
    all_pairs: bool
    confidence: float
    n_resamples: int
    n_images: int

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable dict the report stores (see :func:`system_results`)."""
        return {
            "systems": [asdict(row) for row in self.systems],
            "differences": [asdict(row) for row in self.differences],
            "robustness": [row.as_dict() for row in self.robustness],
            "all_pairs": self.all_pairs,
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "n_images": self.n_images,
        }


def fit_systems(
    images: Sequence[Any],
    systems: Sequence[str],
    scores: Sequence[float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> SystemResults:
    """Mean score per system and paired differences, with bootstrap intervals.

    ``images``, ``systems`` and ``scores`` are parallel, one entry per pair (caption): its
    image (any sortable label), its system and its score (the mean of its ratings). Systems
    come highest mean first (ties by name); every pair of systems is compared in that order
    (``upper`` ranked above ``lower``), or only the neighbouring ones above
    ``MAX_ALL_PAIRS_SYSTEMS`` systems (``all_pairs`` says which). An interval is None when no
    resample defines it. ValueError for lengths that differ, a non-finite score, or no pair.
    """
    values = checks.finite_array(scores, "scores")
    if values.ndim != 1 or values.size == 0:
        raise ValueError("scores must be a non-empty list of numbers")
    if len(images) != values.size or len(systems) != values.size:
        raise ValueError("images, systems and scores must have the same length")
    n_resamples = checks.integer(n_resamples, "n_resamples")
    confidence = checks.confidence(confidence)
    table = image_table(images, systems, values)
    n_sys = table.names.size
    all_pairs = n_sys <= MAX_ALL_PAIRS_SYSTEMS
    paired = paired_differences(table, all_pairs)
    # One draw of images for the means and the differences (paired: the same images).
    boot = resampling.paired_cluster_bootstrap_means(
        np.hstack([table.sums, paired.sums]),
        np.hstack([table.sizes, paired.sizes]),
        n_resamples,
        confidence,
        seed,
    )
    return SystemResults(
        systems=system_means(table, boot.low[:n_sys], boot.high[:n_sys]),
        differences=system_differences(table, paired, boot.low[n_sys:], boot.high[n_sys:]),
        robustness=neighbour_robustness(table),
        all_pairs=all_pairs,
        confidence=confidence,
        n_resamples=n_resamples,
        n_images=int(table.images.size),
    )


def system_results(
    images: Sequence[Any],
    systems: Sequence[str],
    scores: Sequence[float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> dict[str, Any]:
    """:func:`fit_systems` as the JSON-serialisable dict the report stores:

    * ``systems``: ``[{system, mean, ci_low, ci_high, pairs, images}]``;
    * ``differences``: ``[{upper, lower, difference, ci_low, ci_high, images,
      excludes_zero}]``; ``images`` is the number of shared images, and a difference with
      none is None;
    * ``robustness``: for each pair of systems next to each other in the ranking, the
      fewest shared images whose removal puts the lower system's mean strictly above the
      upper's (``rubrics.robustness.paired_reversal``, exact; as THumB's report), the
      template ``reports/_robustness.html`` shows;
    * ``confidence``, ``n_resamples``, ``n_images``, ``all_pairs``.
    """
    return fit_systems(
        images, systems, scores, n_resamples=n_resamples, confidence=confidence, seed=seed
    ).as_dict()


def _interval(low: float, high: float) -> tuple[float | None, float | None]:
    if np.isnan(low) or np.isnan(high):
        return None, None
    return float(low), float(high)
