"""``bench/ppi.py --part saving``: human judgments the judge saves, against its bound.

Per rho in ``RHOS`` and seed, one world (``bench/ppi_sim.py``): one system of ``CAPTIONS``
captions, the judge on every caption (``RUNS`` runs, its error spread over captions and
tracked by its runs' spread, ``SHRINK``), one rating per caption. Three VICR studies of
that world through the services (``bench/ppi_study.py``):

- ``none`` (no design; PPI++ ``ppi_mean`` in ``people_judge_report``): people answer the
  captions in the order the study serves them (a random order: the VICR game shuffles its
  pairs with the study seed, and the captions are drawn i.i.d. anyway) and the section is
  read after ``CHECKPOINTS`` x the bound's n and at ``REFERENCE`` judgments: the
  people-only interval at ``REFERENCE`` is the width to reach;
- ``uniform`` and ``uncertainty`` (``people_design_apply`` at share ``SHARE``, the
  setting's smallest, floor ``FLOOR``): the service reads the uniform design as a simple
  random sample (PPI++, as ``none``) and the uncertainty design with active inference.

Paired (the headline): per study, its people's count times its combined variance over
the people-only variance of as many units, both from that study's own people
(``_paired``); beside it the most uniform sampling (PPI++ at the best lambda) saves at
that count with the world's finite pool (``finite_bound_share_needed``); active
selection may do better than that bound, which is its point.

Unpaired (the first runs' figures, kept): for ``none``, the mean variance over seeds at
each checkpoint, interpolated on log-log axes between the checkpoints around the
reference variance; for a design (one size), its judgments x its mean variance / the
reference's (variance taken as proportional to 1/n at that size: stated, not measured).
The bound: ``1 - rho^2`` of the reference's judgments, rho the correlation of the judge's
mean over runs with the human rating over all captions of the world (and, beside it, as a
researcher measures it: over the reference's labeled captions).
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from bench import ppi_sim
from bench.ppi_study import build, import_judge, play, report

RHOS = (0.5, 0.7, 0.9)
CAPTIONS = 1000
REFERENCE = 80
CHECKPOINTS = (0.75, 1.0, 1.3)
RUNS = 8
HETERO = 1.5
SHRINK = True
SHARE = 0.05
FLOOR = 0.035
BIAS = 0.2
STREAM = 2


def world(seed: int, rho: float) -> ppi_sim.World:
    scale = ppi_sim.calibrate(rho, k=1, runs=RUNS, hetero=HETERO, shrink=SHRINK)
    return ppi_sim.draw_world(
        seed * 10 + int(rho * 10),
        stream=STREAM,
        means={"sys": 3.0},
        bias={"sys": BIAS},
        captions=CAPTIONS,
        k=1,
        runs=RUNS,
        scale=scale,
        hetero=HETERO,
        shrink=SHRINK,
    )


def _row(section: dict) -> dict:
    row = section["systems"][0] if section.get("systems") else {}
    return {
        "error": row.get("error") or section.get("error"),
        "people_se": (row.get("people") or {}).get("se"),
        "combined_se": (row.get("combined") or {}).get("se"),
        "lam": row.get("lam"),
        "n_labeled": row.get("n_labeled"),
    }


def _unit_variance(study) -> float | None:
    """The people's per-unit variance as the study's own data estimate it: ``var(y)``
    (``ddof=0``, as the people-only se) of the labeled units, weighted by 1 / pi under a
    design (the Hajek variance: the drawn units are not a simple random sample there)."""
    from annotation.services.people_judges import people_judge_data

    data = people_judge_data(study)["systems"][0]
    if len(data.y) < 2:
        return None
    weight = (
        np.ones(len(data.y))
        if data.probabilities is None
        else 1.0 / data.probabilities[: len(data.y)]
    )
    mean = float(np.dot(weight, data.y) / weight.sum())
    return float(np.dot(weight, (data.y - mean) ** 2) / weight.sum())


def _labeled_rho(study) -> float | None:
    from annotation.services.people_judges import people_judge_data

    data = people_judge_data(study)["systems"][0]
    if len(data.y) < 3 or np.std(data.y) == 0 or np.std(data.yhat) == 0:
        return None
    return float(np.corrcoef(data.y, data.yhat)[0, 1])


def saving_seed(seed: int, rhos: tuple[float, ...] = RHOS) -> dict:
    """The three studies of each rho for one seed (one process's scratch database)."""
    from bench.ppi import owner

    out: dict = {"seed": seed, "rhos": {}}
    for rho in rhos:
        drawn = world(seed, rho)
        cell: dict = {"rho_all_units": ppi_sim.measured_rho(drawn)["sys"]}
        name = f"saving {seed} {rho}"
        study, unit_of = build(
            owner(), drawn, name=f"{name} none", seed=seed, k=1, design="", share=1, floor=1
        )
        import_judge(study, drawn, unit_of)
        given: dict[int, int] = {}
        bound_n = REFERENCE * (1 - rho**2)
        sizes = sorted({max(3, round(bound_n * f)) for f in CHECKPOINTS} | {REFERENCE})
        cell["none"] = []
        for size in sizes:
            played = play(study, drawn, unit_of, limit=size, given=given)
            cell["none"].append(
                {
                    "judgments": played["judgments"],
                    **_row(report(study, owner(), via_job=False, resamples=20)),
                    "unit_variance": _unit_variance(study),
                }
            )
        cell["rho_labeled"] = _labeled_rho(study)
        for design in ("uniform", "uncertainty"):
            study, unit_of = build(
                owner(),
                drawn,
                name=f"{name} {design}",
                seed=seed,
                k=1,
                design=design,
                share=SHARE,
                floor=FLOOR,
            )
            import_judge(study, drawn, unit_of)
            from annotation.services.people_design import people_design_apply

            people_design_apply(study=study, user=owner())
            played = play(study, drawn, unit_of)
            section = report(study, owner(), via_job=False, resamples=20)
            cell[design] = {
                "judgments": played["judgments"],
                **_row(section),
                "unit_variance": _unit_variance(study),
            }
        out["rhos"][str(rho)] = cell
    return out


def _interpolate(points: list[tuple[float, float]], target: float) -> float:
    """n where the variance (log-log, piecewise linear through ``points`` (n, var) sorted
    by n) equals ``target``; extrapolated from the nearest segment outside the range."""
    logs = [(math.log(n), math.log(v)) for n, v in points]
    for (x0, y0), (x1, y1) in zip(logs, logs[1:], strict=False):
        if min(y0, y1) <= math.log(target) <= max(y0, y1) or (x1, y1) == logs[-1]:
            slope = (y1 - y0) / (x1 - x0) if x1 != x0 else -1.0
            return math.exp(x0 + (math.log(target) - y0) / slope)
    return float("nan")


def _paired(rows: list[dict], world_variance: list[float]) -> dict:
    """Judgments needed for the people-only width, as a share of the people's count.

    Headline (``share``): over the studies, the sum of ``n * combined_se^2`` over the sum
    of their own people's per-unit variance (``unit_variance``): both from the same
    people, so their sampling noise largely cancels, which the unpaired ratios (variances
    of different studies) do not; a ratio of sums, not a mean of per-study ratios, whose
    small denominators would bias it up (Jensen). Its ``se`` is from resampling the
    studies. Beside it, ``against_world``: ``n * combined_se^2`` over the world's own
    variance of the human ratings (all its captions; known in the simulation), the
    people-only variance a simple random sample of n would have. 1/n scaling at n.
    """
    kept = [
        (r["n_labeled"] * r["combined_se"] ** 2, r["unit_variance"], world)
        for r, world in zip(rows, world_variance, strict=True)
        if r.get("combined_se") and r.get("unit_variance")
    ]
    scaled, own, world = (np.array(column) for column in zip(*kept, strict=True))
    draws = np.random.default_rng(0).integers(0, len(kept), size=(2000, len(kept)))
    resampled = scaled[draws].sum(axis=1) / own[draws].sum(axis=1)
    against = scaled / world
    return {
        "share": float(scaled.sum() / own.sum()),
        "se": float(resampled.std()),
        "mean_of_ratios": float(np.mean(scaled / own)),
        "against_world": float(against.mean()),
        "against_world_se": float(against.std(ddof=1) / math.sqrt(len(kept))),
        "n": statistics.mean(r["n_labeled"] for r in rows if r.get("n_labeled")),
        "studies": len(kept),
    }


def summary(runs: list[dict]) -> dict:
    """Per rho: judgments needed by each path, as a share of the reference's, and the
    share of the bound's saving reached."""
    out: dict = {
        "seeds": len(runs),
        "setup": {
            "captions": CAPTIONS,
            "reference_judgments": REFERENCE,
            "judge_runs": RUNS,
            "judge_error_spread": HETERO,
            "judge_shrinks": SHRINK,
            "design_share": SHARE,
            "design_floor": FLOOR,
        },
    }
    for rho in RHOS:
        cells = [r["rhos"][str(rho)] for r in runs if str(rho) in r["rhos"]]
        if not cells:
            continue  # a run of other rhos (--rhos)
        rho_all = statistics.mean(c["rho_all_units"] for c in cells)
        labeled = [c["rho_labeled"] for c in cells if c["rho_labeled"] is not None]
        ref = [c["none"][-1] for c in cells]
        ref_var = statistics.mean(r["people_se"] ** 2 for r in ref)
        ref_n = statistics.mean(r["judgments"] for r in ref)
        points = []
        for index in range(len(cells[0]["none"])):
            rows = [c["none"][index] for c in cells if c["none"][index]["combined_se"]]
            if rows:
                points.append(
                    (
                        statistics.mean(r["judgments"] for r in rows),
                        statistics.mean(r["combined_se"] ** 2 for r in rows),
                    )
                )
        needed = {"none": _interpolate(points, ref_var)}
        for design in ("uniform", "uncertainty"):
            rows = [c[design] for c in cells if c[design]["combined_se"]]
            n = statistics.mean(r["judgments"] for r in rows)
            var = statistics.mean(r["combined_se"] ** 2 for r in rows)
            people_var = statistics.mean(r["people_se"] ** 2 for r in rows if r["people_se"])
            needed[design] = n * var / ref_var
            needed[f"{design}_people_only"] = n * people_var / ref_var
        bound = 1 - rho_all**2
        world_variance = [
            float(np.var(world(r["seed"], rho).ratings[:, 0]))
            for r in runs
            if str(rho) in r["rhos"]
        ]
        paired = {
            path: _paired(rows, world_variance)
            for path, rows in (
                ("none", ref),
                ("uniform", [c["uniform"] for c in cells]),
                ("uncertainty", [c["uncertainty"] for c in cells]),
            )
        }
        out[str(rho)] = {
            "paired_share_needed": paired,
            "paired_share_of_bound_saving": {
                k: (1 - v["share"]) / (1 - bound) for k, v in paired.items()
            },
            "against_world_share_of_bound_saving": {
                k: (1 - v["against_world"]) / (1 - bound) for k, v in paired.items()
            },
            # PPI++ at the best lambda with n people among the world's N judged units:
            # 1 - rho^2 / (1 + n / (N - n)), the most uniform sampling saves at that n.
            "finite_bound_share_needed": {
                path: 1 - rho_all**2 / (1 + v["n"] / (CAPTIONS - v["n"]))
                for path, v in paired.items()
            },
            "rho_all_units": rho_all,
            "rho_labeled_mean": statistics.mean(labeled) if labeled else None,
            "bound_share_needed": bound,
            "reference_judgments": ref_n,
            "reference_people_se": math.sqrt(ref_var),
            "checkpoints_none": points,
            "needed": needed,
            "share_needed": {k: v / ref_n for k, v in needed.items()},
            "share_of_bound_saving": {k: (1 - v / ref_n) / (1 - bound) for k, v in needed.items()},
            "lam_mean": {
                "none_at_reference": statistics.mean(c["none"][-1]["lam"] or 0 for c in cells),
                "uniform": statistics.mean(c["uniform"]["lam"] or 0 for c in cells),
                "uncertainty": statistics.mean(c["uncertainty"]["lam"] or 0 for c in cells),
            },
        }
    return out
