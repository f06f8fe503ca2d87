"""Benchmark adaptive designs on the platform's own code path (issue 27; not a test).

    PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/adaptive.py \
        [--part all|humanr|vicr] [--seeds 20] [--images 270] [--target 0.12]

Everything runs the real modes through the services, in one scratch SQLite file (migrated
once), as ``bench/arena.py`` does: ``study_create`` and ``study_open`` build the items;
simulated workers take leases with ``assignment_next`` and answer with ``judgment_submit``
(the calls the participant views make); the stopping and allocation rules act as wired
(HUMANr: ``eligible_items`` -> ``adaptive_settled_groups``; VICR: ``after_submit`` ->
``stopping.adaptive_stop``); the numbers read are the report job's (``report_request`` +
``services.runner.job_run``, the Celery task's code path without the broker).

HUMANr (``--part humanr``). Per seed, one study of ``--images`` images, each with 3 human
captions and one caption of each of 3 model systems, ``adaptive_target_half_width`` =
``--target`` and every other setting at its default (one worker per comparison). Phase 1:
the crowd works until nothing is served (the adaptive design). Then the bench turns the
setting off (a direct UPDATE: the settings service freezes a live study's settings) and the
same crowd goes on through the same services until the best fixed design below is known
(every system has at least its groups): phase 1 plus phase 2 holds the fixed design on the
SAME answers. Compared:

- judgments (comparisons plus attention checks) of the adaptive design against the best
  fixed design: the smallest number of whole groups per system at which every system's
  first groups (in the order judged) reach the target by the same width the rule uses
  (``humanr_next_systems_by_worker``), on the same answers: the best a fixed design sized
  in advance could do;
- the bound on that saving: each system stopped at the first of its own groups (in the
  order judged) at which the same rule calls it settled. With hindsight, no allocation that
  stops systems by this rule spends less on these answers, so one minus this cost over the
  best fixed design's is the most the rule can save at this crowd, whatever serves it;
- coverage: the adaptive report's 95% ``worker_t_interval`` (one vote per worker, what the
  rule measures), ``t_interval`` and ``bootstrap_interval`` hold the true HUMANr (below);
  widths of the adaptive report against the target;
- same conclusion: the adaptive report and the report after phase 2 (every system with at
  least the best fixed design's groups) rank the systems in the same order, and say the
  same of each model against the Human baseline (its permutation test at 0.05).

Simulated HUMANr crowd (assumptions, stated): the oriented answer is
``clip(round(5 + 4 * mu + b + e), 1, 9)`` with ``e ~ N(0, 2)`` slider steps per comparison
(the planner's stated spread) and, for model comparisons, a worker bias ``b ~ N(0, 0.5)``
(none for Human-vs-Human: a worker cannot tell which human caption is the reference). ``mu``
is the paper's ObjectNet Captions HUMANr (Table 2: GIT-L -0.46, ExpNet -0.56, ClipCap -0.69;
Human 0, Fig. 1). Clipping and rounding move the mean, so the TRUE value scored is the exact
expectation of that answer distribution (normal cdf over the rounding cells), printed beside
``mu``; it is what the simulation really yields (checked in ``tests/rubrics``). Every worker
passes every attention check, takes 5 s per trial, and does up to 4 groups.

VICR (``--part vicr``): see ``bench/adaptive_vicr.py``.

Results: ``bench/results/adaptive-<part>.json``; summary: ``bench/results-adaptive.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

#: Paper Table 2 (ObjectNet Captions) and Fig. 1 (Human-vs-Human near 0).
HUMANR_MU = {"Human": 0.0, "GIT-L": -0.46, "ExpNet": -0.56, "ClipCap": -0.69}
NOISE_STEPS = 2.0
WORKER_BIAS_STEPS = 0.5
SECONDS_PER_TRIAL = 5
GROUPS_PER_WORKER = 4
MAX_SEEDS = 100


def setup_django(prefix: str) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["CAPEVAL_VAR_DIR"] = str(scratch)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return scratch


def true_humanr(mu: float, spread: float) -> float:
    """E[(s - 5) / 4] for s = clip(round(5 + 4 mu + N(0, spread)), 1, 9), exactly."""
    from scipy.stats import norm

    centre = 5 + 4 * mu
    edges = np.array([-np.inf, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, np.inf])
    pmf = np.diff(norm.cdf((edges - centre) / spread))
    return float(pmf @ ((np.arange(1, 10) - 5) / 4))


def truths() -> dict[str, float]:
    biased = float(np.hypot(NOISE_STEPS, WORKER_BIAS_STEPS))
    return {
        name: true_humanr(mu, NOISE_STEPS if name == "Human" else biased)
        for name, mu in HUMANR_MU.items()
    }


def humanr_study(owner, *, seed: int, images: int, target: float):
    from annotation.models import Caption, Image
    from annotation.services.studies import study_create, study_open

    study = study_create(
        owner=owner,
        name=f"bench humanr {seed}",
        mode="humanr",
        settings={"adaptive_target_half_width": target},
        seed=seed,
    )
    rows = []
    for index in range(images):
        number = seed * 100_000 + index
        image = Image.objects.create(
            study=study,
            name=f"img-{number}.jpg",
            sha256=f"{number:064d}",
            file=f"images/{number}.jpg",
            display=f"display/{number}.webp",
            width=640,
            height=480,
            format="JPEG",
            alt_text=f"Photo {number}",
        )
        for k in range(3):
            rows.append(
                Caption(
                    study=study,
                    image=image,
                    system=Caption.HUMAN,
                    raw_text=f"human {k} of {number}",
                    text=f"human {k} of {number}",
                    line=index * 10 + k + 2,
                )
            )
        for k, system in enumerate(name for name in HUMANR_MU if name != "Human"):
            rows.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=f"{system} of {number}",
                    text=f"{system} of {number}",
                    line=index * 10 + 5 + k + 2,
                )
            )
    Caption.objects.bulk_create(rows)
    study_open(study=study)
    study.refresh_from_db()
    return study


class Crowd:
    """Workers who each take up to GROUPS_PER_WORKER groups; answers drawn per comparison."""

    def __init__(self, study, seed: int):
        self.study = study
        self.rng = np.random.default_rng(seed)
        self.number = 0
        self.current = None
        self.bias = 0.0
        self.done = 0

    def _new_worker(self):
        from annotation.models import Participant
        from annotation.services.participants import participant_for_crowd_worker

        self.number += 1
        external_id = f"bench-{self.study.seed}-{self.number}"
        self.current, _ = participant_for_crowd_worker(
            study=self.study,
            source=Participant.Source.PROLIFIC,
            external_id=external_id,
            meta={"PROLIFIC_PID": external_id, "STUDY_ID": "bench", "SESSION_ID": "bench"},
        )
        self.bias = float(self.rng.normal(0, WORKER_BIAS_STEPS))
        self.done = 0

    def oriented(self, trial: dict) -> int:
        if trial["kind"] != "comparison":
            return 2  # prefers the correct caption: passes the check
        bias = 0.0 if trial["system"] == "Human" else self.bias
        latent = 5 + 4 * HUMANR_MU[trial["system"]] + bias + self.rng.normal(0, NOISE_STEPS)
        return int(np.clip(np.floor(latent + 0.5), 1, 9))

    def one_group(self) -> bool:
        """Serve and answer one group; False when no worker (a fresh one too) gets any."""
        from annotation.modes.humanr.protocol import reference_on_left
        from annotation.services.assignments import assignment_next
        from annotation.services.judgments import judgment_submit

        for fresh in (False, True):
            if fresh or self.current is None or self.done >= GROUPS_PER_WORKER:
                self._new_worker()
            lease = assignment_next(participant=self.current)
            if lease is not None:
                break
        else:
            return False
        spec = lease.item.spec
        for part, trial in enumerate(spec["trials"]):
            s = self.oriented(trial)
            on_left = reference_on_left(spec["seed"], lease.pk, part)
            judgment_submit(
                participant=self.current,
                token=lease.token,
                part=part,
                data={"raw": s if on_left else 10 - s},
                now=lease.served_at + timedelta(seconds=SECONDS_PER_TRIAL * (part + 1)),
            )
        self.done += 1
        return True


def run_report(study, owner) -> dict:
    from annotation.models import Job
    from annotation.services.reports import report_request
    from annotation.services.runner import job_run

    job = report_request(study=study, user=owner)
    job_run(job=job)
    job.refresh_from_db()
    if job.status != Job.Status.DONE:
        raise SystemExit(f"report failed: {job.error}")
    return job.result


def conclusions(result: dict) -> tuple[tuple[str, ...], dict[str, bool]]:
    """The report's order of the model systems and, per model, whether its test against the
    Human baseline rejects at 0.05."""
    systems = result["humanr"]["systems"]
    order = tuple(
        name for name, _ in sorted(systems.items(), key=lambda kv: (-kv[1]["humanr"], kv[0]))
    )
    tests = {
        name: bool((entry.get("vs_baseline") or {}).get("p_value", 1.0) < 0.05)
        for name, entry in systems.items()
    }
    return order, tests


def settling_groups(
    rows: list[tuple[int, int, str, float]], target: float
) -> tuple[int | None, dict[str, int]]:
    """When the systems reach ``target`` by the SAME width the allocation rule uses
    (``humanr_next_systems_by_worker``: the report's t-interval over one vote per worker, at
    least 10 workers and 27 values), counting each system's first groups in the order judged.

    Returns ``(fixed, first)``:

    - ``fixed``: whole groups per system a fixed design needs for every system to be settled
      at once (the best fixed design), or None if the study is too small;
    - ``first``: for each system, the first number of its groups at which it alone is
      settled (hindsight per-system stopping). ``sum(first)`` groups is the least any
      allocation that stops each system by this rule could spend on these answers, so
      ``1 - sum(first) / (systems * fixed)`` bounds the saving over the best fixed design.

    ``rows``: ``(assignment id, participant id, system, value)`` of kept comparisons, in
    the order judged. Bench workers have distinct ids, browsers and networks, so a
    participant is a linked identity.
    """
    from annotation.modes.humanr.allocation import ADAPTIVE_MIN_WORKERS
    from annotation.modes.humanr.protocol import ADAPTIVE_CONFIDENCE, ADAPTIVE_MIN_VALUES
    from rubrics.adaptive import humanr_next_systems_by_worker

    groups: dict[str, list[int]] = {}
    for assignment_id, _, system, _ in rows:
        if assignment_id not in groups.setdefault(system, []):
            groups[system].append(assignment_id)
    first: dict[str, int] = {}
    for g in range(1, max(len(v) for v in groups.values()) + 1):
        if any(len(v) < g for v in groups.values()):
            return None, first
        chosen = {a for v in groups.values() for a in v[:g]}
        values: dict[str, dict[int, list[float]]] = {}
        for assignment_id, participant_id, system, value in rows:
            if assignment_id in chosen:
                values.setdefault(system, {}).setdefault(participant_id, []).append(value)
        still = humanr_next_systems_by_worker(
            values,
            target_half_width=target,
            confidence=ADAPTIVE_CONFIDENCE,
            min_values=ADAPTIVE_MIN_VALUES,
            min_workers=ADAPTIVE_MIN_WORKERS,
        )
        for system in groups:
            if system not in still:
                first.setdefault(system, g)
        if not still:
            return g, first
    return None, first


def kept_rows(study) -> list[tuple[int, int, str, float]]:
    from annotation.models import Judgment

    rows = Judgment.objects.filter(study=study, excluded=False, result__kind="comparison")
    return [
        (assignment_id, participant_id, system, float(value))
        for assignment_id, participant_id, system, value in rows.order_by("id").values_list(
            "assignment_id", "participant_id", "result__system", "result__value"
        )
    ]


def humanr_seed(owner, *, seed: int, args, truth: dict[str, float]) -> dict:
    from annotation.models import Judgment, Study

    started = time.perf_counter()
    study = humanr_study(owner, seed=seed, images=args.images, target=args.target)
    crowd = Crowd(study, seed)
    t0 = time.perf_counter()
    while crowd.one_group():
        pass
    phase1_seconds = time.perf_counter() - t0
    adaptive_ids = list(Judgment.objects.filter(study=study).values_list("id", flat=True))
    adaptive_judgments = len(adaptive_ids)
    adaptive_report = run_report(study, owner)
    # Phase 2: the fixed design on the same answers (see the module docstring).
    Study.objects.filter(pk=study.pk).update(
        settings={**study.settings, "adaptive_target_half_width": 0}
    )
    study.refresh_from_db()
    crowd.study = study
    fixed_groups, first_groups = settling_groups(kept_rows(study), args.target)
    # Until the best fixed design is known (every system then has at least its groups):
    # the rest of the study would not change it.
    while fixed_groups is None and crowd.one_group():
        fixed_groups, first_groups = settling_groups(kept_rows(study), args.target)
    full_report = run_report(study, owner)
    total_comparisons = len(kept_rows(study))
    # A fixed design of g groups per system costs g groups of 10 judgments per system.
    fixed_judgments = None if fixed_groups is None else fixed_groups * 10 * len(HUMANR_MU)
    # Hindsight per-system stopping: every system stopped at its own first settled group.
    hindsight_judgments = None if fixed_groups is None else sum(first_groups.values()) * 10
    per_system = {}
    entries = {**adaptive_report["humanr"]["systems"]}
    if adaptive_report["humanr"].get("baseline"):
        entries["Human"] = adaptive_report["humanr"]["baseline"]
    for name in HUMANR_MU:
        entry = entries.get(name) or {}
        t_low, t_high = entry.get("t_interval") or (None, None)
        b_low, b_high = entry.get("bootstrap_interval") or (None, None)
        w_low, w_high = entry.get("worker_t_interval") or (None, None)
        per_system[name] = {
            "n": entry.get("n_kept"),
            "humanr": entry.get("humanr"),
            "t_half_width": None if t_low is None else (t_high - t_low) / 2,
            "t_covers": None if t_low is None else bool(t_low <= truth[name] <= t_high),
            "worker_half_width": None if w_low is None else (w_high - w_low) / 2,
            "worker_covers": None if w_low is None else bool(w_low <= truth[name] <= w_high),
            "n_workers": entry.get("n_workers"),
            "bootstrap_covers": None if b_low is None else bool(b_low <= truth[name] <= b_high),
        }
    adaptive_order, adaptive_tests = conclusions(adaptive_report)
    full_order, full_tests = conclusions(full_report)
    return {
        "seed": seed,
        "adaptive_judgments": adaptive_judgments,
        "phase2_judgments": Judgment.objects.filter(study=study).count(),
        "full_comparisons": total_comparisons,
        "best_fixed_groups_per_system": fixed_groups,
        "best_fixed_judgments": fixed_judgments,
        "saving_vs_best_fixed": None
        if not fixed_judgments
        else 1 - adaptive_judgments / fixed_judgments,
        "first_settled_groups": first_groups,
        "hindsight_judgments": hindsight_judgments,
        "saving_bound_vs_best_fixed": None
        if not fixed_judgments
        else 1 - hindsight_judgments / fixed_judgments,
        "systems": per_system,
        "same_order": adaptive_order == full_order,
        "same_baseline_tests": adaptive_tests == full_tests,
        "workers": crowd.number,
        "ms_per_judgment_phase1": round(1000 * phase1_seconds / max(adaptive_judgments, 1), 2),
        "seconds": round(time.perf_counter() - started, 1),
    }


def humanr_part(args, partial: Path | None = None) -> dict:
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("bench-humanr", is_researcher=True)
    truth = truths()
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run = humanr_seed(owner, seed=seed, args=args, truth=truth)
        runs.append(run)
        print(
            f"seed {seed}: adaptive {run['adaptive_judgments']} judgments, best fixed "
            f"{run['best_fixed_judgments']}, after phase 2 {run['phase2_judgments']}, saving "
            f"{run['saving_vs_best_fixed']} (bound {run['saving_bound_vs_best_fixed']}), "
            f"{run['seconds']} s",
            flush=True,
        )
        if partial is not None:  # what is done so far, should the run be cut short
            partial.write_text(json.dumps({"runs": runs}, indent=2))
    return {"summary": humanr_summary(runs, args), "runs": runs}


def humanr_summary(runs: list[dict], args) -> dict:
    """The pooled numbers over ``runs`` (also of runs merged from several processes)."""
    savings = [r["saving_vs_best_fixed"] for r in runs if r["saving_vs_best_fixed"] is not None]
    covers = [
        s["t_covers"] for r in runs for s in r["systems"].values() if s["t_covers"] is not None
    ]
    boot = [
        s["bootstrap_covers"]
        for r in runs
        for s in r["systems"].values()
        if s["bootstrap_covers"] is not None
    ]
    worker_covers = [
        s["worker_covers"]
        for r in runs
        for s in r["systems"].values()
        if s["worker_covers"] is not None
    ]
    worker_widths = [
        s["worker_half_width"]
        for r in runs
        for s in r["systems"].values()
        if s["worker_half_width"]
    ]
    widths = [s["t_half_width"] for r in runs for s in r["systems"].values() if s["t_half_width"]]
    adaptive_total = sum(r["adaptive_judgments"] for r in runs if r["best_fixed_judgments"])
    fixed_total = sum(r["best_fixed_judgments"] for r in runs if r["best_fixed_judgments"])
    # Runs merged from before the bound existed have no hindsight figure.
    bounded = [r for r in runs if r["best_fixed_judgments"] and r.get("hindsight_judgments")]
    hindsight_total = sum(r["hindsight_judgments"] for r in bounded)
    bounded_fixed_total = sum(r["best_fixed_judgments"] for r in bounded)
    bounded_adaptive_total = sum(r["adaptive_judgments"] for r in bounded)
    summary = {
        "code_path": (
            "study_open (HumanrProtocol.build_items, one system per group) -> "
            "assignment_next (eligible_items -> adaptive_settled_groups) -> judgment_submit "
            "-> report_request + job_run (HumanrReport); best fixed design: "
            "rubrics.adaptive.humanr_next_systems_by_worker on the same stored values"
        ),
        "code_imported_from": str(Path(__import__("annotation").__file__).resolve().parent),
        "seeds": len(runs),
        "seeds_list": [r["seed"] for r in runs],
        "images": args.images,
        "target_half_width": args.target,
        "mu": HUMANR_MU,
        "true_humanr": truths(),
        "noise_steps": NOISE_STEPS,
        "worker_bias_steps": WORKER_BIAS_STEPS,
        "saving_pooled": None if not fixed_total else 1 - adaptive_total / fixed_total,
        "saving_bound_pooled": None
        if not bounded_fixed_total
        else 1 - hindsight_total / bounded_fixed_total,
        "saving_bound_max": max((r["saving_bound_vs_best_fixed"] for r in bounded), default=None),
        "adaptive_over_hindsight_pooled": None
        if not hindsight_total
        else bounded_adaptive_total / hindsight_total,
        "seeds_with_bound": len(bounded),
        "saving_median": statistics.median(savings) if savings else None,
        "saving_min": min(savings) if savings else None,
        "saving_max": max(savings) if savings else None,
        "seeds_where_fixed_reached_target": len(savings),
        "t_coverage": sum(covers) / len(covers) if covers else None,
        "t_intervals": len(covers),
        "bootstrap_coverage": sum(boot) / len(boot) if boot else None,
        "worker_t_coverage": sum(worker_covers) / len(worker_covers) if worker_covers else None,
        "worker_t_intervals": len(worker_covers),
        "adaptive_worker_half_width_max": max(worker_widths) if worker_widths else None,
        "adaptive_worker_half_width_mean": statistics.mean(worker_widths)
        if worker_widths
        else None,
        "adaptive_half_width_max": max(widths) if widths else None,
        "same_order_rate": sum(r["same_order"] for r in runs) / len(runs),
        "same_baseline_tests_rate": sum(r["same_baseline_tests"] for r in runs) / len(runs),
        "ms_per_judgment_phase1_median": statistics.median(
            r["ms_per_judgment_phase1"] for r in runs
        ),
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "humanr", "vicr"), default="all")
    parser.add_argument("--seeds", type=int, default=20)
    # Seeds first-seed .. first-seed + seeds - 1 (to split a run over processes).
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--images", type=int, default=270)
    parser.add_argument("--target", type=float, default=0.12)
    # VICR: game pairs per study (the VICR sample has 249).
    parser.add_argument("--pairs", type=int, default=40)
    # Merge the per-seed runs of several HUMANr processes (their JSON files) and print the
    # pooled summary (no Django, nothing run).
    parser.add_argument("--merge", nargs="*", type=Path, default=None)
    args = parser.parse_args()
    if args.merge:
        runs = sorted(
            (run for path in args.merge for run in json.loads(path.read_text())["runs"]),
            key=lambda run: run["seed"],
        )
        print(json.dumps(humanr_summary(runs, args), indent=2))
        return 0
    if not 1 <= args.seeds <= MAX_SEEDS:
        parser.error(f"--seeds must be 1-{MAX_SEEDS}")
    if not 27 <= args.images <= 2000:
        parser.error("--images must be 27-2000")
    if not 0 < args.target < 1:
        parser.error("--target must be in (0, 1)")
    if not 10 <= args.pairs <= 1000:
        parser.error("--pairs must be 10-1000")
    setup_django("capeval-bench-adaptive-")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    if args.part in ("all", "humanr"):
        started = time.perf_counter()
        result = humanr_part(args, partial=out / f"adaptive-humanr-partial-{args.first_seed}.json")
        result["summary"]["seconds"] = round(time.perf_counter() - started, 1)
        name = (
            "adaptive-humanr.json"
            if args.first_seed == 1
            else f"adaptive-humanr-{args.first_seed}.json"
        )
        (out / name).write_text(json.dumps(result, indent=2))
        print(json.dumps(result["summary"], indent=2))
    if args.part in ("all", "vicr"):
        from bench.adaptive_vicr import vicr_part

        name = f"adaptive-vicr-{args.pairs}-pairs"
        started = time.perf_counter()
        result = vicr_part(args, partial=out / f"{name}-partial.json")
        result["summary"]["seconds"] = round(time.perf_counter() - started, 1)
        (out / f"{name}.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
