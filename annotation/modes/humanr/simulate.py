"""How a simulated worker answers a HUMANr group (``Mode.simulate``)."""

from __future__ import annotations

from typing import Any

from annotation.models import Assignment
from annotation.modes.base import SimulatedAnswer
from annotation.modes.humanr.protocol import COMPARISON, reference_on_left
from annotation.modes.simulated import HUMAN_QUALITY, SimulatedWorker, system_quality


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Answer every trial of the group: lean towards the caption of higher hidden quality
    (1 = only the left caption matches, 9 = only the right); pass attention checks."""
    spec = lease.item.spec
    answers = []
    for part, trial in enumerate(spec["trials"]):
        on_left = reference_on_left(spec["seed"], lease.pk, part)
        if trial["kind"] == COMPARISON:
            towards_other = system_quality(trial["system"]) - HUMAN_QUALITY
        else:  # an attention check: the other caption belongs to another image
            towards_other = -4.0
        lean = max(-4, min(4, round(towards_other + worker.rng.gauss(0, worker.noise * 2))))
        raw = 5 + lean if on_left else 5 - lean
        answers.append(SimulatedAnswer(part, {"raw": raw}, worker.seconds(3, 9)))
    return answers
