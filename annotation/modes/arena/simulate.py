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


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Prefer the caption of the system with the higher hidden quality (Bradley-Terry in
    the quality gap, the worker's noise added); a gold battle's real caption is worth
    the system's quality and its alteration 1 (wrong). Answers in the page's terms."""
    spec = lease.item.spec
    if lease.item.kind == CATCH:
        quality_a = system_quality(context["systems"].get(spec["caption_id"], ""))
        quality_b = 1.0
    else:
        quality_a = system_quality(context["systems"].get(spec["caption_a"], ""))
        quality_b = system_quality(context["systems"].get(spec["caption_b"], ""))
    gap = quality_a - quality_b + worker.rng.gauss(0, worker.noise)
    if abs(gap) < TIE_GAP:
        canonical = "tie" if (quality_a + quality_b) / 2 >= 3 else "bothbad"
    else:
        won_a = worker.rng.random() < 1 / (1 + math.exp(-SLOPE * gap))
        canonical = "a" if won_a else "b"
    left_a = left_is_a(lease.participant.study, lease.pk)
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
