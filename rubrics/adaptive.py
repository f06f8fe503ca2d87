"""Adaptive allocation: when a VICR pair has enough ratings, which HUMANr systems need more.

Issue 15 ("plan and stop"). Pure functions over plain numbers and arrays; the assignment
service only calls them. Nothing here is timed or random unless a seed is passed.

VICR: stop a pair when its consensus is settled
-----------------------------------------------
A pair's consensus is ``rubrics.vicr.consensus``: the mean of its ratings rounded half up.
A fixed design collects ``max_ratings`` ratings for every pair. The adaptive rule collects
``min_ratings`` and then one more at a time while the consensus could still move.

Why not "the consensus cannot change whatever the remaining ratings are"? That exact rule
never stops early on a 1-5 scale: after [5, 5] with up to 7 ratings, five ratings of 1 give
a mean of 15/7 and a consensus of 2. Any rule that saves ratings accepts a small risk, so the
rule states the risk and bounds it:

    stop when P(consensus of max_ratings ratings != consensus now | ratings so far) <= risk

The probability comes from a latent-class model of raters (``RaterModel``): each pair
belongs to a class t with prior ``prior[t]`` (by default two classes per level: pairs that
raters find clear and pairs they split on), and every rating of the pair is drawn
independently from ``noise[t]`` (rating distributions shared by all raters, the homogeneous
Dawid-Skene model). Given the ratings so far, the posterior of t is exact (Bayes' rule over
the classes); given t, the sum T of the m remaining ratings is the m-fold convolution of
``noise[t]``; the consensus after all of them is ``round_half_up((S + T) / max_ratings)``,
the mode's own rounding. So the probability of a change is computed exactly, without
sampling (``vicr_change_probability``; the tests check it against brute force over every
completion and ``rubrics.vicr.consensus``).

Where the model comes from: ``fit_rater_model`` estimates it by EM from any ratings, e.g. a
pilot study or the pairs a study has already finished; ``RaterModel.symmetric`` states it
from assumptions (the share of ratings equal to the true level, and adjacent to it).

``risk`` bounds the chance that one stopped pair ends with another consensus than
``max_ratings`` ratings would give; a study's target ("95% of pairs keep the full-data
consensus") is over all pairs, including those never stopped early, so a larger per-pair
risk can meet it. ``vicr_calibrate_risk`` picks the largest risk whose agreement reaches
the target on pairs simulated from the model (no oracle needed). ``vicr_replay`` and
``vicr_replay_all_orders`` replay the rule on known ratings (``bench/adaptive.py``).

HUMANr: serve the systems whose interval is still too wide
----------------------------------------------------------
A system's HUMANr interval is the report's t-interval (``rubrics.humanr.report``):
mean +- t quantile x standard error. ``humanr_next_systems`` returns the systems whose
half-width is still above the target (widest first); a system whose half-width has reached
the target gets no more groups. As wired (``annotation/modes/humanr``), the interval is over
one vote per worker (``humanr_next_systems_by_worker``, the report's ``worker_t_interval``)
and every group holds one system, so a settled system's groups are simply not served.
Stopping on a random width makes the interval a little optimistic (a run of votes that
happen to agree stops early), so a system is never stopped before ``min_values`` values and
``min_workers`` workers (the mode uses 27 and 10); ``tests/rubrics/test_adaptive_coverage.py``
measures the coverage that leaves, and ``bench/adaptive.py`` the saving on the platform.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import permutations

import numpy as np
from numpy.typing import ArrayLike, NDArray

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from rubrics import checks, resampling, vicr

__all__ = [
    "RaterModel",
    "RiskCalibration",
    "VicrExpectation",
    "VicrReplay",
    "fit_rater_model",
    "humanr_half_width",
    "humanr_next_systems",
    "humanr_next_systems_by_worker",
    "vicr_change_probability",
    "vicr_calibrate_risk",
    "vicr_needs_more",
    "vicr_replay",
    "vicr_replay_all_orders",
]

#: Largest ``max_ratings`` the rule computes for (VicrSettings bounds it at 1,000 too).
MAX_RATINGS = 1000

# --------------------------------------------------------------------------------------
# The rater model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RaterModel:
    """Latent-class model of ratings on ``levels`` levels (see the module docstring).

    ``prior[t]``: share of pairs in class t; ``noise[t, r]``: probability that a rater gives
    rating r + 1 to a pair of class t. Rows and the prior sum to 1. ``symmetric`` has one
    class per level (class t is "true level t + 1"); ``fit_rater_model`` two by default.
    """

    prior: NDArray[np.float64]
    noise: NDArray[np.float64]

    def __post_init__(self) -> None:
        prior = checks.finite_array(self.prior, "prior")
        noise = checks.finite_array(self.noise, "noise")
        if prior.ndim != 1 or noise.ndim != 2 or noise.shape[0] != prior.shape[0]:
            raise ValueError(
                f"noise must have one row per class of prior, got {noise.shape} and {prior.shape}"
            )
        if not 2 <= noise.shape[1] <= 9:
            raise ValueError(f"noise must have 2 to 9 levels (columns), got {noise.shape[1]}")
        if (prior < 0).any() or (noise < 0).any():
            raise ValueError("prior and noise must be probabilities (>= 0)")
        if not np.isclose(prior.sum(), 1.0) or not np.allclose(noise.sum(axis=1), 1.0):
            raise ValueError("prior and each row of noise must sum to 1")
        prior.setflags(write=False)
        noise.setflags(write=False)
        object.__setattr__(self, "prior", prior)
        object.__setattr__(self, "noise", noise)

    @property
    def levels(self) -> int:
        """Levels of the rating scale (columns of ``noise``)."""
        return int(self.noise.shape[1])

    @property
    def classes(self) -> int:
        """Latent classes of pairs (rows of ``noise``)."""
        return int(self.prior.shape[0])

    @classmethod
    def symmetric(cls, levels: int = 5, *, exact: float = 0.6, adjacent: float = 0.3) -> RaterModel:
        """A model from stated assumptions: a rater gives the true level with probability
        ``exact``, each neighbour with ``adjacent / 2`` and spreads the rest evenly over the
        other levels; what falls off the scale's ends stays on the scale (renormalised).
        True levels are uniform."""
        levels = checks.integer(levels, "levels", 2, 9)
        for name, value in (("exact", exact), ("adjacent", adjacent)):
            if isinstance(value, bool) or not 0 <= float(value) <= 1:
                raise ValueError(f"{name} must be a probability, got {value!r}")
        rest = 1.0 - exact - adjacent
        if rest < -1e-12:
            raise ValueError("exact + adjacent must not exceed 1")
        distance = np.abs(np.subtract.outer(np.arange(levels), np.arange(levels)))
        far = np.maximum((distance >= 2).sum(axis=1, keepdims=True), 1)
        noise = np.where(distance == 0, exact, np.where(distance == 1, adjacent / 2, 0.0))
        noise = noise + np.where(distance >= 2, max(rest, 0.0) / far, 0.0)
        noise = noise / noise.sum(axis=1, keepdims=True)
        return cls(prior=np.full(levels, 1.0 / levels), noise=noise)

    def posterior(self, counts: ArrayLike) -> NDArray[np.float64]:
        """P(true level | a pair's ratings), from the count of each rating (Bayes' rule)."""
        c = np.asarray(counts, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_noise = np.log(self.noise)
            log_prior = np.log(self.prior)
        # A rating never seen contributes noise ** 0 = 1, even where noise is 0 (no 0 * -inf).
        terms = np.multiply(c, log_noise, out=np.zeros_like(log_noise), where=c > 0)
        log = log_prior + terms.sum(axis=1)
        if not np.isfinite(log.max()):
            raise ValueError("these ratings are impossible under the rater model")
        log -= log.max()
        weights = np.exp(log)
        return weights / weights.sum()

    def simulate(self, n_pairs: int, ratings_per_pair: int, seed: resampling.Seed) -> np.ndarray:
        """(n_pairs, ratings_per_pair) ratings 1..levels drawn from the model."""
        rng = resampling.as_generator(seed)
        truth = rng.choice(self.classes, size=n_pairs, p=self.prior)
        cumulative = np.cumsum(self.noise, axis=1)[truth]  # (pairs, levels)
        u = rng.random((n_pairs, ratings_per_pair, 1))
        drawn = (u > cumulative[:, None, :-1]).sum(axis=2)
        return drawn + 1


def _counts_matrix(ratings: Iterable[Sequence[int]], levels: int) -> np.ndarray:
    flat, counts = vicr._ragged(ratings, levels)
    pair = np.repeat(np.arange(counts.size), counts)
    matrix = np.zeros((counts.size, levels))
    np.add.at(matrix, (pair, flat - 1), 1.0)
    return matrix


def fit_rater_model(
    ratings: Iterable[Sequence[int]],
    *,
    levels: int = 5,
    split_ambiguous: bool = True,
    smoothing: float = 0.5,
    max_iterations: int = 500,
    tolerance: float = 1e-9,
) -> RaterModel:
    """Estimate a ``RaterModel`` from ratings (one sequence per pair) by EM.

    The homogeneous Dawid-Skene model: the E step computes each pair's posterior over true
    levels, the M step the prior and the shared confusion matrix from those posteriors, with
    ``smoothing`` pseudo-counts in every cell (no probability is exactly 0, so a rating the
    pilot never saw still has a chance). EM starts from each pair's consensus as its level,
    which keeps level t + 1 meaning "raters mostly say t + 1" (no label switching).
    Pairs with a single rating carry little information but are used.

    ``split_ambiguous``: two classes per level, started from the pairs whose ratings so far
    are unanimous and from the others. One class per level makes every pair of a level
    equally noisy; real pairs differ (a clear caption gets the same rating from everyone, a
    borderline one splits raters between two levels), and with one class per level the
    model cannot tell a unanimous [4, 4] from the start of a split [4, 4, 3, 3].
    """
    levels = checks.integer(levels, "levels", 2, 9)
    max_iterations = checks.integer(max_iterations, "max_iterations", 1, 100_000)
    if isinstance(smoothing, bool) or not 0 < float(smoothing) <= 100:
        raise ValueError(f"smoothing must be in (0, 100], got {smoothing!r}")
    counts = _counts_matrix(ratings, levels)
    counts = counts[counts.sum(axis=1) > 0]
    if counts.shape[0] < 2:
        raise ValueError("fitting a rater model needs at least 2 rated pairs")
    if not isinstance(split_ambiguous, bool):
        raise ValueError(f"split_ambiguous must be a bool, got {split_ambiguous!r}")
    n = counts.sum(axis=1)
    start = ((2 * (counts @ np.arange(1, levels + 1)) + n) // (2 * n)).astype(np.int64) - 1
    classes = levels
    if split_ambiguous:
        classes = 2 * levels
        start = start + levels * ((counts > 0).sum(axis=1) > 1)
    posterior = np.eye(classes)[start]  # vicr.consensus, and unanimous or not
    previous = -np.inf
    for _ in range(max_iterations):
        prior = (posterior.sum(axis=0) + smoothing) / (posterior.shape[0] + classes * smoothing)
        noise = posterior.T @ counts + smoothing
        noise /= noise.sum(axis=1, keepdims=True)
        log = np.log(prior) + counts @ np.log(noise).T
        top = log.max(axis=1, keepdims=True)
        likelihood = float((top[:, 0] + np.log(np.exp(log - top).sum(axis=1))).sum())
        posterior = np.exp(log - top)
        posterior /= posterior.sum(axis=1, keepdims=True)
        if likelihood - previous < tolerance * max(1.0, abs(likelihood)):
            break
        previous = likelihood
    return RaterModel(prior=prior, noise=noise)


# --------------------------------------------------------------------------------------
# VICR stopping rule
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _sum_distributions(noise_bytes: bytes, levels: int, m: int) -> np.ndarray:
    """Row t: the distribution of the sum of m ratings drawn from noise[t]; index = sum - m."""
    noise = np.frombuffer(noise_bytes).reshape(-1, levels)
    out = np.ones((noise.shape[0], 1))
    for _ in range(m):
        out = np.stack([np.convolve(row, p) for row, p in zip(out, noise, strict=True)])
    return out


def _change_probability(counts: tuple[int, ...], max_ratings: int, model: RaterModel) -> float:
    levels = model.levels
    k = sum(counts)
    m = max_ratings - k
    if m <= 0:
        return 0.0
    total = sum((level + 1) * c for level, c in enumerate(counts))
    now = (2 * total + k) // (2 * k)  # vicr.consensus of the ratings so far
    # The consensus of all max_ratings ratings stays `now` iff
    # 2 * max * now - max <= 2 * (total + T) < 2 * max * now + max.
    low_t = math.ceil((2 * max_ratings * now - max_ratings - 2 * total) / 2)
    high_t = math.ceil((2 * max_ratings * now + max_ratings - 2 * total) / 2) - 1
    sums = _sum_distributions(model.noise.tobytes(), levels, m)  # sums m..m*levels
    lo, hi = max(low_t - m, 0), min(high_t - m, sums.shape[1] - 1)
    stay = sums[:, lo : hi + 1].sum(axis=1) if lo <= hi else np.zeros(model.classes)
    posterior = model.posterior(counts)
    return float(np.clip(1.0 - posterior @ stay, 0.0, 1.0))


def _rating_counts(ratings: Sequence[int], levels: int) -> tuple[int, ...]:
    values = vicr._as_rating_array(ratings, "ratings", levels)
    return tuple(int(c) for c in np.bincount(values - 1, minlength=levels))


def vicr_change_probability(
    ratings: Sequence[int], *, max_ratings: int, model: RaterModel
) -> float:
    """P(the consensus of ``max_ratings`` ratings differs from the consensus of ``ratings``).

    Exact under ``model`` (see the module docstring); 0 when ``ratings`` already holds
    ``max_ratings`` ratings or more. ValueError for an empty pair.
    """
    max_ratings = checks.integer(max_ratings, "max_ratings", 1, MAX_RATINGS)
    counts = _rating_counts(ratings, model.levels)
    if sum(counts) == 0:
        raise ValueError("a pair without ratings has no consensus yet")
    return _change_probability(counts, max_ratings, model)


def _check_bounds(min_ratings: int, max_ratings: int, risk: float) -> tuple[int, int, float]:
    min_ratings = checks.integer(min_ratings, "min_ratings", 1, MAX_RATINGS)
    max_ratings = checks.integer(max_ratings, "max_ratings", 1, MAX_RATINGS)
    if min_ratings > max_ratings:
        raise ValueError("min_ratings must not exceed max_ratings")
    return min_ratings, max_ratings, checks.confidence(risk, "risk")


def vicr_needs_more(
    ratings: Sequence[int],
    *,
    min_ratings: int,
    max_ratings: int,
    model: RaterModel,
    risk: float = 0.05,
) -> bool:
    """Whether a VICR pair should get another rating under the adaptive rule.

    True below ``min_ratings``; False at ``max_ratings`` or more; in between, True while the
    probability that ``max_ratings`` ratings would give another consensus exceeds ``risk``.
    """
    min_ratings, max_ratings, risk = _check_bounds(min_ratings, max_ratings, risk)
    counts = _rating_counts(ratings, model.levels)
    k = sum(counts)
    if k < min_ratings:
        return True
    if k >= max_ratings:
        return False
    return _change_probability(counts, max_ratings, model) > risk


@dataclass(frozen=True)
class VicrReplay:
    """A replay of the VICR rule over pairs whose ratings are known (the oracle).

    Per pair: ``used`` ratings the rule took (a prefix of the pair's ratings in the given
    order), ``available`` ratings (what the fixed design collects), the consensus of the
    used prefix and of all available ratings.
    """

    used: NDArray[np.int64]
    available: NDArray[np.int64]
    consensus: NDArray[np.int64]
    full_consensus: NDArray[np.int64]

    @property
    def ratings_used(self) -> int:
        return int(self.used.sum())

    @property
    def ratings_fixed(self) -> int:
        return int(self.available.sum())

    @property
    def saving(self) -> float:
        """Share of the fixed design's ratings the rule did not need."""
        return 1.0 - self.ratings_used / self.ratings_fixed

    @property
    def agreement(self) -> float:
        """Share of pairs whose final consensus equals the full-data consensus."""
        return float(np.mean(self.consensus == self.full_consensus))

    def as_dict(self) -> dict[str, float | int]:
        return {
            "pairs": int(self.used.size),
            "ratings_used": self.ratings_used,
            "ratings_fixed": self.ratings_fixed,
            "saving": self.saving,
            "agreement": self.agreement,
            "stopped_at_min": int((self.used < self.available).sum()),
        }


