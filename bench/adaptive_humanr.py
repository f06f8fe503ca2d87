"""HUMANr adaptive allocation against the designs a researcher would have run (issue 48).

Run by ``bench/adaptive.py --part humanr`` (which sets Django up on a scratch SQLite file).
Every design is a real study through the services: ``study_create`` + ``study_open`` build
the groups, simulated workers take leases with ``assignment_next`` and answer with
``judgment_submit`` (the calls the participant views make), the rules act as wired
(``eligible_items`` -> ``adaptive_settled_groups`` and, by default, the spreading rule
``allocation.judged_systems_groups``), and the numbers read are the report job's
(``report_request`` + ``services.runner.job_run``).

Answers (issue 48: their distribution must not depend on the allocation). Each system has
its own seeded stream of slider noise, and each worker number its own seeded leaning: the
k-th comparison of system S answered in ANY design gets the k-th draw of S's stream, and
worker number j leans the same in every design. The oriented answer is
``clip(round(5 + 4 * mu + b + e), 1, 9)`` with ``e ~ N(0, 2)`` slider steps (the planner's
default spread) and, on model comparisons, the worker's ``b ~ N(0, 0.5)`` (none on
Human-vs-Human: a worker cannot tell which human caption is the reference). ``mu`` is the
paper's ObjectNet Captions HUMANr (Table 2: GIT-L -0.46, ExpNet -0.56, ClipCap -0.69;
Human 0, Fig. 1). The TRUE value scored is the exact expectation of that answer
distribution (``true_humanr``). Every worker passes every check, answers 5 s after each
trial is shown and does up to 4 groups (fewer when nothing is served to them; then a new
worker arrives).

Designs per seed (``--images`` images, each with 3 human captions and one caption of each
model; every setting at its default unless named):

- **adaptive** (the platform's default allocation): ``adaptive_target_half_width`` =
  ``--target``, which builds one-system groups, stops serving a system once its 95%
  interval over one vote per worker (at least 10 workers, 27 values) is that narrow, and
  spreads each worker's groups over the systems (``adaptive_spread_workers``, default on);
  run until nothing is served.
- **adaptive, not spread** (``adaptive_spread_workers`` off: the allocation before issue
  48, where a worker may get several groups of one system: one vote, many judgments).
- **planner-sized fixed design**: what a researcher would run without adaptive stopping.
  Before the study, the planner (``annotation.forms.PlanForm`` -> ``form.plan`` ->
  ``services.planning.study_plan``, the page's and the API's path) is asked on the
  study, with no pilot (nothing judged yet, so the mode's stated assumptions) and the
  form's defaults (sizes 20, 50, 100, 200; spread 2 steps, the crowd's own; smallest
  difference 0.3; 30 simulations) with the same target half-width; the fixed study of its
  recommended number of images (``n_images``; groups mixed as in the paper) is then run to
  the end. A second, finer grid (``PLAN_FINE_SIZES``) is also asked, priced only.
- **hindsight-cheapest fixed design**: the paper's fixed study of all ``--images`` images
  (setting off), served group by group; it stops at the first group after which every
  system is settled by the same rule on the answers so far (``adaptive_settled_systems``,
  the platform's own reading). No researcher can choose that size before seeing the
  answers: it is the cheapest fixed design that reaches the adaptive design's decision
  (every system's interval at the target), chosen with hindsight.

The old "hindsight bound" (each system stopped at its first settled group on the adaptive
run's own answers) is deleted: it priced the same answers in the same order, so it equalled
the adaptive cost by construction and bounded nothing.

Compared: judgments (comparisons plus attention checks) of each design; coverage of the
true values by each design's report intervals (``worker_t_interval``, the one the rule
stops on; ``t_interval``; ``bootstrap_interval``); same order of the four systems and same
verdicts against Human (permutation test, 0.05) between the adaptive report and each fixed
design's.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

#: Paper Table 2 (ObjectNet Captions) and Fig. 1 (Human-vs-Human near 0).
HUMANR_MU = {"Human": 0.0, "GIT-L": -0.46, "ExpNet": -0.56, "ClipCap": -0.69}
NOISE_STEPS = 2.0
WORKER_BIAS_STEPS = 0.5
SECONDS_PER_TRIAL = 5
GROUPS_PER_WORKER = 4
#: The finer grid a researcher could give the planner (the form takes at most 8 sizes).
PLAN_FINE_SIZES = "40, 50, 60, 70, 80, 90, 100, 120"
DESIGNS = ("adaptive", "adaptive_unspread", "planner", "hindsight")


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


class Streams:
    """The seed's answers: one noise stream per system, one leaning per worker number."""

    def __init__(self, seed: int):
        self.seed = seed
        self.noise = {name: np.random.default_rng([seed, k]) for k, name in enumerate(HUMANR_MU)}

    def bias(self, worker: int) -> float:
        return float(np.random.default_rng([self.seed, 1_000, worker]).normal(0, WORKER_BIAS_STEPS))

    def oriented(self, system: str, bias: float) -> int:
        lean = 0.0 if system == "Human" else bias
        latent = 5 + 4 * HUMANR_MU[system] + lean + self.noise[system].normal(0, NOISE_STEPS)
        return int(np.clip(np.floor(latent + 0.5), 1, 9))


