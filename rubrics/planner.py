"""Sample-size planner: predict a study's interval widths, power and cost by simulation.

Issue 15 ("plan and stop"). Before a study opens, a researcher chooses how many images and
how many judgments per item to pay for. The planner simulates studies of each candidate
size and runs every simulated study through the mode's OWN report code, so the predicted
width is the width the real report will print:

* THumB: ``rubrics.thumb.report``'s paired bootstrap interval of Total, per system; power:
  the paired bootstrap interval of the difference of two named systems excludes 0;
* HUMANr: ``rubrics.humanr.report``'s t-interval of HUMANr, per system (and the
  Human-vs-Human baseline); power: the report's test of a named system against the
  baseline (``vs_baseline``, the paired sign-flip test) rejects at ``1 - confidence``;
* VICR: the virtual-rater agreement of ``rubrics.vicr.virtual_raters`` (Fleiss' kappa and
  Kendall's W, x100). The VICR report prints no interval for them, so the planner predicts
  the interval a study of that size would fall in: half the central ``confidence`` range of
  the statistic over the simulated studies. No power (there are no systems to separate).

Where the simulated studies come from, per mode:

* a pilot: THumB and HUMANr resample the pilot's images with replacement (an image keeps
  all its captions or comparisons, so the pairing between systems is kept); VICR fits a
  ``rubrics.adaptive.RaterModel`` to the pilot's ratings and draws from it (a pilot pair has
  too few ratings to resample more of them);
* stated assumptions: ``ThumbAssumptions`` (per-system mean score, an image effect shared
  by the systems, a caption's noise), ``HumanrAssumptions`` (per-system distribution of
  slider answers, ``slider_pmf``), or a ``RaterModel`` for VICR (``RaterModel.symmetric``:
  how often a rater gives the true level or a neighbour).

Every point of the curve holds the mean predicted half-width of each headline number, the
power and the cost (``study_cost``: judgments, money at a price per judgment, crowd hours
at a median time per judgment). ``Plan.recommended`` is the cheapest point whose every
half-width is at or below the target and whose power reaches ``power_target`` (None when
no point of the grid does). Work is bounded: at most ``MAX_SIMULATIONS`` simulations per
point, ``MAX_POINTS`` points, and ``MAX_SIMULATED_JUDGMENTS`` simulated judgments in all
(``check_budget``): the cost grows with sizes x judgments x simulations, and the largest
request the page accepted before that bound (8 sizes of 5,000 images, 20 judgments, 100
simulations) took minutes of CPU per request and, twice at once, killed the web workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from rubrics import adaptive, checks, humanr, resampling, thumb, vicr

__all__ = [
    "MAX_POINTS",
    "MAX_SIMULATED_JUDGMENTS",
    "MAX_SIMULATIONS",
    "Cost",
    "HumanrAssumptions",
    "Plan",
    "PlanPoint",
    "ThumbAssumptions",
    "check_budget",
    "plan_humanr",
    "plan_thumb",
    "plan_vicr",
    "slider_pmf",
    "study_cost",
]

MAX_SIMULATIONS = 500
MAX_POINTS = 50
_MAX_IMAGES = 100_000
#: Simulated work one plan may do in all: sum over its points of images (pairs) x
#: (judgments per item + ``IMAGE_OVERHEAD``) x simulations. HUMANr is the dearest mode (a
#: report with a bootstrap and a permutation test over images per simulation, two systems):
#: measured, about 2 us of CPU per unit, an image costing about as much as three judgments
#: whatever their number. So the bound keeps the dearest accepted plan near 4 s of CPU on
#: one core (tests/annotation/test_integrity2_humanr.py measures it at the form's bounds).
#: It still allows, say, 4 sizes of 5,000 images x 1 judgment x 25 simulations, or the
#: default 4 sizes (370 images) x 20 judgments x 100 simulations.
MAX_SIMULATED_JUDGMENTS = 2_000_000
IMAGE_OVERHEAD = 3


# --------------------------------------------------------------------------------------
# Cost and the plan
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What a study of one size costs: judgments, money and crowd time (None if unknown)."""

    judgments: int
    money: float | None = None
    crowd_hours: float | None = None


def _optional_positive(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)