def vicr_replay(
    ratings: Iterable[Sequence[int]],
    *,
    min_ratings: int,
    model: RaterModel,
    max_ratings: int | None = None,
    risk: float = 0.05,
) -> VicrReplay:
    """Replay the rule on known ratings: each pair's ratings arrive in the order given.

    A pair's maximum is ``max_ratings`` or the number of ratings it has, whichever is
    smaller (``None``: all of them), so the fixed design is "every available rating" and
    the full-data consensus is the consensus of all of them. The rule stops a pair at the
    first prefix (of at least ``min_ratings``) where ``vicr_needs_more`` says no.
    """
    pairs = [vicr._as_rating_array(r, "ratings", model.levels) for r in ratings]
    if not pairs or any(p.size == 0 for p in pairs):
        raise ValueError("every pair needs at least one rating")
    cap = MAX_RATINGS if max_ratings is None else max_ratings
    min_ratings, cap, risk = _check_bounds(min_ratings, cap, risk)
    decided: dict[tuple[tuple[int, ...], int], bool] = {}  # the rule depends on counts only
    used, available, final, full = [], [], [], []
    for values in pairs:
        top = min(cap, int(values.size))
        counts = [0] * model.levels
        k = 0
        for k, rating in enumerate(values[:top].tolist(), start=1):
            counts[rating - 1] += 1
            if k < min_ratings:
                continue
            key = (tuple(counts), top)
            if key not in decided:
                decided[key] = k < top and _change_probability(key[0], top, model) > risk
            if not decided[key]:
                break
        used.append(k)
        available.append(top)
        final.append(vicr.consensus(values[:k].tolist()))
        full.append(vicr.consensus(values[:top].tolist()))
    return VicrReplay(
        used=np.array(used, dtype=np.int64),
        available=np.array(available, dtype=np.int64),
        consensus=np.array(final, dtype=np.int64),
        full_consensus=np.array(full, dtype=np.int64),
    )