def humanr_study(owner, *, seed: int, design: int, images: int, settings: dict):
    from annotation.models import Caption, Image
    from annotation.services.studies import study_create, study_open

    study = study_create(
        owner=owner,
        name=f"bench humanr {seed} {DESIGNS[design]}",
        mode="humanr",
        settings=settings,
        seed=seed,
    )
    rows = []
    for index in range(images):
        number = (seed * 10 + design) * 10_000 + index
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
        names = [Caption.HUMAN] * 3 + [name for name in HUMANR_MU if name != "Human"]
        rows += [
            Caption(
                study=study,
                image=image,
                system=system,
                raw_text=f"{system} {k} of {number}",
                text=f"{system} {k} of {number}",
                line=index * 10 + k + 2,
            )
            for k, system in enumerate(names)
        ]
    Caption.objects.bulk_create(rows)
    study_open(study=study)
    study.refresh_from_db()
    return study


class Crowd:
    """Workers who each take up to GROUPS_PER_WORKER groups, answering from ``Streams``."""

    def __init__(self, study, streams: Streams):
        self.study, self.streams = study, streams
        self.number = 0
        self.current = None
        self.bias = 0.0
        self.done = 0

    def _new_worker(self):
        from annotation.models import Participant
        from annotation.services.participants import participant_for_crowd_worker

        self.number += 1
        external_id = f"bench-{self.study.pk}-{self.number}"
        self.current, _ = participant_for_crowd_worker(
            study=self.study,
            source=Participant.Source.PROLIFIC,
            external_id=external_id,
            meta={"PROLIFIC_PID": external_id, "STUDY_ID": "bench", "SESSION_ID": "bench"},
        )
        self.bias = self.streams.bias(self.number)
        self.done = 0

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
            # Checks are passed (2: the correct caption); comparisons from the streams.
            s = (
                2
                if trial["kind"] != "comparison"
                else self.streams.oriented(trial["system"], self.bias)
            )
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


def read_report(result: dict, truth: dict[str, float]) -> dict:
    """Per system: widths and coverage of the three intervals; the order and verdicts."""
    entries = {**result["humanr"]["systems"]}
    if result["humanr"].get("baseline"):
        entries["Human"] = result["humanr"]["baseline"]
    systems = {}
    for name in HUMANR_MU:
        entry = entries.get(name) or {}
        row = {
            "n": entry.get("n_kept"),
            "humanr": entry.get("humanr"),
            "workers": entry.get("n_workers"),
        }
        for key, short in (
            ("worker_t_interval", "worker"),
            ("t_interval", "t"),
            ("bootstrap_interval", "bootstrap"),
        ):
            low, high = entry.get(key) or (None, None)
            row[f"{short}_half_width"] = None if low is None else (high - low) / 2
            row[f"{short}_covers"] = None if low is None else bool(low <= truth[name] <= high)
        systems[name] = row
    models = result["humanr"]["systems"]
    order = [name for name, _ in sorted(models.items(), key=lambda kv: (-kv[1]["humanr"], kv[0]))]
    tests = {
        name: bool((entry.get("vs_baseline") or {}).get("p_value", 1.0) < 0.05)
        for name, entry in models.items()
    }
    return {"systems": systems, "order": order, "tests": tests}


