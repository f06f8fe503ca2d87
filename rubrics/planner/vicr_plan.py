"""VICR's plan: the spread of the virtual-rater agreement for each study size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rubrics import adaptive, checks, resampling, vicr
from rubrics.planner.plans import (
    MAX_IMAGES,
    MAX_POINTS,
    Common,
    Plan,
    PlanPoint,
    check_budget,
    common_settings,
    grid,
    point,
)

VICR_HEADLINES = ("fleiss_kappa", "kendall_w")


def plan_vicr(
    *,
    n_pairs: Sequence[int],
    ratings_per_pair: Sequence[int] = (3,),
    pilot: Sequence[Sequence[int]] | None = None,
    model: adaptive.RaterModel | None = None,
    levels: int = 5,
    collapse_top: bool = False,
    confidence: float = 0.95,
    target_half_width: float | None = None,
    n_simulations: int = 100,
    repetitions: int = 20,
    price_per_judgment: float | None = None,
    seconds_per_judgment: float | None = None,
    seed: int = 0,
) -> Plan:
    """Predict the spread of VICR's virtual-rater agreement (x100) for each study size.

    Give ``pilot`` (ratings, one sequence per pair; a ``RaterModel`` is fitted to it) or
    ``model`` (e.g. ``RaterModel.symmetric``). Each simulation draws n pairs with k ratings
    each from the model and runs ``vicr.virtual_raters`` (``repetitions`` draws); the
    half-width of a statistic is half the central ``confidence`` range of its value over
    the simulations (in the statistic's x100 units). Cost: n x k ratings.
    """
    if (pilot is None) == (model is None):
        raise ValueError("give exactly one of pilot and model")
    common = common_settings(
        confidence, n_simulations, target_half_width, None, price_per_judgment, seconds_per_judgment
    )
    if pilot is not None:
        model = adaptive.fit_rater_model(pilot, levels=levels)
    assert model is not None
    sizes = grid(n_pairs, "n_pairs", 2, MAX_IMAGES)
    repeats = grid(ratings_per_pair, "ratings_per_pair", 3, 100)
    if len(sizes) * len(repeats) > MAX_POINTS:
        raise ValueError(f"at most {MAX_POINTS} points (n_pairs x ratings_per_pair)")
    check_budget(sizes, repeats, common.n_simulations)
    repetitions = checks.integer(repetitions, "repetitions", 1, 1000)
    rng = resampling.as_generator(seed)
    simulate = _VicrSimulation(common, model, repetitions, collapse_top)
    points = [simulate.point(n, k, rng) for n in sizes for k in repeats]
    return common.plan("vicr", "virtual-rater agreement (x100)", points)


@dataclass(frozen=True)
class _VicrSimulation:
    """The simulated VICR studies of one plan, run through ``vicr.virtual_raters``."""

    common: Common
    model: adaptive.RaterModel
    repetitions: int
    collapse_top: bool

    def point(self, n: int, k: int, rng: np.random.Generator) -> PlanPoint:
        values: dict[str, list[float]] = {key: [] for key in VICR_HEADLINES}
        undefined = 0
        for _ in range(self.common.n_simulations):
            ratings = self.model.simulate(n, k, rng)
            try:
                result = vicr.virtual_raters(
                    ratings,
                    repetitions=self.repetitions,
                    seed=int(rng.integers(2**31)),
                    collapse_top=self.collapse_top,
                    levels=self.model.levels,
                )
            except ValueError:  # e.g. every rating equal: the statistic is undefined
                undefined += 1
                continue
            for key in VICR_HEADLINES:
                values[key].append(result[key]["mean"])
        low_q, high_q = resampling.percentile_levels(self.common.confidence)
        widths = {}
        for key, v in values.items():
            if len(v) >= 2:
                low, high = np.percentile(v, [low_q, high_q])
                widths[key] = [float(high - low) / 2]
        return point(self.common, n, k, widths, None, n * k, undefined)
