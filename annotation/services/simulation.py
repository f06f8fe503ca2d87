"""A simulated crowd: seeded workers who answer a live study through the real services.

Every answer goes through ``assignment_next`` and ``judgment_submit``, the path a worker's
browser takes (leases, eligibility, the protocol's checks, scoring, ``after_submit``), so a
simulated study fills exactly as a real one would. The answers are plausible: each system's
captions have a hidden quality, and each worker answers it with noise of their own. The demo
(``load_demo``), benchmarks and tests use it to get a study with data without a browser.

Hidden truth per system (1 = wrong, 5 = excellent): ``Human`` 4.6, names containing
"good" 4.0, "mid" 3.0, "bad" 1.6, anything else 3.2. Each worker has a bias and a noise level
drawn from the seed, so the agreement statistics have something to measure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Caption, Participant, Study
from annotation.modes import get_mode
from annotation.modes.humanr import reference_on_left
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker

#: Judgments one simulated worker makes at most: a bound, so a mode that keeps serving
#: (a VICR game) cannot loop for long.
MAX_ITEMS_PER_WORKER = 60
#: Hidden quality of a system's captions by a word in its name (see the module docstring).
QUALITY_BY_WORD = (("good", 4.0), ("mid", 3.0), ("bad", 1.6))
HUMAN_QUALITY = 4.6
OTHER_QUALITY = 3.2


def system_quality(system: str) -> float:
    """The hidden quality (1 to 5) the simulated crowd sees in a system's captions."""
    if system == Caption.HUMAN:
        return HUMAN_QUALITY
    name = system.lower()
    return next((q for word, q in QUALITY_BY_WORD if word in name), OTHER_QUALITY)


@dataclass
class SimulatedWorker:
    """One worker's habits: a bias on every score, a noise level, and their pace."""

    rng: random.Random
    bias: float
    noise: float

    def level(self, truth: float, low: int, high: int) -> int:
        """A score near ``truth`` on the scale ``low``..``high``."""
        value = round(truth + self.bias + self.rng.gauss(0, self.noise))
        return max(low, min(high, value))

    def seconds(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)


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
        raise ServiceError("Only a live study can be answered; open it first.", status=409)
    if not 0 < workers <= 1000 or not 0 < max_items_per_worker <= 10_000:
        raise ServiceError("Simulate 1 to 1,000 workers of at most 10,000 items each.")
    answer = _ANSWERS[study.mode]
    systems = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
    truths = dict(
        Caption.objects.filter(study=study, truth__isnull=False).values_list("pk", "truth")
    )
    # The rating scale of a VICR study (4 or 5 levels); the other modes have none.
    levels = getattr(get_mode(study.mode).settings(study), "scale_levels", 5)
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
            context = {"systems": systems, "truths": truths, "worker": worker, "levels": levels}
            try:
                done = answer(participant, lease, context)
            except ServiceError as exc:
                # A refusal ends the stay, as it ends a real worker's.
                summary.refusals[exc.message] = summary.refusals.get(exc.message, 0) + 1
                continue
            summary.per_worker[external_id] += done
            summary.judgments += done
            still_here.append((external_id, participant, worker))
        crowd = still_here
    return summary


def _submit(participant, lease, data: dict[str, Any], *, part: int, at: datetime) -> None:
    judgment_submit(participant=participant, token=lease.token, data=data, part=part, now=at)


def _thumb(participant, lease, context) -> int:
    """Score every caption group: P and R near the hidden quality, no penalties; a review
    ticks "checked" on every caption (the protocol asks it)."""
    worker: SimulatedWorker = context["worker"]
    item = lease.item
    if item.kind == "fluency":
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
                **({"confirmed": True} if item.kind in ("stage2", "check") else {}),
            }
    at = _later(lease.served_at, worker.seconds(40, 120))
    _submit(participant, lease, {"captions": captions}, part=0, at=at)
    return 1


def _vicr(participant, lease, context) -> int:
    """Rate the pair: near the expert truth on tutorial and probation pairs (the imported
    truth), near the system's hidden quality in the game."""
    worker: SimulatedWorker = context["worker"]
    item = lease.item
    caption_id = item.spec.get("caption_id")
    truth = context["truths"].get(caption_id)
    if truth is None:
        truth = system_quality(context["systems"].get(caption_id, ""))
    rating = worker.level(truth, 1, context["levels"])
    at = _later(lease.served_at, worker.seconds(4, 12))
    _submit(participant, lease, {"rating": str(rating)}, part=0, at=at)
    return 1


def _humanr(participant, lease, context) -> int:
    """Answer every trial of the group: lean towards the caption of higher hidden quality
    (1 = only the left caption matches, 9 = only the right); pass attention checks."""
    worker: SimulatedWorker = context["worker"]
    spec = lease.item.spec
    at = lease.served_at
    for part, trial in enumerate(spec["trials"]):
        on_left = reference_on_left(spec["seed"], lease.pk, part)
        if trial["kind"] == "comparison":
            towards_other = system_quality(trial["system"]) - HUMAN_QUALITY
        else:  # an attention check: the other caption belongs to another image
            towards_other = -4.0
        lean = max(-4, min(4, round(towards_other + worker.rng.gauss(0, worker.noise * 2))))
        raw = 5 + lean if on_left else 5 - lean
        at = _later(at, worker.seconds(3, 9))
        _submit(participant, lease, {"raw": raw}, part=part, at=at)
    return len(spec["trials"])


def _later(start: datetime | None, seconds: float) -> datetime:
    """When the simulated answer is sent: ``seconds`` after ``start`` (the lease or part)."""
    return (start or timezone.now()) + timedelta(seconds=seconds)


_ANSWERS = {"thumb": _thumb, "vicr": _vicr, "humanr": _humanr}