def planner_size(study, sizes: str, target: float) -> dict:
    """The planner's recommendation for ``study`` through the page's and the API's form."""
    from annotation.forms import PlanForm

    form = PlanForm({"sizes": sizes, "target_half_width": target}, mode="humanr")
    if not form.is_valid():
        raise SystemExit(f"planner form refused: {form.errors}")
    plan = form.plan(study)
    best = plan["recommended"]
    return {
        "sizes": sizes,
        "pilot": plan["pilot"],
        "n_images": None if best is None else best["n_images"],
        "judgments": None if best is None else best["judgments"],
        "half_width": None if best is None else best["half_width"],
        "power": None if best is None else best["power"],
    }


def run_design(owner, *, seed, design, images, settings, truth, study=None, stop=None) -> dict:
    """One design's study (``study`` if already made), served until nothing is left or
    ``stop(study)`` says so after a group."""
    from annotation.models import Judgment

    if study is None:
        study = humanr_study(owner, seed=seed, design=design, images=images, settings=settings)
    crowd = Crowd(study, Streams(seed))
    started = time.perf_counter()
    stopped = False
    while crowd.one_group():
        if stop is not None and stop(study):
            stopped = True
            break
    judgments = Judgment.objects.filter(study=study).count()
    seconds = time.perf_counter() - started
    return {
        "judgments": judgments,
        "workers": crowd.number,
        "reached": stopped if stop is not None else None,
        "ms_per_judgment": round(1000 * seconds / max(judgments, 1), 2),
        **read_report(run_report(study, owner), truth),
    }


def humanr_seed(owner, *, seed: int, args, truth: dict[str, float]) -> dict:
    from annotation.modes.humanr.protocol import adaptive_settled_systems

    started = time.perf_counter()
    target = args.target
    run: dict = {"seed": seed}
    for design, spread in ((0, True), (1, False)):
        if spread or args.unspread:
            settings = {"adaptive_target_half_width": target, "adaptive_spread_workers": spread}
            run[DESIGNS[design]] = run_design(
                owner, seed=seed, design=design, images=args.images, settings=settings, truth=truth
            )
    # The fixed study of every image, as the researcher sets it up: the planner is asked on
    # it before anyone judges it (no pilot: the mode's stated assumptions).
    fixed = humanr_study(owner, seed=seed, design=3, images=args.images, settings={})
    asked = time.perf_counter()
    run["plan"] = planner_size(fixed, "20, 50, 100, 200", target)
    run["plan_fine"] = planner_size(fixed, PLAN_FINE_SIZES, target)
    run["plan_seconds"] = round(time.perf_counter() - asked, 1)
    # Its cost is the planner's size whatever the answers; running it (every
    # --planner-every-th seed, to bound the run time) measures its intervals' coverage.
    if run["plan"]["n_images"] is not None and seed % args.planner_every == 0:
        run["planner"] = run_design(
            owner,
            seed=seed,
            design=2,
            images=args.images,
            settings={"n_images": run["plan"]["n_images"]},
            truth=truth,
        )

    def settled(study) -> bool:
        return set(HUMANR_MU) <= adaptive_settled_systems(study.pk, target)

    run["hindsight"] = run_design(
        owner,
        seed=seed,
        design=3,
        images=args.images,
        settings={},
        truth=truth,
        study=fixed,
        stop=settled,
    )
    run["seconds"] = round(time.perf_counter() - started, 1)
    return run


