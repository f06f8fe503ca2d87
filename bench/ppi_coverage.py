"""``bench/ppi.py --part coverage``: are the intervals valid where the judge is biased?

Per seed, one world (``bench/ppi_sim.py``): two systems of ``CAPTIONS`` captions, latent
means ``MEANS``, a judge biased differently per system (``BIAS``, rating points) with
correlation ``RHO`` with a caption's mean human rating, ``RUNS`` runs (a judge that
shrinks toward the middle where it is unsure, ``ppi_sim.judge_runs``). Two VICR studies of
that world through the services (``bench/ppi_study.py``), people on a share ``SHARE`` of
the captions: design ``uniform``, and design ``uncertainty`` (floor ``FLOOR``). Per system,
whether each 95% interval of ``people_judge_report`` (people-only, combined, judge-only)
holds the system's true mean: the simulation's known expected human rating of a random
caption of the system (``ppi_sim.true_mean``, closed form), not a full-people estimate.
"""

from __future__ import annotations

import statistics

import numpy as np

from bench import ppi_sim
from bench.ppi_study import run_study

MEANS = {"sys-a": 2.7, "sys-b": 3.4}
BIAS = {"sys-a": 0.3, "sys-b": -0.3}
CAPTIONS = 50
K = 1
RHO = 0.7
RUNS = 8
HETERO = 1.5
SHRINK = True
SHARE = 0.5
FLOOR = 0.3
DESIGNS = ("uniform", "uncertainty")
ESTIMATES = ("people", "combined", "judge")
STREAM = 1


def world(seed: int) -> ppi_sim.World:
    scale = ppi_sim.calibrate(RHO, k=K, runs=RUNS, hetero=HETERO, shrink=SHRINK)
    return ppi_sim.draw_world(
        seed,
        stream=STREAM,
        means=MEANS,
        bias=BIAS,
        captions=CAPTIONS,
        k=K,
        runs=RUNS,
        scale=scale,
        hetero=HETERO,
        shrink=SHRINK,
    )


def _scored(section: dict, truth: dict[str, float]) -> dict:
    out = {}
    for row in section.get("systems", []):
        system = row["system"]
        out[system] = {
            "n_people": row.get("n_people"),
            "lam": row.get("lam"),
            **{
                est: {
                    "covers": bool(row[est]["low"] <= truth[system] <= row[est]["high"]),
                    "width": row[est]["high"] - row[est]["low"],
                    "estimate": row[est]["estimate"],
                }
                for est in ESTIMATES
                if row.get(est)
            },
        }
    return out


def coverage_seed(seed: int) -> dict:
    """Both designs of one seed (one process's scratch database)."""
    from bench.ppi import owner

    drawn = world(seed)
    run = {"seed": seed, "rho": ppi_sim.measured_rho(drawn), "designs": {}}
    for design in DESIGNS:
        done = run_study(
            owner(),
            drawn,
            name=f"coverage {seed} {design}",
            seed=seed,
            k=K,
            design=design,
            share=SHARE,
            floor=FLOOR,
            resamples=100,
        )
        section = done.pop("section")
        run["designs"][design] = {
            **done,
            "error": section.get("error"),
            "systems": _scored(section, drawn.truth),
        }
    return run


def check(seed: int, *, via_job: bool) -> dict:
    """One seed, the uniform design, the whole section printed (``--part check``)."""
    from bench.ppi import owner

    drawn = world(seed)
    done = run_study(
        owner(),
        drawn,
        name=f"check {seed}",
        seed=seed,
        k=K,
        design="uniform",
        share=SHARE,
        floor=FLOOR,
        via_job=via_job,
    )
    return {"truth": drawn.truth, "rho_all_units": ppi_sim.measured_rho(drawn), **done}


def summary(runs: list[dict]) -> dict:
    """Coverage per design and estimate, pooled over systems and per system."""
    out: dict = {
        "seeds": len(runs),
        "setup": {
            "means": MEANS,
            "truth": {s: ppi_sim.true_mean(m) for s, m in MEANS.items()},
            "judge_bias": BIAS,
            "captions_per_system": CAPTIONS,
            "ratings_per_caption": K,
            "rho_target": RHO,
            "judge_runs": RUNS,
            "judge_error_spread": HETERO,
            "judge_shrinks": SHRINK,
            "share": SHARE,
            "floor": FLOOR,
            "truth_is": "the simulation's known expected human rating (closed form)",
        },
        "rho_measured_mean": {s: statistics.mean(r["rho"][s] for r in runs) for s in MEANS},
    }
    for design in DESIGNS:
        rows = [r["designs"][design] for r in runs]
        errors = sum(1 for r in rows if r.get("error"))
        block: dict = {"reports_with_error": errors}
        for est in ESTIMATES:
            per_system = {}
            for system in MEANS:
                cells = [
                    r["systems"][system][est]
                    for r in rows
                    if system in r["systems"] and est in r["systems"][system]
                ]
                per_system[system] = {
                    "coverage": float(np.mean([c["covers"] for c in cells])) if cells else None,
                    "mean_width": float(np.mean([c["width"] for c in cells])) if cells else None,
                    "intervals": len(cells),
                }
            cells = [
                r["systems"][s][est] for r in rows for s in r["systems"] if est in r["systems"][s]
            ]
            block[est] = {
                "coverage": float(np.mean([c["covers"] for c in cells])) if cells else None,
                "intervals": len(cells),
                "per_system": per_system,
            }
        block["human_judgments_mean"] = statistics.mean(r["judgments"] for r in rows)
        block["units_labeled_mean"] = statistics.mean(r["units"] for r in rows)
        block["seconds_mean"] = statistics.mean(r["seconds"] for r in rows)
        block["refused"] = sum(r["refused"] for r in rows)
        out[design] = block
    return out
