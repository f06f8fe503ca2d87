"""``bench/ppi.py --part arena``: human battles a CapArena-grade judge saves.

Per seed one arena study through the services (``study_create`` + ``study_open``, the
mode's defaults but no gold battles: they are not what is measured): ``SYSTEMS`` systems of
true Bradley-Terry strengths ``STRENGTHS`` (natural log-odds), ``IMAGES`` images, one
battle item per image and pair of systems (one worker each, the default). Each battle
unit has a latent ``u ~ N(0, TAU_U)`` people and the judge both see:

- a person prefers caption b with probability ``sigmoid(s_b - s_a + u)``: ``TAU_U`` is
  set so that two people agree ``HUMAN_AGREEMENT`` (0.683, CapArena's human-human) of the
  time; the vote of a unit is drawn once, so it does not depend on who is served it;
- the judge answers every battle (``judge_import`` by item id), preferring b when
  ``s_b - s_a + u + c_b - c_a + e > 0``, ``c`` its per-system bias ``JUDGE_BIAS`` and
  ``e ~ N(0, sigma)``, ``sigma`` set so that it agrees with a person ``JUDGE_AGREEMENT``
  (0.628, CapArena's best judge) of the time.

Workers answer through ``assignment_next`` and ``judgment_submit`` (sides as shown,
``left_is_a``); ``people_judge_report`` (the prediction-powered Bradley-Terry fit) is read
after ``CHECKPOINTS`` x ``REFERENCE`` battles. The precision is the mean over systems of
the strengths' variance; the people-only fit's at ``REFERENCE`` battles is the target, and
the battles the combined fit needs for it are interpolated (log-log) between checkpoints
on the mean over seeds. Bound: ``1 - rho^2``, rho the correlation of the human vote with
the judge's answer on the voted battles (both oriented the same way), as the report reads
them (``people_judge_data``).
"""

from __future__ import annotations

import random
import statistics
from datetime import timedelta
from functools import lru_cache

import numpy as np

from bench.ppi_saving import _interpolate

SYSTEMS = 4
STRENGTHS = np.linspace(-0.6, 0.6, SYSTEMS)
JUDGE_BIAS = np.array([0.5, 0.0, 0.0, -0.3])
IMAGES = 500
REFERENCE = 300
CHECKPOINTS = (0.8, 0.9, 1.0)
WORKERS = 40
HUMAN_AGREEMENT = 0.683
JUDGE_AGREEMENT = 0.628
STREAM = 3
PAIRS = [(i, j) for i in range(SYSTEMS) for j in range(i + 1, SYSTEMS)]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _units(rng: np.random.Generator, n: int, tau: float):
    pair = rng.integers(0, len(PAIRS), n)
    a = np.array([PAIRS[p][0] for p in pair])
    b = np.array([PAIRS[p][1] for p in pair])
    return a, b, STRENGTHS[b] - STRENGTHS[a] + rng.normal(0, tau, n)


@lru_cache(maxsize=4)
def calibration() -> tuple[float, float]:
    """(TAU_U, sigma) reaching the two agreements (bisection on 400,000 units)."""
    rng = np.random.default_rng(20261129)
    noise = rng.normal(0, 1, 400_000)

    def human(tau: float) -> float:
        p = _sigmoid(_units(np.random.default_rng(1), 400_000, tau)[2])
        return float(np.mean(p**2 + (1 - p) ** 2))

    def judge(tau: float, sigma: float) -> float:
        a, b, logit = _units(np.random.default_rng(1), 400_000, tau)
        p = _sigmoid(logit)
        says_b = logit + JUDGE_BIAS[b] - JUDGE_BIAS[a] + sigma * noise > 0
        return float(np.mean(np.where(says_b, p, 1 - p)))

    def solve(f, target, low, high, increasing):
        for _ in range(40):
            mid = (low + high) / 2
            if (f(mid) < target) == increasing:
                low = mid
            else:
                high = mid
        return (low + high) / 2

    tau = solve(human, HUMAN_AGREEMENT, 0.0, 10.0, True)
    sigma = solve(lambda s: judge(tau, s), JUDGE_AGREEMENT, 0.0, 20.0, False)
    return tau, sigma


def build(owner, seed: int):
    from annotation.models import Caption, Image
    from annotation.modes.importing import fileless_image
    from annotation.services.studies import study_create, study_open

    study = study_create(
        owner=owner, name=f"ppi arena {seed}", mode="arena", seed=seed, settings={"catch_rate": 0}
    )
    images = Image.objects.bulk_create(
        fileless_image(study=study, name=f"img-{i}.jpg", alt_text=f"Bench image {i}")
        for i in range(IMAGES)
    )
    Caption.objects.bulk_create(
        Caption(
            study=study,
            image=image,
            system=f"sys-{s}",
            raw_text=f"caption {i} {s}",
            text=f"caption {i} {s}",
            line=i * SYSTEMS + s + 2,
        )
        for i, image in enumerate(images)
        for s in range(SYSTEMS)
    )
    study_open(study=study)
    study.refresh_from_db()
    return study


def world(seed: int) -> dict:
    """Per (image index, pair index): the latent logit toward the higher system index, the
    person's vote (1: higher index preferred) and the judge's."""
    tau, sigma = calibration()
    rng = np.random.default_rng([STREAM, seed])
    shape = (IMAGES, len(PAIRS))
    a = np.array([p[0] for p in PAIRS])
    b = np.array([p[1] for p in PAIRS])
    logit = (STRENGTHS[b] - STRENGTHS[a])[None, :] + rng.normal(0, tau, shape)
    vote = rng.random(shape) < _sigmoid(logit)
    judge = logit + (JUDGE_BIAS[b] - JUDGE_BIAS[a])[None, :] + rng.normal(0, sigma, shape) > 0
    return {"vote": vote, "judge": judge}