def cost(run: dict, design: str) -> int | None:
    """Judgments of a design in one seed's run (None: not known). The planner-sized design
    costs the planner's own price of its size when its study was not run (the stored count
    when it was: the same number, ``planner_cost_checked`` says how often)."""
    if design == "planner":
        return run["planner"]["judgments"] if "planner" in run else run["plan"]["judgments"]
    if design == "hindsight" and not run["hindsight"]["reached"]:
        return None
    return run[design]["judgments"] if design in run else None


def saving(runs: list[dict], design: str, baseline: str) -> dict:
    """Pooled and per-seed saving of ``design`` against ``baseline`` (seeds with both)."""
    pairs = [
        (r[design]["judgments"], cost(r, baseline))
        for r in runs
        if design in r and cost(r, baseline) is not None
    ]
    if not pairs:
        return {"seeds": 0}
    per_seed = [1 - a / b for a, b in pairs]
    return {
        "seeds": len(pairs),
        "judgments": [sum(a for a, _ in pairs), sum(b for _, b in pairs)],
        "pooled": 1 - sum(a for a, _ in pairs) / sum(b for _, b in pairs),
        "median": statistics.median(per_seed),
        "min": min(per_seed),
        "max": max(per_seed),
        "seeds_at_30": sum(s >= 0.3 for s in per_seed),
    }


def coverage(runs: list[dict], design: str, target: float) -> dict:
    out: dict = {
        # How often the design's worker interval reached the target: the decision the
        # adaptive design makes for every system.
        "worker_within_target": statistics.mean(
            s["worker_half_width"] is not None and s["worker_half_width"] <= target + 1e-12
            for r in runs
            if design in r
            for s in r[design]["systems"].values()
        )
    }
    for short in ("worker", "t", "bootstrap"):
        hits = [
            s[f"{short}_covers"]
            for r in runs
            if design in r
            for s in r[design]["systems"].values()
            if s[f"{short}_covers"] is not None
        ]
        widths = [
            s[f"{short}_half_width"]
            for r in runs
            if design in r
            for s in r[design]["systems"].values()
            if s[f"{short}_half_width"] is not None
        ]
        out[short] = {
            "coverage": sum(hits) / len(hits) if hits else None,
            "intervals": len(hits),
            "half_width_mean": statistics.mean(widths) if widths else None,
            "half_width_max": max(widths) if widths else None,
        }
    return out


def floor(runs: list[dict]) -> dict:
    """The least any serving order of the adaptive mode can spend, and so the most it can
    save against the planner-sized design (a bound, unlike the deleted one).

    Argument: with ``adaptive_target_half_width`` on, every group holds one system's
    comparisons (``build_system_groups``), and a system is settled only once at least
    ``ADAPTIVE_MIN_WORKERS`` distinct workers have a finished, kept group of it
    (``counted_values`` reads finished groups only; one vote per worker). So whatever the
    answers and whatever the order groups are served in, each system takes at least that
    many groups, each of 9 comparisons and 1 check at 270 images (270 = 30 x 9: no short
    group): ``systems x ADAPTIVE_MIN_WORKERS x 10`` judgments.
    """
    from annotation.modes.humanr.allocation import ADAPTIVE_MIN_WORKERS

    least = len(HUMANR_MU) * ADAPTIVE_MIN_WORKERS * 10
    planned = [r["plan"]["judgments"] for r in runs]
    fine = [r["plan_fine"]["judgments"] for r in runs if r["plan_fine"]["judgments"]]
    return {
        "least_judgments": least,
        "max_saving_vs_planner": 1 - least * len(planned) / sum(planned),
        "max_saving_vs_planner_fine": None if not fine else 1 - least * len(fine) / sum(fine),
        "seeds_at_floor": sum(r["adaptive"]["judgments"] == least for r in runs),
    }


