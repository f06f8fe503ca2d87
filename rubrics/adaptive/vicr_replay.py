"""The VICR rule replayed on known ratings, and the risk that meets a study's target."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import permutations

import numpy as np
from numpy.typing import NDArray

from rubrics import checks, resampling, vicr
from rubrics.adaptive.rater_model import RaterModel
from rubrics.adaptive.vicr_stopping import MAX_RATINGS, change_probability, check_bounds


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
    min_ratings, cap, risk = check_bounds(min_ratings, cap, risk)
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
                decided[key] = k < top and change_probability(key[0], top, model) > risk
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