#: Pairs with more ratings than this have too many arrival orders to replay them all.
MAX_ORDER_RATINGS = 8


@dataclass(frozen=True)
class VicrExpectation:
    """The replay's totals averaged over every arrival order of each pair's ratings."""

    pairs: int
    ratings_used: float
    ratings_fixed: int
    agreement: float

    @property
    def saving(self) -> float:
        return 1.0 - self.ratings_used / self.ratings_fixed

    def as_dict(self) -> dict[str, float | int]:
        return {
            "pairs": self.pairs,
            "ratings_used": self.ratings_used,
            "ratings_fixed": self.ratings_fixed,
            "saving": self.saving,
            "agreement": self.agreement,
        }


def vicr_replay_all_orders(
    ratings: Iterable[Sequence[int]],
    *,
    min_ratings: int,
    model: RaterModel,
    max_ratings: int | None = None,
    risk: float = 0.05,
) -> VicrExpectation:
    """``vicr_replay`` averaged over every order in which a pair's ratings could arrive.

    Published datasets do not keep the order ratings arrived in (Flickr8k-Expert stores
    them sorted), and the rule's outcome depends on it. With raters arriving in a uniformly
    random order, every distinct arrangement of a pair's ratings is equally likely (each
    stands for the same number of permutations), so the expectation is the plain mean over
    the distinct arrangements: exact, no sampling. Pairs of up to ``MAX_ORDER_RATINGS``.
    """

    pairs = [vicr._as_rating_array(r, "ratings", model.levels).tolist() for r in ratings]
    if any(len(p) > MAX_ORDER_RATINGS for p in pairs):
        raise ValueError(f"pairs of more than {MAX_ORDER_RATINGS} ratings have too many orders")
    orders = [sorted(set(permutations(p))) for p in pairs]
    flat = [list(order) for pair in orders for order in pair]
    weight = np.concatenate([np.full(len(pair), 1.0 / len(pair)) for pair in orders])
    replay = vicr_replay(
        flat, min_ratings=min_ratings, model=model, max_ratings=max_ratings, risk=risk
    )
    same = replay.consensus == replay.full_consensus
    return VicrExpectation(
        pairs=len(pairs),
        ratings_used=float(replay.used @ weight),
        ratings_fixed=int(round(float(replay.available @ weight))),
        agreement=float(same @ weight) / len(pairs),
    )