def _oriented(item, drawn, index):
    """Whether b (as the item shows it) is preferred, by people and by the judge."""
    spec = item.spec
    image = int(item.image.name.split("-")[1].split(".")[0])
    sa, sb = int(spec["system_a"].split("-")[1]), int(spec["system_b"].split("-")[1])
    pair = index[(min(sa, sb), max(sa, sb))]
    flip = sa > sb  # the world's votes are toward the higher system index
    return drawn["vote"][image, pair] != flip, drawn["judge"][image, pair] != flip


def import_judge(study, drawn) -> None:
    import json

    from annotation.models import Item
    from annotation.modes.arena.protocol import BATTLE
    from annotation.services.judges import judge_import

    index = {pair: k for k, pair in enumerate(PAIRS)}
    lines = []
    for item in Item.objects.filter(study=study, kind=BATTLE).select_related("image"):
        _, judge_b = _oriented(item, drawn, index)
        lines.append(
            json.dumps({"item_id": item.pk, "answer": {"outcome": "b" if judge_b else "a"}})
        )
    judge_import(study=study, text="\n".join(lines), name="simulated judge")


def crowd(study, seed: int) -> list:
    from annotation.models import Participant
    from annotation.services.participants import participant_for_crowd_worker

    out = []
    for number in range(WORKERS):
        external_id = f"ppi-{seed}-{number}"
        participant, _ = participant_for_crowd_worker(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=external_id,
            meta={"PROLIFIC_PID": external_id, "STUDY_ID": "bench", "SESSION_ID": "bench"},
        )
        out.append((participant, random.Random(f"{seed}:{number}")))
    return out


def battle_until(study, drawn, workers: list, limit: int, stored: int) -> int:
    """Workers in turn until ``limit`` battles are stored (or nothing is served)."""
    from annotation.errors import ServiceError
    from annotation.modes.arena.protocol import left_is_a
    from annotation.services.assignments import assignment_next
    from annotation.services.judgments import judgment_submit

    index = {pair: k for k, pair in enumerate(PAIRS)}
    active = list(workers)
    while active and stored < limit:
        still = []
        for participant, rng in active:
            if stored >= limit:
                break
            lease = assignment_next(participant=participant)
            if lease is None:
                continue
            vote_b, _ = _oriented(lease.item, drawn, index)
            left_a = left_is_a(study, lease)
            try:
                judgment_submit(
                    participant=participant,
                    token=lease.token,
                    data={"outcome": "a" if (not vote_b) == left_a else "b"},
                    part=0,
                    now=lease.served_at + timedelta(seconds=rng.uniform(6, 20)),
                )
            except ServiceError:
                continue
            stored += 1
            still.append((participant, rng))
        active = still
    return stored


def arena_seed(seed: int) -> dict:
    from annotation.services.people_judges import people_judge_data, people_judge_report
    from bench.ppi import owner

    drawn = world(seed)
    study = build(owner(), seed)
    import_judge(study, drawn)
    workers = crowd(study, seed)
    stored = 0
    checkpoints = []
    for f in CHECKPOINTS:
        stored = battle_until(study, drawn, workers, round(REFERENCE * f), stored)
        section = people_judge_report(study)
        rows = section.get("systems") or []
        checkpoints.append(
            {
                "battles": stored,
                "error": section.get("error"),
                "people_var": statistics.mean(r["people"]["se"] ** 2 for r in rows)
                if rows
                else None,
                "combined_var": statistics.mean(r["combined"]["se"] ** 2 for r in rows)
                if rows
                else None,
                "lam": rows[0]["lam"] if rows else None,
            }
        )
    battles = people_judge_data(study)["battles"]
    y, yhat = battles["human"][:, 2], battles["judge_labeled"][:, 2]
    return {
        "seed": seed,
        "checkpoints": checkpoints,
        "rho": float(np.corrcoef(y, yhat)[0, 1]),
        "agreement": float(np.mean((yhat > 0.5) == (y > 0.5))),
    }


def summary(runs: list[dict]) -> dict:
    tau, sigma = calibration()
    ok = [r for r in runs if all(c["combined_var"] for c in r["checkpoints"])]
    points = [
        (
            statistics.mean(r["checkpoints"][k]["battles"] for r in ok),
            statistics.mean(r["checkpoints"][k]["combined_var"] for r in ok),
        )
        for k in range(len(CHECKPOINTS))
    ]
    reference = statistics.mean(r["checkpoints"][-1]["people_var"] for r in ok)
    ref_n = statistics.mean(r["checkpoints"][-1]["battles"] for r in ok)
    needed = _interpolate(points, reference)
    rho = statistics.mean(r["rho"] for r in ok)
    return {
        "seeds": len(runs),
        "seeds_with_a_fit": len(ok),
        "setup": {
            "systems": SYSTEMS,
            "strengths": STRENGTHS.tolist(),
            "judge_bias": JUDGE_BIAS.tolist(),
            "images": IMAGES,
            "reference_battles": REFERENCE,
            "unit_latent_sd": tau,
            "judge_noise_sd": sigma,
            "human_agreement_target": HUMAN_AGREEMENT,
            "judge_agreement_target": JUDGE_AGREEMENT,
        },
        "judge_agreement_measured": statistics.mean(r["agreement"] for r in ok),
        "rho_measured": rho,
        "bound_share_needed": 1 - rho**2,
        "reference_people_var": reference,
        "checkpoints_combined": points,
        "battles_needed": needed,
        "share_needed": needed / ref_n,
        "share_of_bound_saving": (1 - needed / ref_n) / rho**2,
    }
