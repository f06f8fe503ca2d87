"""HUMANr's plan: the t-interval per system and the power of a system against the baseline."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from numpy.typing import ArrayLike, NDArray

from rubrics import checks, humanr, resampling
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


def slider_pmf(mean_value: float, sd: float) -> NDArray[np.float64]:
    """Probabilities of the oriented slider answers 1..9 from a rounded normal.

    The latent answer is normal with mean ``5 + 4 * mean_value`` (``mean_value`` on the
    HUMANr scale, -1 to 1) and standard deviation ``sd`` in slider steps; it is rounded to
    the nearest step and what falls beyond 1 or 9 is put on 1 or 9 (the slider's ends).
    """
    if isinstance(mean_value, bool) or not -1 <= float(mean_value) <= 1:
        raise ValueError(f"mean_value must be in [-1, 1], got {mean_value!r}")
    if isinstance(sd, bool) or not 0 < float(sd) <= 20:
        raise ValueError(f"sd must be in (0, 20], got {sd!r}")
    centre = 5 + 4 * float(mean_value)
    edges = np.concatenate(([-np.inf], np.arange(1.5, 9.5, 1.0), [np.inf]))
    from scipy import stats

    return np.diff(stats.norm.cdf(edges, loc=centre, scale=float(sd)))


@dataclass(frozen=True)
class HumanrAssumptions:
    """Per system (``"Human"`` for the Human-vs-Human baseline), the probabilities of the
    oriented slider answers 1..9 (``slider_pmf`` makes them from a mean and a spread).
    Comparisons are independent: no image effect, which makes the paired test's power a
    lower bound."""

    answer_pmfs: Mapping[str, ArrayLike]


def _pmfs(a: HumanrAssumptions) -> dict[str, np.ndarray]:
    out = {}
    for name, pmf in a.answer_pmfs.items():
        p = checks.finite_array(pmf, f"answer_pmfs[{name!r}]")
        if p.shape != (9,) or (p < 0).any() or not np.isclose(p.sum(), 1.0):
            raise ValueError(f"answer_pmfs[{name!r}] must be 9 probabilities summing to 1")
        out[str(name)] = p / p.sum()
    if not out:
        raise ValueError("answer_pmfs names no system")
    return out


def _responses(systems: np.ndarray, images: np.ndarray, answers: np.ndarray, k: int) -> Any:
    """A Responses of oriented answers (human caption on the left), groups of 9 + no check."""
    n = answers.size
    return humanr.Responses(
        worker_ids=np.arange(n) % max(k, 2),
        image_ids=images,
        systems=systems,
        raw=answers,
        human_on_left=np.ones(n, dtype=bool),
        is_attention_check=np.zeros(n, dtype=bool),
        group_ids=np.arange(n) // (humanr.GROUP_SIZE - 1),
    )


def _kept_rows(responses: humanr.Responses) -> np.ndarray:
    """The comparison rows the HUMANr report keeps (its attention-check rule)."""
    _, worker = np.unique(responses.worker_ids, return_inverse=True)
    _, group = np.unique(responses.group_ids, return_inverse=True)
    unit = worker.astype(np.int64) * (group.max() + 1) + group
    failed = np.isin(unit, unit[responses.check_failed()])
    return ~responses.is_attention_check & ~failed & ~responses.dropped  # type: ignore[operator]


def humanr_pilot_images(pilot: humanr.Responses) -> dict[str, int]:
    """Per system, the images with at least one comparison the HUMANr report keeps: how
    much of a pilot ``plan_humanr`` has to resample for that system."""
    kept = _kept_rows(pilot)
    images: dict[str, set[Any]] = {}
    for system, image in zip(
        pilot.systems[kept].tolist(), pilot.image_ids[kept].tolist(), strict=True
    ):
        images.setdefault(str(system), set()).add(image)
    return {name: len(seen) for name, seen in images.items()}


def plan_humanr(
    *,
    n_images: Sequence[int],
    pilot: humanr.Responses | None = None,
    assumptions: HumanrAssumptions | None = None,
    judgments_per_item: Sequence[int] = (1,),
    compare: str | None = None,
    human_system: str = humanr.HUMAN_SYSTEM,
    confidence: float = 0.95,
    target_half_width: float | None = None,
    power_target: float | None = 0.8,
    n_simulations: int = 100,
    n_permutations: int = 1000,
    price_per_judgment: float | None = None,
    seconds_per_judgment: float | None = None,
    seed: int = 0,
) -> Plan:
    """Predict HUMANr's t-interval per system and the power of ``compare`` vs the baseline.

    Give ``pilot`` (its kept comparisons are resampled by image; ``judgments_per_item``
    must then be the pilot's own, 1 by default) or ``assumptions`` (every image gets one
    comparison per system, each judged ``judgments_per_item`` times). Each simulation runs
    ``humanr.report``; a system's half-width is half its ``t_interval``. Power: the share of
    simulations whose ``vs_baseline`` p-value for ``compare`` is below ``1 - confidence``.
    Cost: comparisons x judgments plus one attention check per 9 comparisons (a group).
    """
    if (pilot is None) == (assumptions is None):
        raise ValueError("give exactly one of pilot and assumptions")
    common = common_settings(
        confidence,
        n_simulations,
        target_half_width,
        power_target if compare else None,
        price_per_judgment,
        seconds_per_judgment,
    )
    sizes = grid(n_images, "n_images", 2, MAX_IMAGES)
    repeats = grid(judgments_per_item, "judgments_per_item", 1, 100)
    if len(sizes) * len(repeats) > MAX_POINTS:
        raise ValueError(f"at most {MAX_POINTS} points (n_images x judgments_per_item)")
    check_budget(sizes, repeats, common.n_simulations)
    n_permutations = checks.integer(n_permutations, "n_permutations", 100, 100_000)
    rng = resampling.as_generator(seed)
    if pilot is not None:
        if not isinstance(pilot, humanr.Responses):
            raise ValueError("pilot must be humanr.Responses")
        if repeats != [1]:
            raise ValueError("from a pilot, the judgments per item are the pilot's own")
        draw, systems = _humanr_from_pilot(pilot, rng)
    else:
        assert assumptions is not None
        draw, systems = _humanr_from_assumptions(assumptions, rng)
    if compare is not None and (compare not in systems or human_system not in systems):
        raise ValueError(f"compare must name a system of {systems}, with a {human_system!r}")
    simulate = _HumanrSimulation(common, draw, systems, compare, human_system, n_permutations)
    points = [simulate.point(n, k, rng) for n in sizes for k in repeats]
    return common.plan("humanr", "HUMANr per system", points)


_Draw = Callable[[int, int], humanr.Responses]


def _humanr_from_pilot(
    pilot: humanr.Responses, rng: np.random.Generator
) -> tuple[_Draw, list[str]]:
    """Studies of n images resampled by image from the pilot's kept comparisons."""
    kept = _kept_rows(pilot)
    oriented = np.where(pilot.human_on_left, pilot.raw, 10 - pilot.raw)[kept]
    pilot_systems = pilot.systems[kept]
    _, image = np.unique(pilot.image_ids[kept], return_inverse=True)
    order = np.argsort(image, kind="stable")
    starts = np.searchsorted(image[order], np.arange(image.max() + 1))
    counts = np.bincount(image)

    def draw(n: int, k: int) -> humanr.Responses:
        chosen = rng.integers(0, counts.size, size=n)
        rows = np.concatenate([order[starts[c] : starts[c] + counts[c]] for c in chosen])
        images = np.repeat(np.arange(n), counts[chosen])
        return _responses(pilot_systems[rows], images, oriented[rows], k)

    return draw, sorted(set(pilot_systems.tolist()))


def _humanr_from_assumptions(
    assumptions: HumanrAssumptions, rng: np.random.Generator
) -> tuple[_Draw, list[str]]:
    """Studies of n images, one comparison per system each, judged k times."""
    pmfs = _pmfs(assumptions)
    systems = sorted(pmfs)

    def draw(n: int, k: int) -> humanr.Responses:
        names = np.repeat(np.array(systems), k)
        answers = np.concatenate(
            [rng.choice(np.arange(1, 10), size=(n, k), p=pmfs[s]) for s in systems], axis=1
        )
        return _responses(
            np.tile(names, n), np.repeat(np.arange(n), names.size), answers.ravel(), k
        )

    return draw, systems


@dataclass(frozen=True)
class _HumanrSimulation:
    """The simulated HUMANr studies of one plan, run through ``humanr.report``."""

    common: Common
    draw: _Draw
    systems: list[str]
    compare: str | None
    human_system: str
    n_permutations: int

    def point(self, n: int, k: int, rng: np.random.Generator) -> PlanPoint:
        common = self.common
        widths: dict[str, list[float]] = {s: [] for s in self.systems}
        separated: list[bool] | None = [] if self.compare else None
        comparisons = 0
        for _ in range(common.n_simulations):
            study = self.draw(n, k)
            comparisons += len(study)
            entries = self._entries(study, rng)
            for name, entry in entries.items():
                if entry["t_interval"] is not None:
                    low, high = entry["t_interval"]
                    widths[name].append((high - low) / 2)
            if separated is not None and self.compare is not None:
                test = entries[self.compare]["vs_baseline"]
                p = None if test is None else test["p_value"]
                separated.append(p is not None and p < 1 - common.confidence)
        mean_comparisons = comparisons / common.n_simulations
        groups = math.ceil(mean_comparisons / (humanr.GROUP_SIZE - 1))
        judgments = int(round(mean_comparisons)) + groups  # one check per group
        return point(common, n, k, widths, separated, judgments)

    def _entries(self, study: humanr.Responses, rng: np.random.Generator) -> dict[str, Any]:
        """The report's entry per system, the baseline's under the human system's name."""
        result = humanr.report(
            study,
            human_system=self.human_system,
            confidence=self.common.confidence,
            n_bootstrap=100,
            n_splits=1,
            image_counts=[],
            n_permutations=self.n_permutations if self.compare else 100,
            seed=rng,
        )
        entries = dict(result["systems"])
        if result["baseline"] is not None:
            entries[self.human_system] = result["baseline"]
        return entries
