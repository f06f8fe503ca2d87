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
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubrics import checks, resampling
from rubrics.robustness import paired_reversal

__all__ = ["MAX_ALL_PAIRS_SYSTEMS", "system_results"]

#: Up to this many systems every pair of systems is compared (45 differences); above it,
#: only systems next to each other in the ranking, so the bootstrap's columns grow with
#: the systems, not their square.
MAX_ALL_PAIRS_SYSTEMS = 10


def system_results(
    images: Sequence[Any],
    systems: Sequence[str],
    scores: Sequence[float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> dict[str, Any]:
    """Mean score per system and paired differences, with bootstrap intervals.

    ``images``, ``systems`` and ``scores`` are parallel, one entry per pair (caption):
    its image (any sortable label), its system and its score (the mean of its ratings).
    Returns a JSON-serialisable dict:

    * ``systems``: ``[{system, mean, ci_low, ci_high, pairs, images}]``, highest mean
      first (ties by name);
    * ``differences``: ``[{upper, lower, difference, ci_low, ci_high, images,
      excludes_zero}]`` for every pair of systems in that order (``upper`` ranked above
      ``lower``), or only the neighbouring ones above ``MAX_ALL_PAIRS_SYSTEMS`` systems
      (``all_pairs`` says which); ``images`` is the number of shared images, and a
      difference with none is None;
    * ``robustness``: for each pair of systems next to each other in that order, the
      fewest shared images whose removal puts the lower system's mean strictly above the
      upper's (``rubrics.robustness.paired_reversal``, exact; as THumB's report), the
      template ``reports/_robustness.html`` shows;
    * ``confidence``, ``n_resamples``, ``n_images``, ``all_pairs``.

    An interval is None when no resample defines it. ValueError for lengths that differ,
    a non-finite score, or no pair at all.
    """
    values = checks.finite_array(scores, "scores")
    if values.ndim != 1 or values.size == 0:
        raise ValueError("scores must be a non-empty list of numbers")
    if len(images) != values.size or len(systems) != values.size:
        raise ValueError("images, systems and scores must have the same length")
    n_resamples = checks.integer(n_resamples, "n_resamples")
    confidence = checks.confidence(confidence)
    image_labels, image_index = np.unique(np.asarray(images), return_inverse=True)
    names, system_index = np.unique(np.asarray([str(s) for s in systems]), return_inverse=True)
    n_img, n_sys = image_labels.size, names.size
    sums = np.zeros((n_img, n_sys))
    sizes = np.zeros((n_img, n_sys))
    np.add.at(sums, (image_index, system_index), values)
    np.add.at(sizes, (image_index, system_index), 1.0)
    means = sums.sum(axis=0) / sizes.sum(axis=0)
    order = sorted(range(n_sys), key=lambda j: (-means[j], str(names[j])))
    all_pairs = n_sys <= MAX_ALL_PAIRS_SYSTEMS
    compared = (
        [(order[a], order[b]) for a in range(n_sys) for b in range(a + 1, n_sys)]
        if all_pairs
        else list(zip(order, order[1:], strict=False))
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        image_means = sums / sizes  # NaN where an image has no pair of the system
    diff_sums = np.zeros((n_img, len(compared)))
    diff_sizes = np.zeros((n_img, len(compared)))
    for k, (upper, lower) in enumerate(compared):
        d = image_means[:, upper] - image_means[:, lower]
        shared = ~np.isnan(d)
        diff_sums[shared, k] = d[shared]
        diff_sizes[shared, k] = 1.0
    # One draw of images for the means and the differences (paired: the same images).
    boot = resampling.paired_cluster_bootstrap_means(
        np.hstack([sums, diff_sums]),
        np.hstack([sizes, diff_sizes]),
        n_resamples,
        confidence,
        seed,
    )
    rows = [
        {
            "system": str(names[j]),
            "mean": float(means[j]),
            **_interval(boot.low[j], boot.high[j]),
            "pairs": int(sizes[:, j].sum()),
            "images": int((sizes[:, j] > 0).sum()),
        }
        for j in order
    ]
    differences = []
    for k, (upper, lower) in enumerate(compared):
        shared = int(diff_sizes[:, k].sum())
        interval = _interval(boot.low[n_sys + k], boot.high[n_sys + k])
        differences.append(
            {
                "upper": str(names[upper]),
                "lower": str(names[lower]),
                "difference": float(diff_sums[:, k].sum() / shared) if shared else None,
                **interval,
                "images": shared,
                "excludes_zero": (
                    bool(interval["ci_low"] > 0 or interval["ci_high"] < 0)
                    if interval["ci_low"] is not None
                    else None
                ),
            }
        )
    robustness = []
    for upper, lower in zip(order, order[1:], strict=False):
        both = (sizes[:, upper] > 0) & (sizes[:, lower] > 0)
        entry = {"upper": str(names[upper]), "lower": str(names[lower])}
        if both.any():
            reversal = paired_reversal(image_means[both, upper], image_means[both, lower])
            entry.update(reversal.as_dict())
        else:
            entry.update({"removed": None, "total": 0, "share": None})
        robustness.append(entry)
    return {
        "systems": rows,
        "differences": differences,
        "robustness": robustness,
        "all_pairs": all_pairs,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "n_images": int(n_img),
    }


def _interval(low: float, high: float) -> dict[str, float | None]:
    if np.isnan(low) or np.isnan(high):
        return {"ci_low": None, "ci_high": None}
    return {"ci_low": float(low), "ci_high": float(high)}
