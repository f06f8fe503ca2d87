"""The HUMANr report's estimators, each computing one thing into a frozen result.

:func:`exclusions` (which rows the attention checks drop), :func:`kept_comparisons` (the
kept values summed per image and per worker), :func:`t_interval`, :func:`image_bootstrap`
(clustered by image, paired over systems), :func:`system_scores`,
:func:`worker_intervals`; the reproducibility, ranking and position-bias estimators are
in ``rubrics.humanr.reproducibility``. ``rubrics.humanr.report`` composes them; each
result's ``as_dict()`` is its part of the report's JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rubrics import resampling
from rubrics.humanr.baseline import PairedDifferences, paired_differences
from rubrics.humanr.responses import Responses

Interval = tuple[float, float]


def listed(interval: Interval | None) -> list[float] | None:
    """An interval as the JSON list it is stored as."""
    return None if interval is None else list(interval)


# ---------------------------------------------------------------------------
# Generic: t-interval and a distribution's summary
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TInterval:
    """The mean of ``n`` >= 2 values, its sd (ddof=1), standard error and t-interval."""

    n: int
    mean: float
    std: float
    sem: float
    low: float
    high: float

    @property
    def bounds(self) -> Interval:
        return (self.low, self.high)

    @property
    def clipped(self) -> Interval:
        """The interval clipped to HUMANr's range [-1, 1], as the toolkit does."""
        return (max(-1.0, self.low), min(1.0, self.high))


def t_interval(values: np.ndarray, confidence: float) -> TInterval | None:
    """Mean +- t quantile (n - 1 degrees of freedom) x standard error; None for n < 2."""
    n = values.shape[0]
    if n < 2:
        return None
    mean = float(values.mean())
    std = float(values.std(ddof=1))
    sem = std / math.sqrt(n)
    from scipy import stats

    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sem
    return TInterval(n=n, mean=mean, std=std, sem=sem, low=mean - half, high=mean + half)


@dataclass(frozen=True)
class Summary:
    """Count, mean, std (ddof=1) and 2.5/50/97.5 percentiles of the finite values."""

    n: int
    mean: float | None
    std: float | None
    p2_5: float | None
    p50: float | None
    p97_5: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def summary(x: np.ndarray) -> Summary:
    """:class:`Summary` of the finite values of ``x`` (all None but ``n`` when none)."""
    x = x[np.isfinite(x)]
    if x.shape[0] == 0:
        return Summary(0, None, None, None, None, None)
    p = np.percentile(x, [2.5, 50, 97.5])
    std = float(x.std(ddof=1)) if x.shape[0] > 1 else None
    return Summary(int(x.shape[0]), float(x.mean()), std, float(p[0]), float(p[1]), float(p[2]))


# ---------------------------------------------------------------------------
# Attention checks and the kept comparisons
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerChecks:
    """One worker's rows, groups, attention checks and what the failed checks dropped."""

    responses: int
    groups: int
    checks: int
    failed_checks: int
    dropped_groups: int
    dropped_responses: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Exclusions:
    """Which rows are dropped (section 4.2): every row of a (worker, group) whose attention
    check failed (``dropped_by_check``), and those ``Responses.dropped`` flags.

    ``worker``: each row's index into ``worker_keys`` (the sorted worker ids).
    """

    worker: np.ndarray
    worker_keys: np.ndarray
    is_check: np.ndarray
    failed: np.ndarray
    dropped_by_check: np.ndarray
    dropped: np.ndarray
    n_dropped_groups: int
    per_worker: dict[str, WorkerChecks]

    def as_dict(self) -> dict[str, Any]:
        """The report's ``attention_checks`` section."""
        return {
            "n_checks": int(self.is_check.sum()),
            "n_failed": int(self.failed.sum()),
            "n_dropped_groups": self.n_dropped_groups,
            "n_dropped_responses": int(self.dropped_by_check.sum()),
            "n_dropped_other": int((self.dropped & ~self.dropped_by_check).sum()),
            "per_worker": {key: counts.as_dict() for key, counts in self.per_worker.items()},
        }


