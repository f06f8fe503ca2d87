"""THumB's plan: the Total interval per system and the power to separate two systems."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rubrics import checks, resampling, thumb
from rubrics.planner.plans import (
    MAX_IMAGES,
    MAX_POINTS,
    Common,
    Plan,
    PlanPoint,
    check_budget,
    common_settings,
    grid,
    optional_positive,
    point,
)


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
    image_sd = optional_positive(a.image_sd, "image_sd") or 0.0
    caption_sd = optional_positive(a.caption_sd, "caption_sd") or 0.0

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
    common = common_settings(
        confidence,
        n_simulations,
        target_half_width,
        power_target if compare else None,
        price_per_judgment,
        seconds_per_judgment,
    )
    sizes = grid(n_images, "n_images", 2, MAX_IMAGES)[:MAX_POINTS]
    n_resamples = checks.integer(n_resamples, "n_resamples", 10, 10_000)
    per_caption = checks.integer(judgments_per_caption, "judgments_per_caption", 1, 100)
    check_budget(sizes, [per_caption], common.n_simulations)
    draw, systems = _thumb_source(pilot, assumptions)
    shift = _thumb_shift(pilot, systems, compare, smallest_difference)
    rng = resampling.as_generator(seed)
    simulate = _ThumbSimulation(common, draw, systems, compare, shift, n_resamples)
    points = [simulate.point(n, per_caption, rng) for n in sizes]
    return common.plan("thumb", "Total per system", points)


def _thumb_source(
    pilot: thumb.CaptionJudgments | None, assumptions: ThumbAssumptions | None
) -> tuple[Callable[..., thumb.CaptionJudgments], list[str]]:
    """How ``plan_thumb`` draws a study of n images, and the systems it holds."""
    if pilot is not None:
        if not isinstance(pilot, thumb.CaptionJudgments):
            raise ValueError("pilot must be CaptionJudgments")
        return _thumb_from_pilot(pilot), sorted(set(pilot.systems.tolist()))
    assert assumptions is not None
    return _thumb_from_assumptions(assumptions), sorted(str(s) for s in assumptions.means)


def _thumb_shift(
    pilot: thumb.CaptionJudgments | None,
    systems: list[str],
    compare: tuple[str, str] | None,
    smallest_difference: float | None,
) -> float:
    """What moves the pilot's mean difference of ``compare`` to ``smallest_difference``."""
    if compare is None:
        return 0.0
    if len(compare) != 2 or not set(compare) <= set(systems) or compare[0] == compare[1]:
        raise ValueError(f"compare must name two different systems of {systems}")
    if smallest_difference is None:
        return 0.0
    if pilot is None:
        raise ValueError("with assumptions, state the difference in assumptions.means")
    totals = _paired_totals(pilot, compare)
    return float(smallest_difference) - float(totals.mean())


@dataclass(frozen=True)
class _ThumbSimulation:
    """The simulated THumB studies of one plan, run through ``thumb.report``."""

    common: Common
    draw: Callable[..., thumb.CaptionJudgments]
    systems: list[str]
    compare: tuple[str, str] | None
    shift: float
    n_resamples: int

    def point(self, n: int, per_caption: int, rng: np.random.Generator) -> PlanPoint:
        common = self.common
        widths: dict[str, list[float]] = {s: [] for s in self.systems}
        separated: list[bool] | None = [] if self.compare else None
        for _ in range(common.n_simulations):
            study = self.draw(n, rng)
            result = thumb.report(
                study, n_resamples=self.n_resamples, confidence=common.confidence, seed=rng
            )
            for row in result.rows:
                low, high = row.total.ci_low, row.total.ci_high
                if low is not None and high is not None:
                    widths[row.name].append((high - low) / 2)
            if separated is not None and self.compare is not None:
                d = _paired_totals(study, self.compare) + self.shift
                if d.size:
                    boot = resampling.paired_bootstrap_means(
                        d[:, None], self.n_resamples, common.confidence, rng
                    )
                    separated.append(bool(boot.low[0] > 0 or boot.high[0] < 0))
        # The point's judgments per item are the ones its cost counts (issue 27: it showed 1
        # while the cost counted THumB's 2 per caption).
        judgments = n * len(self.systems) * per_caption
        return point(common, n, per_caption, widths, separated, judgments)


def _paired_totals(judgments: thumb.CaptionJudgments, pair: tuple[str, str]) -> np.ndarray:
    """Per image with both systems: Total(a) - Total(b)."""
    totals = judgments.totals
    by_image = []
    for name in pair:
        rows = judgments.systems == name
        by_image.append(dict(zip(judgments.image_ids[rows].tolist(), totals[rows], strict=True)))
    common = sorted(set(by_image[0]) & set(by_image[1]))
    return np.array([by_image[0][i] - by_image[1][i] for i in common], dtype=np.float64)