@dataclass(frozen=True)
class RiskCalibration:
    """``risk``: the largest candidate whose simulated agreement reached the target (None if
    none did); per candidate risk, the simulated ``agreement`` and ``saving``."""

    risk: float | None
    agreement: dict[float, float]
    saving: dict[float, float]


def vicr_calibrate_risk(
    model: RaterModel,
    available: Sequence[int],
    *,
    min_ratings: int,
    agreement: float = 0.95,
    risks: Sequence[float] = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3),
    n_pairs: int = 4000,
    seed: resampling.Seed = 0,
) -> RiskCalibration:
    """Choose the rule's ``risk`` from the model, before any pair is rated.

    The per-pair risk bounds the chance that one stopped pair ends with another consensus;
    a study's target is a share of all pairs (e.g. 95% equal to the full-data consensus),
    and pairs the rule never stops cannot differ. So simulate ``n_pairs`` pairs from
    ``model`` (each with a maximum drawn from ``available``, the study's ratings per pair),
    replay every candidate risk and keep the largest whose share of unchanged consensus is
    at least ``agreement``. Uses nothing but the model: no oracle data.
    """
    target = checks.confidence(agreement, "agreement")
    n_pairs = checks.integer(n_pairs, "n_pairs", 10, 100_000)
    caps = np.array([checks.integer(a, "each of available", 1, MAX_RATINGS) for a in available])
    if caps.size == 0:
        raise ValueError("available names no pair")
    candidates = sorted({checks.confidence(r, "each of risks") for r in risks})
    rng = resampling.as_generator(seed)
    tops = rng.choice(caps, size=n_pairs)
    drawn = model.simulate(n_pairs, int(tops.max()), rng)
    pairs = [row[:top].tolist() for row, top in zip(drawn, tops, strict=True)]
    agreement_by_risk, saving_by_risk = {}, {}
    for risk in candidates:
        replay = vicr_replay(
            pairs, min_ratings=min(min_ratings, int(caps.min())), model=model, risk=risk
        )
        agreement_by_risk[risk] = replay.agreement
        saving_by_risk[risk] = replay.saving
    good = [r for r in candidates if agreement_by_risk[r] >= target]
    return RiskCalibration(
        risk=max(good) if good else None, agreement=agreement_by_risk, saving=saving_by_risk
    )