def exclusions(responses: Responses) -> Exclusions:
    """The rows the attention checks drop, and the counts per worker."""
    check = responses.is_attention_check
    failed = responses.check_failed()
    worker_keys, worker = np.unique(responses.worker_ids, return_inverse=True)
    group_keys, group = np.unique(responses.group_ids, return_inverse=True)
    n_workers, n_groups = worker_keys.shape[0], group_keys.shape[0]
    wg = worker.astype(np.int64) * n_groups + group  # a group as one worker answered it
    failed_wg = np.unique(wg[failed])
    dropped_by_check = np.isin(wg, failed_wg)
    counts = [
        np.bincount(worker, minlength=n_workers),
        np.bincount(np.unique(wg) // n_groups, minlength=n_workers),
        np.bincount(worker[check], minlength=n_workers),
        np.bincount(worker[failed], minlength=n_workers),
        np.bincount(failed_wg // n_groups, minlength=n_workers),
        np.bincount(worker[dropped_by_check], minlength=n_workers),
    ]
    per_worker = {
        str(key): WorkerChecks(*(int(c[i]) for c in counts))
        for i, key in enumerate(worker_keys.tolist())
    }
    return Exclusions(
        worker=worker,
        worker_keys=worker_keys,
        is_check=check,
        failed=failed,
        dropped_by_check=dropped_by_check,
        dropped=dropped_by_check | responses.dropped,
        n_dropped_groups=int(failed_wg.shape[0]),
        per_worker=per_worker,
    )


@dataclass(frozen=True)
class KeptComparisons:
    """The kept comparisons (not checks, not dropped), one entry per row, with their sums
    and counts per image x system and per worker x system (at least one row each, so an
    empty study still has arrays to sum).

    ``systems``: every system with a comparison, sorted, the baseline included;
    ``n_comparisons``: each system's comparisons before exclusions; ``system``,
    ``image`` and ``worker``: each kept row's index into the systems, the images with a
    kept comparison and the workers with one.
    """

    systems: tuple[str, ...]
    n_comparisons: np.ndarray
    values: np.ndarray
    raw: np.ndarray
    system: np.ndarray
    image: np.ndarray
    worker: np.ndarray
    n_images: int
    n_workers: int
    image_sums: np.ndarray
    image_counts: np.ndarray
    worker_sums: np.ndarray
    worker_counts: np.ndarray

    def of_system(self, j: int) -> np.ndarray:
        """The kept values of system ``j``."""
        return self.values[self.system == j]


def kept_comparisons(responses: Responses, excluded: Exclusions) -> KeptComparisons:
    """The comparison rows :func:`exclusions` keeps; ValueError when there are none at all."""
    comp = ~responses.is_attention_check
    if not comp.any():
        raise ValueError("responses: no comparisons (only attention checks)")
    kept = comp & ~excluded.dropped
    names, sys_all = np.unique(responses.systems[comp], return_inverse=True)
    n_sys = names.shape[0]
    sys_idx = np.full(len(responses), -1)
    sys_idx[comp] = sys_all
    v, s_k = responses.values()[kept], sys_idx[kept]
    img_keys, img_k = np.unique(responses.image_ids[kept], return_inverse=True)
    w_keys, w_k = np.unique(excluded.worker[kept], return_inverse=True)
    n_img, n_w = img_keys.shape[0], w_keys.shape[0]

    def cells(rows: int, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sums, cnts = np.zeros((max(rows, 1), n_sys)), np.zeros((max(rows, 1), n_sys))
        np.add.at(sums, (index, s_k), v)
        np.add.at(cnts, (index, s_k), 1.0)
        return sums, cnts

    image_sums, image_counts = cells(n_img, img_k)
    worker_sums, worker_counts = cells(n_w, w_k)
    return KeptComparisons(
        systems=tuple(str(name) for name in names),
        n_comparisons=np.bincount(sys_all, minlength=n_sys),
        values=v,
        raw=responses.raw[kept],
        system=s_k,
        image=img_k,
        worker=w_k,
        n_images=int(n_img),
        n_workers=int(n_w),
        image_sums=image_sums,
        image_counts=image_counts,
        worker_sums=worker_sums,
        worker_counts=worker_counts,
    )


def baseline_pairs(kept: KeptComparisons, human_system: str) -> PairedDifferences | None:
    """Each system's per-image mean minus the baseline's, as ``baseline_tests`` pairs them;
    None without a Human-vs-Human comparison or a kept image."""
    if human_system not in kept.systems or not kept.n_images:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        image_means = kept.image_sums / kept.image_counts  # NaN: no kept comparison
    return paired_differences(image_means, kept.systems, human_system)


# ---------------------------------------------------------------------------
# Intervals of each system
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageBootstrap:
    """Percentile-bootstrap interval ends clustered by image: per system (``low``,
    ``high``) and per other system's difference from the baseline (``difference_low``,
    ``difference_high``); NaN where no resample drew an image of it."""

    low: np.ndarray
    high: np.ndarray
    difference_low: np.ndarray
    difference_high: np.ndarray


def image_bootstrap(
    kept: KeptComparisons,
    pairs: PairedDifferences | None,
    n_bootstrap: int,
    confidence: float,
    rng: np.random.Generator,
) -> ImageBootstrap:
    """Resample the images with a kept comparison, the same draws for every system.

    A system's replicate is the mean over all its kept comparisons on the drawn images
    (``rubrics.resampling.paired_cluster_bootstrap_means``); the differences from the
    baseline are drawn as extra columns of the same draws, which cost next to nothing
    where drawing the images again would double the bootstrap's time.
    """
    n_sys = len(kept.systems)
    low = high = np.full(n_sys, np.nan)
    diff_low = diff_high = np.full(n_sys, np.nan)
    if kept.n_images:
        sums, sizes = kept.image_sums, kept.image_counts
        if pairs is not None:
            sums = np.hstack([sums, pairs.differences])
            sizes = np.hstack([sizes, pairs.paired.astype(np.float64)])
        boot = resampling.paired_cluster_bootstrap_means(sums, sizes, n_bootstrap, confidence, rng)
        low, high = boot.low[:n_sys], boot.high[:n_sys]
        diff_low, diff_high = boot.low[n_sys:], boot.high[n_sys:]
    return ImageBootstrap(low, high, diff_low, diff_high)


@dataclass(frozen=True)
class SystemScore:
    """A system's HUMANr (mean kept value) with its t-interval (clipped to [-1, 1]),
    bootstrap interval over images and mean raw answer; None where undefined."""

    n_comparisons: int
    n_kept: int
    n_images: int
    humanr: float | None = None
    std: float | None = None
    sem: float | None = None
    t_interval: Interval | None = None
    bootstrap_interval: Interval | None = None
    mean_raw: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["t_interval"] = listed(self.t_interval)
        out["bootstrap_interval"] = listed(self.bootstrap_interval)
        return out


def system_scores(
    kept: KeptComparisons, boot: ImageBootstrap, confidence: float
) -> list[SystemScore]:
    """One :class:`SystemScore` per system of ``kept.systems``."""
    scores = []
    for j in range(len(kept.systems)):
        values = kept.of_system(j)
        counts = dict(
            n_comparisons=int(kept.n_comparisons[j]),
            n_kept=int(values.shape[0]),
            n_images=int((kept.image_counts[:, j] > 0).sum()),
        )
        if not values.shape[0]:
            scores.append(SystemScore(**counts))
            continue
        ti = t_interval(values, confidence)
        bootstrap = None
        if not np.isnan(boot.low[j]):  # NaN: no resample drew one of its images
            bootstrap = (float(boot.low[j]), float(boot.high[j]))
        scores.append(
            SystemScore(
                **counts,
                humanr=float(values.mean()),
                std=None if ti is None else ti.std,
                sem=None if ti is None else ti.sem,
                t_interval=None if ti is None else ti.clipped,
                bootstrap_interval=bootstrap,
                mean_raw=float(kept.raw[kept.system == j].mean()),
            )
        )
    return scores


@dataclass(frozen=True)
class WorkerInterval:
    """The t-interval (clipped) over one vote per worker: the mean of the worker's kept
    values of the system; None for fewer than 2 workers."""

    n_workers: int
    worker_mean: float | None
    worker_t_interval: Interval | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_workers": self.n_workers,
            "worker_mean": self.worker_mean,
            "worker_t_interval": listed(self.worker_t_interval),
        }


def worker_intervals(kept: KeptComparisons, confidence: float) -> list[WorkerInterval]:
    """One :class:`WorkerInterval` per system of ``kept.systems``.

    As adaptive allocation measures a system (``rubrics.adaptive``): the t-interval over
    values treats them as independent, but when a worker answers a whole group of one
    system (adaptive studies, issue 27) the worker's leaning moves nine values at once
    and that interval is too narrow (bench/results-adaptive.md).
    """
    out = []
    for j in range(len(kept.systems)):
        has = kept.worker_counts[:, j] > 0
        votes = kept.worker_sums[has, j] / kept.worker_counts[has, j]
        wi = t_interval(votes, confidence)
        out.append(
            WorkerInterval(
                n_workers=int(has.sum()),
                worker_mean=float(votes.mean()) if votes.size else None,
                worker_t_interval=None if wi is None else wi.clipped,
            )
        )
    return out
