"""One VICR study of ``bench/ppi.py`` through the platform's services (issue 40).

Run inside a process whose Django is set up on a scratch SQLite file (``bench/ppi.py``).
Per study: ``study_create`` (VICR, adaptive stopping off, ``min_ratings`` = ``max_ratings``
= k, the design settings ``people_design`` / ``people_share`` / ``people_floor``) and
``study_open`` build the items; the simulated judge's runs are imported with
``judge_import`` (the real import, one line per caption and run); ``people_design_apply``
draws the units people answer (uniform or by the judge's uncertainty) before any judgment;
players past the gates (as ``bench/adaptive_vicr.py``) take leases with ``assignment_next``
and answer with ``judgment_submit``, the r-th rating a caption receives being the r-th of
its drawn ratings; the numbers are ``people_judge_report``'s (what the report job stores
as ``result["people_judge"]``; ``via_job`` runs the report job itself).
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from bench.ppi_sim import World

TUTORIAL_POOL, PROBATION_POOL = 10, 40
SECONDS_PER_RATING = 5


def build(owner, world: World, *, name: str, seed: int, k: int, design: str, share, floor):
    """The live study and its caption id -> index into the world's arrays."""
    from annotation.models import Caption, Image, Participant
    from annotation.modes.importing import fileless_image
    from annotation.services.studies import study_create, study_open

    settings = {
        "adaptive_stopping": False,
        "min_ratings": k,
        "max_ratings": k,
        "gate_pool_multiple": 1,
        "crowd_arrivals_per_address_per_hour": 100_000,
        "crowd_open_leases_per_address": 100_000,
    }
    if design:
        settings |= {"people_design": design, "people_share": share, "people_floor": floor}
    study = study_create(owner=owner, name=name, mode="vicr", seed=seed, settings=settings)
    gates = TUTORIAL_POOL + PROBATION_POOL
    units = len(world.latent)
    images = Image.objects.bulk_create(
        fileless_image(study=study, name=f"img-{i}.jpg", alt_text=f"Bench image {i}")
        for i in range(gates + units)
    )
    captions = []
    for i, image in enumerate(images):
        unit = i - gates
        if unit < 0:
            purpose = "tutorial" if i < TUTORIAL_POOL else "probation"
            spec = {"truth": 3, "explanation": "Benchmark."}
            system = "Bench gate"
        else:
            purpose, system = "study", world.systems[world.system_of[unit]]
            spec = {"prime_ratings": [int(r) for r in world.primes[unit]]}
        captions.append(
            Caption(
                study=study,
                image=image,
                system=system,
                raw_text=f"caption {i}",
                text=f"caption {i}",
                purpose=purpose,
                line=i + 2,
                spec=spec,
                metrics={"unit": unit},
            )
        )
    Caption.objects.bulk_create(captions)
    study_open(study=study)
    players = max(k + 3, 8)
    Participant.objects.bulk_create(
        Participant(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=f"bench-{name}-{p}",
            status="game",
            state={
                "player": {"probation_attempts": 0, "score": 40, "game_ratings": 20},
                "tutorial_score": 20,
                "block": [],
            },
        )
        for p in range(players)
    )
    study.refresh_from_db()
    unit_of = {
        pk: metrics["unit"]
        for pk, metrics in Caption.objects.filter(study=study, purpose="study").values_list(
            "id", "metrics"
        )
    }
    return study, unit_of


def import_judge(study, world: World, unit_of: dict[int, int]) -> dict:
    """The simulated judge's runs through ``judge_import`` (one JSON line per caption and
    run, keyed by caption id as a researcher's file may be)."""
    from annotation.services.judges import judge_import

    lines = [
        json.dumps(
            {"caption_id": pk, "run": run, "answer": {"rating": int(world.judge[unit, run])}}
        )
        for pk, unit in sorted(unit_of.items())
        for run in range(world.judge.shape[1])
    ]
    return judge_import(study=study, text="\n".join(lines), name="simulated judge")


def play(study, world: World, unit_of: dict[int, int], *, limit=None, given=None) -> dict:
    """Every player rates in turn until nothing is served (``bench/adaptive_vicr.py``),
    or until ``limit`` judgments of this call and the earlier ones sharing ``given`` (the
    ratings each caption has had) are stored: a study read at several sizes."""
    from annotation.errors import ServiceError
    from annotation.models import Participant
    from annotation.services.assignments import assignment_next
    from annotation.services.judgments import judgment_submit

    given = {} if given is None else given
    players = list(Participant.objects.filter(study=study).order_by("external_id"))
    refused = 0
    stored = sum(given.values())
    while players and (limit is None or stored < limit):
        still = []
        for player in players:
            if limit is not None and stored >= limit:
                break
            lease = assignment_next(participant=player)
            if lease is None:
                continue
            unit = unit_of[lease.item.spec["caption_id"]]
            nth = given.get(unit, 0)
            try:
                judgment_submit(
                    participant=player,
                    token=lease.token,
                    data={"rating": str(int(world.ratings[unit, nth]))},
                    part=0,
                    now=lease.served_at + timedelta(seconds=SECONDS_PER_RATING),
                )
            except ServiceError:
                refused += 1
                continue
            given[unit] = nth + 1
            stored += 1
            still.append(player)
        players = still
    return {"judgments": stored, "refused": refused, "units": len(given)}


def report(study, owner, *, via_job: bool, resamples: int) -> dict:
    """The people + judge section: ``people_judge_report`` or the report job's stored one."""
    if via_job:
        from annotation.models import Job
        from annotation.services.reports import report_request
        from annotation.services.runner import job_run

        job = report_request(study=study, user=owner)
        job_run(job=job)
        job.refresh_from_db()
        if job.status != Job.Status.DONE:
            raise RuntimeError(f"report failed: {job.error}")
        return job.result["people_judge"]
    from annotation.services.people_judges import people_judge_report

    return people_judge_report(study, resamples=resamples)


def run_study(
    owner,
    world: World,
    *,
    name: str,
    seed: int,
    k: int,
    design: str,
    share: float = 0.5,
    floor: float = 0.1,
    via_job: bool = False,
    resamples: int = 200,
) -> dict:
    """Build, judge, design, play and report one study; the section and what it cost."""
    started = time.perf_counter()
    study, unit_of = build(
        owner, world, name=name, seed=seed, k=k, design=design, share=share, floor=floor
    )
    import_judge(study, world, unit_of)
    if design:
        from annotation.services.people_design import people_design_apply

        people_design_apply(study=study, user=owner)
    played = play(study, world, unit_of)
    section = report(study, owner, via_job=via_job, resamples=resamples)
    return {
        "section": section,
        **played,
        "seconds": round(time.perf_counter() - started, 2),
    }
