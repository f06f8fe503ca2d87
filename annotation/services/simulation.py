"""A simulated crowd: seeded workers who answer a live study through the real services.

Every answer goes through ``assignment_next`` and ``judgment_submit``, the path a worker's
browser takes (leases, eligibility, the protocol's checks, scoring, ``after_submit``), so a
simulated study fills exactly as a real one would. The answers are plausible: each system's
captions have a hidden quality, and each worker answers it with noise of their own
(``annotation/modes/simulated.py``); how one worker answers one lease is the mode's
``simulate``. The demo (``load_demo``), benchmarks and tests use it to get a study with data
without a browser.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from annotation.errors import Conflict, ServiceError
from annotation.models import Caption, Participant, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode, SimulatedAnswer
from annotation.modes.simulated import SimulatedWorker
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import (
    participant_declare_vision,
    participant_for_crowd_worker,
)

#: Judgments one simulated worker makes at most: a bound, so a mode that keeps serving
#: (a VICR game) cannot loop for long.
MAX_ITEMS_PER_WORKER = 60


@dataclass
class SimulationSummary:
    """What a simulation did: judgments stored, per worker, and refusals met (by message)."""

    judgments: int = 0
    workers: int = 0
    per_worker: dict[str, int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)


def crowd_simulate(
    *,
    study: Study,
    workers: int,
    seed: int,
    max_items_per_worker: int = MAX_ITEMS_PER_WORKER,
    source: str = Participant.Source.PROLIFIC,
    prefix: str = "sim",
) -> SimulationSummary:
    """Let ``workers`` seeded crowd workers answer ``study`` until it has nothing left for
    them (or ``max_items_per_worker`` judgments each); return what they did.

    Workers are named ``<prefix>-<seed>-<n>``: calling again with the same seed continues
    with the same workers (a worker with nothing left stops at once), another seed brings new
    ones. A refusal of the protocol (e.g. a player who failed probation) ends that worker's
    stay, as it ends a real worker's; the study must be live.
    """
    if study.status != Study.Status.LIVE:
        raise Conflict("Only a live study can be answered; open it first.")
    if not 0 < workers <= 1000 or not 0 < max_items_per_worker <= 10_000:
        raise ServiceError("Simulate 1 to 1,000 workers of at most 10,000 items each.")
    mode = get_mode(study.mode)
    if type(mode).simulate is Mode.simulate:
        raise ServiceError(f"The {mode.label or mode.name} mode has no simulated crowd.")
    systems = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
    # The mode's data of each caption that has any (VICR: a gate pair's truth).
    specs = {
        pk: spec
        for pk, spec in Caption.objects.filter(study=study).values_list("pk", "spec")
        if spec
    }
    config = mode.settings(study)
    summary = SimulationSummary(workers=workers)
    crowd = []
    for number in range(workers):
        rng = random.Random(f"{seed}:{number}")
        worker = SimulatedWorker(rng=rng, bias=rng.gauss(0, 0.3), noise=rng.uniform(0.4, 0.9))
        external_id = f"{prefix}-{seed}-{number}"
        participant, _ = participant_for_crowd_worker(
            study=study,
            source=source,
            external_id=external_id,
            meta={"PROLIFIC_PID": external_id, "STUDY_ID": "simulated", "SESSION_ID": "sim"},
        )
        if mode.asks_vision and not participant.vision:
            # Declared as a real worker declares, through the service, before any item:
            # the mode's simulated_vision gives the crowd both groups.
            vision = mode.simulated_vision(worker)
            participant = participant_declare_vision(
                participant, vision=vision, screen_reader=vision == "blind", consent=True
            )
        crowd.append((external_id, participant, worker))
        summary.per_worker[external_id] = 0
    # Round by round, each worker still here answers one item: a crowd works side by side,
    # so the first worker does not take every stage-1 item before the second arrives.
    while crowd:
        still_here = []
        for external_id, participant, worker in crowd:
            if summary.per_worker[external_id] >= max_items_per_worker:
                continue
            lease = assignment_next(participant=participant)
            if lease is None:
                continue
            context = {"systems": systems, "specs": specs, "settings": config}
            try:
                done = _answer(participant, lease, mode.simulate(lease, worker, context))
            except ServiceError as exc:
                # A refusal ends the stay, as it ends a real worker's.
                summary.refusals[exc.message] = summary.refusals.get(exc.message, 0) + 1
                continue
            summary.per_worker[external_id] += done
            summary.judgments += done
            still_here.append((external_id, participant, worker))
        crowd = still_here
    return summary


def _answer(participant, lease, answers: list[SimulatedAnswer]) -> int:
    """Submit the mode's answers to the lease through the real service, each at the time
    the simulated worker sends it; return how many were stored."""
    at = lease.served_at or timezone.now()
    for answer in answers:
        at += timedelta(seconds=answer.seconds)
        judgment_submit(
            participant=participant, token=lease.token, data=answer.data, part=answer.part, now=at
        )
    return len(answers)