def humanr_summary(runs: list[dict], args) -> dict:
    """The pooled numbers over ``runs`` (also of runs merged from several processes)."""
    import annotation

    designs = [d for d in DESIGNS if any(d in r for r in runs)]
    fine = [r["plan_fine"]["judgments"] for r in runs if r.get("plan_fine", {}).get("judgments")]
    fine_pairs = [
        (r["adaptive"]["judgments"], r["plan_fine"]["judgments"])
        for r in runs
        if r.get("plan_fine", {}).get("judgments")
    ]
    agree = {}
    for baseline in ("planner", "hindsight"):
        both = [r for r in runs if baseline in r]
        agree[baseline] = {
            "seeds": len(both),
            "same_order": sum(r["adaptive"]["order"] == r[baseline]["order"] for r in both),
            "same_verdicts": sum(r["adaptive"]["tests"] == r[baseline]["tests"] for r in both),
        }
    return {
        "code_path": (
            "study_create + study_open (HumanrProtocol.build_items) -> assignment_next "
            "(eligible_items -> adaptive_settled_groups, judged_systems_groups) -> "
            "judgment_submit -> report_request + job_run (HumanrReport); planner: "
            "PlanForm -> study_plan; hindsight stop: adaptive_settled_systems"
        ),
        "code_imported_from": str(Path(annotation.__file__).resolve().parent),
        "seeds": len(runs),
        "images": args.images,
        "target_half_width": args.target,
        "mu": HUMANR_MU,
        "true_humanr": truths(),
        "noise_steps": NOISE_STEPS,
        "worker_bias_steps": WORKER_BIAS_STEPS,
        "judgments_mean": {
            d: statistics.mean(r[d]["judgments"] for r in runs if d in r) for d in designs
        }
        | {"planner_priced": statistics.mean(r["plan"]["judgments"] for r in runs)},
        "planner_cost_checked": [
            sum(
                r["planner"]["judgments"] == r["plan"]["judgments"] for r in runs if "planner" in r
            ),
            sum("planner" in r for r in runs),
        ],
        "planner_images": sorted({r["plan"]["n_images"] for r in runs}, key=str),
        "planner_fine_images": sorted({r["plan_fine"]["n_images"] for r in runs}, key=str),
        "planner_fine_judgments_mean": statistics.mean(fine) if fine else None,
        "hindsight_reached": sum(bool(r["hindsight"]["reached"]) for r in runs),
        "saving": {
            f"{d}_vs_{b}": saving(runs, d, b)
            for d in ("adaptive", "adaptive_unspread")
            for b in ("planner", "hindsight")
            if d in designs
        }
        | {"adaptive_vs_adaptive_unspread": saving(runs, "adaptive", "adaptive_unspread")},
        "plan_seconds_median": statistics.median(r["plan_seconds"] for r in runs),
        "saving_adaptive_vs_planner_fine_pooled": None
        if not fine_pairs
        else 1 - sum(a for a, _ in fine_pairs) / sum(b for _, b in fine_pairs),
        "coverage": {d: coverage(runs, d, args.target) for d in designs},
        "floor": floor(runs),
        "agreement_with_adaptive": agree,
        "ms_per_judgment_median": statistics.median(r["adaptive"]["ms_per_judgment"] for r in runs),
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }


def humanr_part(args, partial: Path | None = None) -> dict:
    import json

    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("bench-humanr", is_researcher=True)
    truth = truths()
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run = humanr_seed(owner, seed=seed, args=args, truth=truth)
        runs.append(run)
        line = ", ".join(f"{d} {run[d]['judgments']}" for d in DESIGNS if d in run)
        print(
            f"seed {seed}: {line} (planner {run['plan']['n_images']} images), {run['seconds']} s",
            flush=True,
        )
        if partial is not None:  # what is done so far, should the run be cut short
            partial.write_text(json.dumps({"runs": runs}, indent=2))
    return {"summary": humanr_summary(runs, args), "runs": runs}
