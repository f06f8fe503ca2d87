"""The latent-class rater model of the VICR stopping rule, and its EM fit."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks, resampling, vicr


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