# --------------------------------------------------------------------------------------
# HUMANr allocation
# --------------------------------------------------------------------------------------


def _values(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if arr.size and (arr.min() < -1 or arr.max() > 1):
        raise ValueError(f"{name} must be comparison values in [-1, 1]")
    return arr


def humanr_half_width(values: ArrayLike, *, confidence: float = 0.95) -> float:
    """Half-width of the HUMANr report's t-interval of these comparison values.

    ``t.ppf((1 + confidence) / 2, n - 1) * sd(ddof=1) / sqrt(n)``, as
    ``rubrics.humanr.report`` computes ``t_interval`` (before clipping to [-1, 1]);
    infinite for fewer than 2 values (no interval yet).
    """
    arr = _values(values, "values")
    conf = checks.confidence(confidence)
    n = arr.size
    if n < 2:
        return math.inf
    from scipy import stats

    return float(stats.t.ppf((1 + conf) / 2, n - 1)) * float(arr.std(ddof=1)) / math.sqrt(n)


def humanr_next_systems(
    values_by_system: Mapping[str, ArrayLike],
    *,
    target_half_width: float,
    confidence: float = 0.95,
    min_values: int = 27,
) -> list[str]:
    """Systems that still need comparisons, widest interval first (ties by name).

    ``values_by_system``: each system's kept comparison values so far (``(s - 5) / 4``,
    attention-check failures already dropped). A system needs more while it has fewer than
    ``min_values`` values or its half-width (``humanr_half_width``) is above
    ``target_half_width``. An empty list means every system has reached the target.
    """
    target = float(target_half_width)
    if isinstance(target_half_width, bool) or not 0 < target < 2:
        raise ValueError(f"target_half_width must be in (0, 2), got {target_half_width!r}")
    min_values = checks.integer(min_values, "min_values", 2, 10**7)
    open_systems = []
    for name, values in values_by_system.items():
        arr = _values(values, f"values of {name!r}")
        width = humanr_half_width(arr, confidence=confidence)
        if arr.size < min_values or width > target:
            open_systems.append((-width, str(name)))
    return [name for _, name in sorted(open_systems)]


def humanr_next_systems_by_worker(
    values_by_system: Mapping[str, Mapping[Hashable, ArrayLike]],
    *,
    target_half_width: float,
    confidence: float = 0.95,
    min_values: int = 27,
    min_workers: int = 5,
) -> list[str]:
    """Systems that still need comparisons when each worker has one vote (issue 29).

    ``values_by_system[system][worker]``: the kept comparison values of one independent
    worker (a linked identity, ``annotation/identities.py``) for that system. A worker's
    vote is the mean of their values, so many ids of one person answering alike count once
    and cannot narrow the interval. A system needs more while it has fewer than
    ``min_values`` values in all, fewer than ``min_workers`` workers, or while the
    t-interval half-width of the votes (``humanr_half_width``) is above the target. Widest
    first (ties by name); an empty list means every system has reached the target.
    """
    target = float(target_half_width)
    if isinstance(target_half_width, bool) or not 0 < target < 2:
        raise ValueError(f"target_half_width must be in (0, 2), got {target_half_width!r}")
    min_values = checks.integer(min_values, "min_values", 2, 10**7)
    min_workers = checks.integer(min_workers, "min_workers", 2, 10**7)
    open_systems = []
    for name, by_worker in values_by_system.items():
        arrays = [_values(v, f"values of {name!r}") for v in by_worker.values()]
        votes = np.array([a.mean() for a in arrays if a.size], dtype=np.float64)
        total = sum(a.size for a in arrays)
        width = humanr_half_width(votes, confidence=confidence) if votes.size else math.inf
        if total < min_values or votes.size < min_workers or width > target:
            open_systems.append((-width, str(name)))
    return [name for _, name in sorted(open_systems)]
