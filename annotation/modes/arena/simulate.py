"""How a simulated worker judges an arena battle (``Mode.simulate``)."""

from __future__ import annotations

import math
from typing import Any

from annotation.models import Assignment
from annotation.modes.arena.protocol import CATCH, CRITERION_NAMES, left_is_a
from annotation.modes.base import SimulatedAnswer
from annotation.modes.simulated import SimulatedWorker, system_quality

#: Quality points per unit of log-odds: a 1-point gap in hidden quality wins ~73% of the
#: decisive battles.
SLOPE = 1.0
#: Battles whose qualities are this close are ties (both good above 3, both bad below).
TIE_GAP = 0.15
#: How often an honest simulated worker misses a gold battle's alteration.
GOLD_LAPSE = 0.02


def _verdict(worker: SimulatedWorker, quality_a: float, quality_b: float) -> str:
    """A system battle's canonical outcome: Bradley-Terry in the quality gap plus noise."""
    gap = quality_a - quality_b + worker.rng.gauss(0, worker.noise)
    if abs(gap) < TIE_GAP:
        return "tie" if (quality_a + quality_b) / 2 >= 3 else "bothbad"
    return "a" if worker.rng.random() < 1 / (1 + math.exp(-SLOPE * gap)) else "b"


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Prefer the caption of the system with the higher hidden quality (Bradley-Terry in
    the quality gap, the worker's noise added); on a gold battle, the real caption over its
    alteration but for a lapse (``GOLD_LAPSE``). Answers in the page's terms."""
    spec = lease.item.spec
    if lease.item.kind == CATCH:
        # A gold battle's alteration is wrong by construction (an object or attribute
        # swapped): an honest worker who reads both captions spots it, bar a lapse. Drawn
        # like a system battle, a mid system's real caption lost one battle in eight, and
        # the gold rule (at most one miss in four) excluded honest simulated workers.
        canonical = "b" if worker.rng.random() < GOLD_LAPSE else "a"
    else:
        quality_a = system_quality(context["systems"].get(spec["caption_a"], ""))
        quality_b = system_quality(context["systems"].get(spec["caption_b"], ""))
        canonical = _verdict(worker, quality_a, quality_b)
    left_a = left_is_a(lease.participant.study, lease)
    outcome = canonical
    if canonical in ("a", "b") and not left_a:
        outcome = "b" if canonical == "a" else "a"
    data: dict[str, Any] = {"outcome": outcome}
    if context["settings"].criteria:
        # Every criterion follows the verdict, as a tired but honest worker's would.
        label = {"a": "a1", "b": "b1"}.get(outcome, "0")
        data.update({criterion: label for criterion in CRITERION_NAMES})
    seconds = max(float(context["settings"].min_seconds), 0.0) + worker.seconds(2, 8)
    return [SimulatedAnswer(0, data, seconds)]
