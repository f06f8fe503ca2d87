"""Each system against the Human-vs-Human baseline, paired by image (section 4.2).

The paper: "The human-human comparisons provide a baseline variance that we use to
determine whether the model-human comparisons present statistically significant
deviations from human captioning performance." Three estimators: the paired differences
per image (:func:`paired_differences`), the sign-flip permutation counts
(:func:`sign_flips`) and their composition with a bootstrap interval into one
:class:`BaselineTest` per system (:func:`baseline_tests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rubrics import checks, resampling
from rubrics.humanr.scoring import HUMAN_SYSTEM

BASELINE_TEST = "paired sign-flip permutation test over images, two-sided"
"""What ``baseline_tests`` computes, as the report and the export's datasheet name it."""

# Sign flips per block of the Monte Carlo test: 2**18 cells (2 MB as floats) whatever the
# number of images, so memory stays flat and a block stays in cache. Blocks of 2**19 cells
# and more were 10 to 20 times slower on a 2-core machine (OpenBLAS starts threads for
# larger products); 2**18 cells make 10,000 flips of 3,500 images about 0.02 s.
_FLIP_CELLS = 2**18


@dataclass(frozen=True)
class PairedDifferences:
    """Per image and other system, ``d = system - baseline``.

    ``systems``: the other systems (columns); ``differences``: (images, systems), 0
    where the image is not paired for the system; ``paired``: where it is (the image has
    a value of both the system and the baseline).
    """

    systems: tuple[str, ...]
    differences: np.ndarray
    paired: np.ndarray


def paired_differences(
    values: np.ndarray, names: Sequence[str], human_system: str
) -> PairedDifferences:
    """The differences of each system's per-image ``values`` from the baseline's column."""
    names = list(names)
    if len(set(names)) != len(names):
        raise ValueError("systems: a name occurs twice")
    if human_system not in names:
        raise ValueError(f"systems: no {human_system!r} column (the baseline)")
    base = names.index(human_system)
    others = [j for j in range(len(names)) if j != base]
    diffs = values[:, others] - values[:, [base]]
    paired = ~np.isnan(diffs)
    return PairedDifferences(tuple(names[j] for j in others), np.where(paired, diffs, 0.0), paired)


@dataclass(frozen=True)
class SignFlips:
    """Per system, how many sign flips of the images give a sum of differences at least
    as far from 0 as the observed one (``extreme``); whether every flip was counted
    (``exact``); how many flips were counted (``n_flips``)."""

    extreme: np.ndarray
    exact: bool
    n_flips: int


