"""How a simulated worker answers a THumB item (``Mode.simulate``)."""

from __future__ import annotations

from typing import Any

from annotation.models import Assignment
from annotation.modes.base import SimulatedAnswer
from annotation.modes.simulated import SimulatedWorker, system_quality
from annotation.modes.thumb.protocol import CHECK, FLUENCY, STAGE2


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Score every caption group: P and R near the hidden quality, no penalties; a review
    ticks "checked" on every caption (the protocol asks it)."""
    item = lease.item
    if item.kind == FLUENCY:
        captions = {group["key"]: {"fluency_errors": {}} for group in item.spec["groups"]}
    else:
        captions = {}
        for group in item.spec["groups"]:
            quality = max(system_quality(c["system"]) for c in group["captions"])
            captions[group["key"]] = {
                "precision": worker.level(quality + 0.3, 1, 5),
                "recall": worker.level(quality - 0.6, 1, 5),
                "fluency_errors": {},
                "conciseness": 0,
                "inclusive": 0,
                **({"confirmed": True} if item.kind in (STAGE2, CHECK) else {}),
            }
    return [SimulatedAnswer(0, {"captions": captions}, worker.seconds(40, 120))]
