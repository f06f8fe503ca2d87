"""The HUMANr report: the estimators of ``rubrics.humanr.estimators`` composed per system.

:func:`estimate` returns a frozen :class:`ReportResult`; :func:`report` is its JSON dict
(``ReportResult.as_dict()``), which the mode's report stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubrics import checks, resampling
from rubrics.humanr.baseline import BaselineTest, baseline_results, sign_flips
from rubrics.humanr.estimators import (
    Exclusions,
    SystemScore,
    WorkerInterval,
    baseline_pairs,
    exclusions,
    image_bootstrap,
    kept_comparisons,
    system_scores,
    worker_intervals,
)
from rubrics.humanr.reproducibility import (
    HalfSplits,
    ImageCountStd,
    PositionBias,
    RankReversal,
    SystemSplits,
    half_splits,
    position_bias,
    ranking_robustness,
    std_by_image_count,
)
from rubrics.humanr.responses import Responses
from rubrics.humanr.scoring import HUMAN_SYSTEM


@dataclass(frozen=True)
class SystemEntry:
    """Everything the report says of one system (or of the Human-vs-Human baseline)."""

    score: SystemScore
    workers: WorkerInterval
    half_splits: SystemSplits | None
    vs_baseline: BaselineTest | None

    @property
    def humanr(self) -> float | None:
        return self.score.humanr

    def as_dict(self, distributions: bool = True) -> dict[str, Any]:
        splits = self.half_splits
        return {
            **self.score.as_dict(),
            **self.workers.as_dict(),
            "half_splits": None if splits is None else splits.as_dict(distributions),
            "vs_baseline": None if self.vs_baseline is None else self.vs_baseline.as_dict(),
        }


@dataclass(frozen=True)
class ReportSettings:
    """The resampling sizes and seed the report was drawn with (None: a Generator)."""

    n_bootstrap: int
    n_splits: int
    n_image_draws: int
    n_permutations: int
    seed: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_bootstrap": self.n_bootstrap,
            "n_splits": self.n_splits,
            "n_image_draws": self.n_image_draws,
            "n_permutations": self.n_permutations,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class ReportResult:
    """The HUMANr report (see :func:`report` for each part); ``systems`` ranked by HUMANr."""

    human_system: str
    confidence: float
    n_responses: int
    n_comparisons: int
    n_kept: int
    n_images: int
    n_workers: int
    systems: dict[str, SystemEntry]
    baseline: SystemEntry | None
    robustness: tuple[RankReversal, ...]
    half_splits: HalfSplits | None
    std_by_image_count: tuple[ImageCountStd, ...]
    attention_checks: Exclusions
    position_bias: PositionBias
    settings: ReportSettings

    def as_dict(self, distributions: bool = True) -> dict[str, Any]:
        """The report as a JSON-serialisable dict, in the order the stored reports hold;
        ``distributions=False`` leaves out the half-split values even when estimated."""
        systems = self.systems
        baseline = self.baseline
        return {
            "human_system": self.human_system,
            "confidence": self.confidence,
            "n_responses": self.n_responses,
            "n_comparisons": self.n_comparisons,
            "n_kept": self.n_kept,
            "n_images": self.n_images,
            "n_workers": self.n_workers,
            "systems": {name: entry.as_dict(distributions) for name, entry in systems.items()},
            "baseline": None if baseline is None else baseline.as_dict(distributions),
            "robustness": [pair.as_dict() for pair in self.robustness],
            "half_splits": None if self.half_splits is None else self.half_splits.as_dict(),
            "std_by_image_count": [point.as_dict() for point in self.std_by_image_count],
            "attention_checks": self.attention_checks.as_dict(),
            "position_bias": self.position_bias.as_dict(),
            "settings": self.settings.as_dict(),
        }


def estimate(
    responses: Responses,
    *,
    human_system: str = HUMAN_SYSTEM,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    n_splits: int = 1000,
    image_counts: Sequence[int] | None = None,
    n_image_draws: int = 200,
    n_permutations: int = 10_000,
    include_distributions: bool = False,
    seed: int | np.random.Generator = 0,
) -> ReportResult:
    """The HUMANr report as a frozen :class:`ReportResult`; the arguments as :func:`report`."""
    if not isinstance(responses, Responses):
        raise ValueError("responses: must be a Responses instance")
    conf = checks.confidence(confidence)
    sizes = [
        checks.integer(n_bootstrap, "n_bootstrap"),
        checks.integer(n_splits, "n_splits"),
        checks.integer(n_image_draws, "n_image_draws", 2),
        checks.integer(n_permutations, "n_permutations"),
    ]
    rng = resampling.as_generator(seed)
    generator = isinstance(seed, np.random.Generator)
    settings = ReportSettings(*sizes, seed=None if generator else int(seed))
    excluded = exclusions(responses)
    kept = kept_comparisons(responses, excluded)
    # One generator, drawn in this order: the bootstrap, the half-splits, the image
    # subsets and the sign flips last, so every number drawn before the tests against the
    # baseline existed is drawn as it was.
    pairs = baseline_pairs(kept, human_system)
    boot = image_bootstrap(kept, pairs, settings.n_bootstrap, conf, rng)
    splits = half_splits(kept, settings.n_splits, rng, include_distributions)
    by_images = std_by_image_count(kept, image_counts, settings.n_image_draws, rng)
    tests: dict[str, BaselineTest] = {}
    if pairs is not None:
        flips = sign_flips(pairs, settings.n_permutations, rng)
        tests = baseline_results(pairs, boot.difference_low, boot.difference_high, flips, conf)
    scores = system_scores(kept, boot, conf)
    workers = worker_intervals(kept, conf)
    entries = {
        name: SystemEntry(
            scores[j], workers[j], None if splits is None else splits.systems[j], tests.get(name)
        )
        for j, name in enumerate(kept.systems)
    }
    baseline = entries.pop(human_system, None)
    order = sorted(entries, key=lambda name: _rank(name, entries[name].humanr))
    ranked = [name for name in order if entries[name].humanr is not None]
    return ReportResult(
        human_system=human_system,
        confidence=conf,
        n_responses=len(responses),
        n_comparisons=int((~responses.is_attention_check).sum()),
        n_kept=int(kept.values.shape[0]),
        n_images=kept.n_images,
        n_workers=int(excluded.worker_keys.shape[0]),
        systems={name: entries[name] for name in order},
        baseline=baseline,
        robustness=tuple(ranking_robustness(kept, ranked)),
        half_splits=splits,
        std_by_image_count=tuple(by_images),
        attention_checks=excluded,
        position_bias=position_bias(kept, conf),
        settings=settings,
    )


def _rank(name: str, humanr: float | None) -> tuple[bool, float, str]:
    """Highest HUMANr first, systems without one last, ties by name."""
    return (humanr is None, 0.0 if humanr is None else -humanr, name)


def report(
    responses: Responses,
    *,
    human_system: str = HUMAN_SYSTEM,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    n_splits: int = 1000,
    image_counts: Sequence[int] | None = None,
    n_image_draws: int = 200,
    n_permutations: int = 10_000,
    include_distributions: bool = False,
    seed: int | np.random.Generator = 0,
) -> dict[str, Any]:
    """HUMANr report per system (section 4.2, Fig. 1 and Fig. 4) as a JSON-serialisable dict.

    Kept comparisons: comparison rows (not attention checks) that are not
    dropped. A (worker, group) whose attention check failed has all its rows
    dropped; ``responses.dropped`` drops more rows. A group without a check
    row is never dropped by this rule.

    Per system (``systems``: the machine systems; ``baseline``: the
    Human-vs-Human entry, or None):

    * ``humanr``: mean comparison value over kept comparisons;
    * ``t_interval``: mean +- t quantile x standard error of the mean (sd with
      ddof=1, t with n - 1 degrees of freedom), clipped to [-1, 1], as the
      toolkit does;
    * ``bootstrap_interval``: percentile bootstrap clustered by image: each of
      ``n_bootstrap`` resamples draws images (all images with a kept
      comparison) with replacement, and a system's replicate is the mean over
      all its kept comparisons on the drawn images (sum of drawn image sums /
      sum of drawn image counts). The same draws serve every system (paired),
      which is exactly the per-system cluster bootstrap when every system has
      comparisons on every image; an image without a comparison of the system
      contributes nothing to it (``rubrics.resampling.paired_cluster_bootstrap_means``);
    * ``mean_raw`` of the system's kept comparisons;
    * ``n_workers``, ``worker_mean`` and ``worker_t_interval``: the t-interval (clipped)
      over one vote per worker, the mean of the worker's kept values of the system. It
      allows for a worker's leaning moving all their values of a system at once (a
      group of one system, as adaptive allocation builds them), which ``t_interval``
      does not; None for fewer than 2 workers.

    Reproducibility: ``n_splits`` random half-splits of the workers that have
    kept comparisons (half A gets floor(W/2) workers): per system a summary of
    the HUMANr values of both halves and of the difference A - B (mean, std,
    2.5/50/97.5 percentiles; splits where a half has no comparison of the
    system are left out and counted). ``std_by_image_count``: for each k of
    ``image_counts`` (default 10, 20, 50, ... below the number of images), the
    std over ``n_image_draws`` random subsets of k images (without
    replacement) of the system's HUMANr on those images (paper Fig. 4 right);
    the subsets of one draw are nested (the first k images of one random
    order of the images), so each k's subset is a uniform random k-subset.

    Against the baseline: each system's ``vs_baseline`` is its
    :func:`baseline_tests` entry (paired by image over the per-image mean
    values, ``n_permutations`` sign flips, ``n_bootstrap`` resamples), None
    when there is no Human-vs-Human comparison.

    ``robustness``: for each pair of machine systems adjacent in HUMANr order,
    the fewest kept comparisons (of either system) whose removal puts the lower
    system's HUMANr strictly above the upper's, exact
    (``rubrics.robustness.unpaired_reversal``).

    Also: attention-check counts per worker and in total, and position bias:
    the mean raw answer over all kept comparisons (5 = no side preference)
    with its t-interval. ``include_distributions`` adds the per-split half
    values. Undefined statistics are None. One generator from ``seed`` drives,
    in order, the bootstrap, the half-splits, the image subsets and the tests
    against the baseline.
    """
    return estimate(
        responses,
        human_system=human_system,
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        n_splits=n_splits,
        image_counts=image_counts,
        n_image_draws=n_image_draws,
        n_permutations=n_permutations,
        include_distributions=include_distributions,
        seed=seed,
    ).as_dict()