def sign_flips(
    pairs: PairedDifferences, n_permutations: int, rng: np.random.Generator
) -> SignFlips:
    """Count the sign flips of ``pairs``: all ``2 ** n`` when at most ``n_permutations``,
    else ``n_permutations`` random ones drawn from ``rng``."""
    diffs = pairs.differences
    rows = diffs[pairs.paired.any(axis=1)]  # an image paired for no system adds 0 to sums
    n = rows.shape[0]
    observed = rows.sum(axis=0)
    # Sums of differences are exact in most studies (quarters), not always (a mean of three
    # answers): equal sums must compare equal after the matrix product's rounding.
    threshold = np.abs(observed) - 1e-9 * np.maximum(1.0, np.abs(rows).sum(axis=0))

    def extreme(flips: np.ndarray) -> np.ndarray:
        # Flipping the images in f turns sum(d) into sum(d) - 2 * (f @ d): one product.
        sums = observed - 2.0 * (flips.astype(np.float64) @ rows)
        return (np.abs(sums) >= threshold).sum(axis=0)

    if n < 63 and 2**n <= n_permutations:
        every = (np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n)) & 1
        return SignFlips(extreme(every), True, 2**n)
    count = np.zeros(rows.shape[1], dtype=np.int64)
    block, width = max(1, _FLIP_CELLS // n), (n + 7) // 8
    for start in range(0, n_permutations, block):
        size = min(block, n_permutations - start)
        random_bytes = np.frombuffer(rng.bytes(size * width), dtype=np.uint8)
        count += extreme(np.unpackbits(random_bytes.reshape(size, width), axis=1, count=n))
    return SignFlips(count, False, n_permutations)


@dataclass(frozen=True)
class BaselineTest:
    """One system against the baseline: see :func:`baseline_tests` for each field."""

    n_images: int
    difference: float | None
    difference_interval: tuple[float, float] | None
    confidence: float
    interval_excludes_baseline: bool | None
    p_value: float | None
    exact: bool
    n_permutations: int
    test: str = BASELINE_TEST

    def as_dict(self) -> dict[str, Any]:
        interval = self.difference_interval
        return {
            "test": self.test,
            "n_images": self.n_images,
            "difference": self.difference,
            "difference_interval": None if interval is None else list(interval),
            "confidence": self.confidence,
            "interval_excludes_baseline": self.interval_excludes_baseline,
            "p_value": self.p_value,
            "exact": self.exact,
            "n_permutations": self.n_permutations,
        }


def baseline_results(
    pairs: PairedDifferences,
    low: np.ndarray,
    high: np.ndarray,
    flips: SignFlips,
    confidence: float,
) -> dict[str, BaselineTest]:
    """One :class:`BaselineTest` per other system, from its bootstrap interval ends
    (``low``, ``high``: NaN when undefined) and the flip counts."""
    out: dict[str, BaselineTest] = {}
    for k, name in enumerate(pairs.systems):
        n_pairs = int(pairs.paired[:, k].sum())
        difference = p_value = interval = excludes = None
        if n_pairs:
            difference = float(pairs.differences[:, k].sum() / n_pairs)
            # Exact: the observed flip is one of the 2^n counted. Random: (1 + extreme) /
            # (1 + flips), the observed one added, so a p-value is never 0.
            extreme = flips.extreme[k]
            p = extreme / flips.n_flips if flips.exact else (1 + extreme) / (1 + flips.n_flips)
            p_value = float(p)
            if not np.isnan(low[k]):
                interval = (float(low[k]), float(high[k]))
                excludes = bool(low[k] > 0 or high[k] < 0)
        out[name] = BaselineTest(
            n_images=n_pairs,
            difference=difference,
            difference_interval=interval,
            confidence=confidence,
            interval_excludes_baseline=excludes,
            p_value=p_value,
            exact=flips.exact,
            n_permutations=flips.n_flips,
        )
    return out


def baseline_tests(
    image_values: ArrayLike,
    systems: Sequence[str],
    *,
    human_system: str = HUMAN_SYSTEM,
    confidence: float = 0.95,
    n_permutations: int = 10_000,
    n_bootstrap: int = 1000,
    seed: int | np.random.Generator = 0,
) -> dict[str, dict[str, Any]]:
    """Test each system against the Human-vs-Human baseline, paired by image (section 4.2).

    ``image_values``: (images, systems), the mean kept comparison value of each system
    (column) on each image, NaN where the image has none; ``systems`` names the columns
    and must include ``human_system``. Per other system, over the images that have both
    a value of the system and of the baseline (its paired images), with
    ``d_i = value(system, i) - value(baseline, i)``:

    * ``difference``: the mean of ``d_i``, the system's HUMANr minus the baseline's on
      its paired images;
    * ``p_value``: two-sided paired permutation test of "the system's comparisons and
      the baseline's are exchangeable within an image": under it each ``d_i`` is as
      likely to have either sign, so the p-value is the share of the ``2 ** n`` sign
      flips of the ``d_i`` whose sum is at least as far from 0 as the observed one.
      Exact (every flip, ``exact=True``) when ``2 ** n <= n_permutations`` for the n
      images paired for some system; otherwise ``n_permutations`` random flips and
      ``(1 + extreme) / (1 + n_permutations)`` (never 0: Phipson and Smyth 2010);
    * ``difference_interval``: percentile bootstrap interval of the mean difference at
      ``confidence``: ``resampling.paired_cluster_bootstrap_means`` over all rows of
      ``image_values`` (the same drawn images for every system; a system's replicate is
      the mean of ``d_i`` over the drawn images paired for it);
    * ``interval_excludes_baseline``: that interval excludes 0, i.e. the system's
      HUMANr, drawn paired with the baseline's by image, excludes the baseline.

    A system with no paired image gets None for each value. The same sign flips serve
    every system (an image not paired for a system adds 0 to its sums). One generator
    from ``seed`` draws the bootstrap, then the flips; ``report`` draws the same
    bootstrap as its own (one set of drawn images) and the flips last. Returns each
    :class:`BaselineTest` as its JSON dict, keyed by system.
    """
    values = np.asarray(image_values, dtype=np.float64)
    names = [str(name) for name in systems]
    if values.ndim != 2 or values.shape[1] != len(names):
        raise ValueError(
            f"image_values: expected (images, {len(names)}) for {len(names)} systems, "
            f"got shape {values.shape}"
        )
    if np.isinf(values).any():
        raise ValueError("image_values: infinite value (use NaN for a missing one)")
    pairs = paired_differences(values, names, human_system)
    confidence = checks.confidence(confidence)
    n_permutations = checks.integer(n_permutations, "n_permutations")
    n_bootstrap = checks.integer(n_bootstrap, "n_bootstrap")
    rng = resampling.as_generator(seed)
    low = high = np.full(len(pairs.systems), np.nan)
    if values.shape[0]:
        boot = resampling.paired_cluster_bootstrap_means(
            pairs.differences, pairs.paired.astype(np.float64), n_bootstrap, confidence, rng
        )
        low, high = boot.low, boot.high
    flips = sign_flips(pairs, n_permutations, rng)
    tests = baseline_results(pairs, low, high, flips, confidence)
    return {name: test.as_dict() for name, test in tests.items()}