def study_cost(
    judgments: int,
    *,
    price_per_judgment: float | None = None,
    seconds_per_judgment: float | None = None,
) -> Cost:
    """Money = judgments x price; crowd hours = judgments x median seconds / 3600."""
    judgments = checks.integer(judgments, "judgments", 0)
    price = _optional_positive(price_per_judgment, "price_per_judgment")
    seconds = _optional_positive(seconds_per_judgment, "seconds_per_judgment")
    return Cost(
        judgments=judgments,
        money=None if price is None else judgments * price,
        crowd_hours=None if seconds is None else judgments * seconds / 3600,
    )


@dataclass(frozen=True)
class PlanPoint:
    """One study size: predicted mean half-width per headline number, power, cost.

    ``undefined``: simulations whose statistic was undefined (left out of the means).
    """

    n_images: int
    judgments_per_item: int
    half_width: dict[str, float]
    power: float | None
    cost: Cost
    undefined: int = 0

    def meets(self, target: float | None, power_target: float | None) -> bool:
        widths_ok = target is None or all(w <= target for w in self.half_width.values())
        power_ok = power_target is None or self.power is None or self.power >= power_target
        return widths_ok and power_ok and bool(self.half_width)


@dataclass(frozen=True)
class Plan:
    """The planner's curve for one mode, and the cheapest size that meets the targets."""

    mode: str
    headline: str
    confidence: float
    target_half_width: float | None
    power_target: float | None
    n_simulations: int
    points: tuple[PlanPoint, ...]
    recommended: PlanPoint | None = field(init=False)

    def __post_init__(self) -> None:
        ok = [p for p in self.points if p.meets(self.target_half_width, self.power_target)]
        best = min(ok, key=lambda p: (p.cost.judgments, p.n_images)) if ok else None
        object.__setattr__(self, "recommended", best)

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable (for the planner page and API)."""

        def point(p: PlanPoint) -> dict[str, Any]:
            return {
                "n_images": p.n_images,
                "judgments_per_item": p.judgments_per_item,
                "half_width": dict(p.half_width),
                "power": p.power,
                "judgments": p.cost.judgments,
                "money": p.cost.money,
                "crowd_hours": p.cost.crowd_hours,
                "undefined": p.undefined,
            }

        return {
            "mode": self.mode,
            "headline": self.headline,
            "confidence": self.confidence,
            "target_half_width": self.target_half_width,
            "power_target": self.power_target,
            "n_simulations": self.n_simulations,
            "points": [point(p) for p in self.points],
            "recommended": None if self.recommended is None else point(self.recommended),
        }


def check_budget(
    sizes: Sequence[int], judgments: Sequence[int], n_simulations: int, *, weight: float = 1.0
) -> None:
    """Refuse a plan that would draw more than ``MAX_SIMULATED_JUDGMENTS`` (ValueError).

    ``weight``: the CPU of the mode's unit relative to HUMANr's, which the planner's form
    (the page and the API) passes from ``Planner.budget_weight``: THumB's simulations run
    the report's paired bootstrap of 1,000 resamples, measured at 16-60 us a unit against
    HUMANr's 1.5-7.5. The message says what to lower, so the page can show it as it is.
    """
    total = sum(sizes) * sum(k + IMAGE_OVERHEAD for k in judgments) * n_simulations
    total = int(total * weight)
    if total > MAX_SIMULATED_JUDGMENTS:
        raise ValueError(
            f"This plan is too large to compute here: {total:,} units of work (sizes x "
            f"(judgments per item + {IMAGE_OVERHEAD}) x simulations), at most "
            f"{MAX_SIMULATED_JUDGMENTS:,}. Give fewer or smaller sizes, fewer judgments per "
            "item or fewer simulations."
        )


def _grid(values: Sequence[int], name: str, low: int, high: int) -> list[int]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty list of integers")
    return sorted({checks.integer(v, f"each of {name}", low, high) for v in values})


@dataclass(frozen=True)
class _Common:
    confidence: float
    n_simulations: int
    target: float | None
    power_target: float | None
    price: float | None
    seconds: float | None


def _common(
    confidence: float,
    n_simulations: int,
    target_half_width: float | None,
    power_target: float | None,
    price_per_judgment: float | None,
    seconds_per_judgment: float | None,
) -> _Common:
    target = _optional_positive(target_half_width, "target_half_width")
    return _Common(
        confidence=checks.confidence(confidence),
        n_simulations=checks.integer(n_simulations, "n_simulations", 2, MAX_SIMULATIONS),
        target=target,
        power_target=None if power_target is None else checks.confidence(power_target),
        price=_optional_positive(price_per_judgment, "price_per_judgment"),
        seconds=_optional_positive(seconds_per_judgment, "seconds_per_judgment"),
    )


def _point(
    common: _Common,
    n: int,
    k: int,
    widths: dict[str, list[float]],
    separated: list[bool] | None,
    judgments: int,
    undefined: int = 0,
) -> PlanPoint:
    return PlanPoint(
        n_images=n,
        judgments_per_item=k,
        half_width={name: float(np.mean(w)) for name, w in widths.items() if w},
        power=None if separated is None else float(np.mean(separated)),
        cost=study_cost(
            judgments,
            price_per_judgment=common.price,
            seconds_per_judgment=common.seconds,
        ),
        undefined=undefined,
    )


# --------------------------------------------------------------------------------------
# THumB
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThumbAssumptions:
    """Stated assumptions for a THumB study.

    ``means``: per system, the mean precision and recall on the 1-5 scale before rounding
    (a caption's P and R are ``round(mean + image effect + noise)`` clipped to 1-5, so
    Total = (P + R) / 2 without penalties); ``image_sd``: sd of an image effect shared by
    every system's caption of the image (what makes the systems' scores paired);
    ``caption_sd``: sd of one score around it.
    """

    means: Mapping[str, float]
    image_sd: float = 0.5
    caption_sd: float = 0.7

    @classmethod
    def two_systems(
        cls,
        mean: float,
        smallest_difference: float,
        *,
        image_sd: float = 0.5,
        caption_sd: float = 0.7,
    ) -> ThumbAssumptions:
        """Systems "A" (``mean``) and "B" (``mean - smallest_difference``)."""
        return cls(
            means={"A": mean, "B": mean - smallest_difference},
            image_sd=image_sd,
            caption_sd=caption_sd,
        )


def _thumb_from_pilot(pilot: thumb.CaptionJudgments) -> Callable[..., thumb.CaptionJudgments]:
    _, image = np.unique(pilot.image_ids, return_inverse=True)
    order = np.argsort(image, kind="stable")
    starts = np.searchsorted(image[order], np.arange(image.max() + 1))
    sizes = np.bincount(image)

    def draw(n: int, rng: np.random.Generator) -> thumb.CaptionJudgments:
        chosen = rng.integers(0, sizes.size, size=n)
        rows = np.concatenate([order[starts[c] : starts[c] + sizes[c]] for c in chosen])
        return thumb.CaptionJudgments(
            image_ids=np.repeat(np.arange(n), sizes[chosen]),
            systems=pilot.systems[rows],
            precision=pilot.precision[rows],
            recall=pilot.recall[rows],
            fluency=pilot.fluency[rows],  # type: ignore[index]
            conciseness=pilot.conciseness[rows],  # type: ignore[index]
            inclusive=pilot.inclusive[rows],  # type: ignore[index]
        )

    return draw


def _thumb_from_assumptions(a: ThumbAssumptions) -> Callable[..., thumb.CaptionJudgments]:
    names = [str(s) for s in a.means]
    means = np.array([float(a.means[s]) for s in a.means])
    if not names or not np.all(np.isfinite(means)):
        raise ValueError("assumptions.means must give a finite mean per system")
    image_sd = _optional_positive(a.image_sd, "image_sd") or 0.0
    caption_sd = _optional_positive(a.caption_sd, "caption_sd") or 0.0

    def draw(n: int, rng: np.random.Generator) -> thumb.CaptionJudgments:
        base = means[None, :] + image_sd * rng.standard_normal((n, 1))

        def score() -> np.ndarray:
            noisy = base + caption_sd * rng.standard_normal(base.shape)
            return np.clip(np.rint(noisy), 1, 5).ravel()

        return thumb.CaptionJudgments(
            image_ids=np.repeat(np.arange(n), len(names)),
            systems=np.tile(names, n),
            precision=score(),
            recall=score(),
        )

    return draw


def plan_thumb(
    *,
    n_images: Sequence[int],
    pilot: thumb.CaptionJudgments | None = None,
    assumptions: ThumbAssumptions | None = None,
    compare: tuple[str, str] | None = None,
    smallest_difference: float | None = None,
    confidence: float = 0.90,
    target_half_width: float | None = None,
    power_target: float | None = 0.8,
    n_simulations: int = 100,
    n_resamples: int = 1000,
    judgments_per_caption: int = 2,
    price_per_judgment: float | None = None,
    seconds_per_judgment: float | None = None,
    seed: int = 0,
) -> Plan:
    """Predict THumB's Total interval per system and the power to separate ``compare``.

    Give ``pilot`` (final judgments of a pilot) or ``assumptions``. Each simulation draws a
    study of n images and runs ``thumb.report`` (``n_resamples`` paired bootstrap
    resamples at ``confidence``, the report's default 0.90); a system's half-width is half
    its Total interval. Power: the share of simulations in which the paired bootstrap
    interval of the per-image difference ``Total(a) - Total(b)`` excludes 0; with
    ``smallest_difference`` (pilot only) the pilot's differences are shifted so that their
    mean is that difference. Cost: n images x systems x ``judgments_per_caption`` (THumB's
    stage 1 and stage 2: 2).
    """
    if (pilot is None) == (assumptions is None):
        raise ValueError("give exactly one of pilot and assumptions")
    common = _common(
        confidence,
        n_simulations,
        target_half_width,
        power_target if compare else None,
        price_per_judgment,
        seconds_per_judgment,
    )
    sizes = _grid(n_images, "n_images", 2, _MAX_IMAGES)[:MAX_POINTS]
    n_resamples = checks.integer(n_resamples, "n_resamples", 10, 10_000)
    per_caption = checks.integer(judgments_per_caption, "judgments_per_caption", 1, 100)
    check_budget(sizes, [per_caption], common.n_simulations)
    shift = 0.0
    if pilot is not None:
        if not isinstance(pilot, thumb.CaptionJudgments):
            raise ValueError("pilot must be CaptionJudgments")
        draw = _thumb_from_pilot(pilot)
        systems = sorted(set(pilot.systems.tolist()))
    else:
        assert assumptions is not None
        draw = _thumb_from_assumptions(assumptions)
        systems = sorted(str(s) for s in assumptions.means)
    if compare is not None:
        if len(compare) != 2 or not set(compare) <= set(systems) or compare[0] == compare[1]:
            raise ValueError(f"compare must name two different systems of {systems}")
        if smallest_difference is not None:
            if pilot is None:
                raise ValueError("with assumptions, state the difference in assumptions.means")
            totals = _paired_totals(pilot, compare)
            shift = float(smallest_difference) - float(totals.mean())
    rng = resampling.as_generator(seed)
    points = []
    for n in sizes:
        widths: dict[str, list[float]] = {s: [] for s in systems}
        separated: list[bool] | None = [] if compare else None
        for _ in range(common.n_simulations):
            study = draw(n, rng)
            result = thumb.report(
                study, n_resamples=n_resamples, confidence=common.confidence, seed=rng
            )
            for name, entry in result["per_system"].items():
                low, high = entry["total"]["ci_low"], entry["total"]["ci_high"]
                if low is not None and high is not None:
                    widths[name].append((high - low) / 2)
            if separated is not None and compare is not None:
                d = _paired_totals(study, compare) + shift
                if d.size:
                    boot = resampling.paired_bootstrap_means(
                        d[:, None], n_resamples, common.confidence, rng
                    )
                    separated.append(bool(boot.low[0] > 0 or boot.high[0] < 0))
        # The point's judgments per item are the ones its cost counts (issue 27: it showed 1
        # while the cost counted THumB's 2 per caption).
        points.append(
            _point(common, n, per_caption, widths, separated, n * len(systems) * per_caption)
        )
    return Plan(
        mode="thumb",
        headline="Total per system",
        confidence=common.confidence,
        target_half_width=common.target,
        power_target=common.power_target,
        n_simulations=common.n_simulations,
        points=tuple(points),
    )


def _paired_totals(judgments: thumb.CaptionJudgments, pair: tuple[str, str]) -> np.ndarray:
    """Per image with both systems: Total(a) - Total(b)."""
    totals = judgments.totals
    by_image = []
    for name in pair:
        rows = judgments.systems == name
        by_image.append(dict(zip(judgments.image_ids[rows].tolist(), totals[rows], strict=True)))
    common = sorted(set(by_image[0]) & set(by_image[1]))
    return np.array([by_image[0][i] - by_image[1][i] for i in common], dtype=np.float64)


# --------------------------------------------------------------------------------------
# HUMANr
# --------------------------------------------------------------------------------------


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
    common = _common(
        confidence,
        n_simulations,
        target_half_width,
        power_target if compare else None,
        price_per_judgment,
        seconds_per_judgment,
    )
    sizes = _grid(n_images, "n_images", 2, _MAX_IMAGES)
    repeats = _grid(judgments_per_item, "judgments_per_item", 1, 100)
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
        kept = _kept_rows(pilot)
        oriented = np.where(pilot.human_on_left, pilot.raw, 10 - pilot.raw)[kept]
        pilot_systems = pilot.systems[kept]
        _, image = np.unique(pilot.image_ids[kept], return_inverse=True)
        order = np.argsort(image, kind="stable")
        starts = np.searchsorted(image[order], np.arange(image.max() + 1))
        counts = np.bincount(image)
        systems = sorted(set(pilot_systems.tolist()))

        def draw(n: int, k: int) -> humanr.Responses:
            chosen = rng.integers(0, counts.size, size=n)
            rows = np.concatenate([order[starts[c] : starts[c] + counts[c]] for c in chosen])
            images = np.repeat(np.arange(n), counts[chosen])
            return _responses(pilot_systems[rows], images, oriented[rows], k)

    else:
        assert assumptions is not None
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

    if compare is not None and (compare not in systems or human_system not in systems):
        raise ValueError(f"compare must name a system of {systems}, with a {human_system!r}")
    points = []
    for n in sizes:
        for k in repeats:
            widths: dict[str, list[float]] = {s: [] for s in systems}
            separated: list[bool] | None = [] if compare else None
            comparisons = 0
            for _ in range(common.n_simulations):
                study = draw(n, k)
                comparisons += len(study)
                result = humanr.report(
                    study,
                    human_system=human_system,
                    confidence=common.confidence,
                    n_bootstrap=100,
                    n_splits=1,
                    image_counts=[],
                    n_permutations=n_permutations if compare else 100,
                    seed=rng,
                )
                entries = dict(result["systems"])
                if result["baseline"] is not None:
                    entries[human_system] = result["baseline"]
                for name, entry in entries.items():
                    if entry["t_interval"] is not None:
                        low, high = entry["t_interval"]
                        widths[name].append((high - low) / 2)
                if separated is not None and compare is not None:
                    test = entries[compare]["vs_baseline"]
                    p = None if test is None else test["p_value"]
                    separated.append(p is not None and p < 1 - common.confidence)
            mean_comparisons = comparisons / common.n_simulations
            groups = math.ceil(mean_comparisons / (humanr.GROUP_SIZE - 1))
            judgments = int(round(mean_comparisons)) + groups  # one check per group
            points.append(_point(common, n, k, widths, separated, judgments))
    return Plan(
        mode="humanr",
        headline="HUMANr per system",
        confidence=common.confidence,
        target_half_width=common.target,
        power_target=common.power_target,
        n_simulations=common.n_simulations,
        points=tuple(points),
    )


# --------------------------------------------------------------------------------------
# VICR
# --------------------------------------------------------------------------------------

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
    common = _common(
        confidence, n_simulations, target_half_width, None, price_per_judgment, seconds_per_judgment
    )
    if pilot is not None:
        model = adaptive.fit_rater_model(pilot, levels=levels)
    assert model is not None
    sizes = _grid(n_pairs, "n_pairs", 2, _MAX_IMAGES)
    repeats = _grid(ratings_per_pair, "ratings_per_pair", 3, 100)
    if len(sizes) * len(repeats) > MAX_POINTS:
        raise ValueError(f"at most {MAX_POINTS} points (n_pairs x ratings_per_pair)")
    check_budget(sizes, repeats, common.n_simulations)
    repetitions = checks.integer(repetitions, "repetitions", 1, 1000)
    rng = resampling.as_generator(seed)
    low_q, high_q = resampling.percentile_levels(common.confidence)
    points = []
    for n in sizes:
        for k in repeats:
            values: dict[str, list[float]] = {key: [] for key in VICR_HEADLINES}
            undefined = 0
            for _ in range(common.n_simulations):
                ratings = model.simulate(n, k, rng)
                try:
                    result = vicr.virtual_raters(
                        ratings,
                        repetitions=repetitions,
                        seed=int(rng.integers(2**31)),
                        collapse_top=collapse_top,
                        levels=model.levels,
                    )
                except ValueError:  # e.g. every rating equal: the statistic is undefined
                    undefined += 1
                    continue
                for key in VICR_HEADLINES:
                    values[key].append(result[key]["mean"])
            widths = {}
            for key, v in values.items():
                if len(v) >= 2:
                    low, high = np.percentile(v, [low_q, high_q])
                    widths[key] = [float(high - low) / 2]
            points.append(_point(common, n, k, widths, None, n * k, undefined))
    return Plan(
        mode="vicr",
        headline="virtual-rater agreement (x100)",
        confidence=common.confidence,
        target_half_width=common.target,
        power_target=None,
        n_simulations=common.n_simulations,
        points=tuple(points),
    )
