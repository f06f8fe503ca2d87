"""How a simulated worker answers a VICR pair (``Mode.simulate``)."""

from __future__ import annotations

from typing import Any

from annotation.models import Assignment
from annotation.modes.base import SimulatedAnswer
from annotation.modes.simulated import SimulatedWorker, system_quality
from annotation.modes.vicr.captions import TRUTH


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Rate the pair: near the expert truth on tutorial and probation pairs (the imported
    truth), near the system's hidden quality in the game, on the study's scale."""
    caption_id = lease.item.spec.get("caption_id")
    truth = context["specs"].get(caption_id, {}).get(TRUTH)
    if truth is None:
        truth = system_quality(context["systems"].get(caption_id, ""))
    rating = worker.level(truth, 1, context["settings"].scale_levels)
    return [SimulatedAnswer(0, {"rating": str(rating)}, worker.seconds(4, 12))]
