"""What every plan shares: its bounds, the cost of a study, a point of the curve, the plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubrics import checks

MAX_SIMULATIONS = 500
MAX_POINTS = 50
MAX_IMAGES = 100_000
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


@dataclass(frozen=True)
class Cost:
    """What a study of one size costs: judgments, money and crowd time (None if unknown)."""

    judgments: int
    money: float | None = None
    crowd_hours: float | None = None


def optional_positive(value: float | None, name: str) -> float | None:
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
    price = optional_positive(price_per_judgment, "price_per_judgment")
    seconds = optional_positive(seconds_per_judgment, "seconds_per_judgment")
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

        def entry(p: PlanPoint) -> dict[str, Any]:
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
            "points": [entry(p) for p in self.points],
            "recommended": None if self.recommended is None else entry(self.recommended),
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


def grid(values: Sequence[int], name: str, low: int, high: int) -> list[int]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty list of integers")
    return sorted({checks.integer(v, f"each of {name}", low, high) for v in values})


@dataclass(frozen=True)
class Common:
    """The checked settings every mode's plan shares."""

    confidence: float
    n_simulations: int
    target: float | None
    power_target: float | None
    price: float | None
    seconds: float | None

    def plan(self, mode: str, headline: str, points: Sequence[PlanPoint]) -> Plan:
        return Plan(
            mode=mode,
            headline=headline,
            confidence=self.confidence,
            target_half_width=self.target,
            power_target=self.power_target,
            n_simulations=self.n_simulations,
            points=tuple(points),
        )


def common_settings(
    confidence: float,
    n_simulations: int,
    target_half_width: float | None,
    power_target: float | None,
    price_per_judgment: float | None,
    seconds_per_judgment: float | None,
) -> Common:
    target = optional_positive(target_half_width, "target_half_width")
    return Common(
        confidence=checks.confidence(confidence),
        n_simulations=checks.integer(n_simulations, "n_simulations", 2, MAX_SIMULATIONS),
        target=target,
        power_target=None if power_target is None else checks.confidence(power_target),
        price=optional_positive(price_per_judgment, "price_per_judgment"),
        seconds=optional_positive(seconds_per_judgment, "seconds_per_judgment"),
    )


def point(
    common: Common,
    n: int,
    k: int,
    widths: dict[str, list[float]],
    separated: list[bool] | None,
    judgments: int,
    undefined: int = 0,
) -> PlanPoint:
    """A point of the curve from the half-widths and separations of its simulations."""
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
