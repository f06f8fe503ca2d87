"""Benchmark the arena mode (issue 23; not a test): adaptive against uniform pairing and
the leaderboard fit at 1,000,000 battles.

    .venv/bin/python bench/arena.py [--part all|design|fit] [--seeds 20] [--first-seed 1]
        [--systems 6] [--images 200] [--budget 480] [--step 30] [--workers 40] [--clickers 3]
        [--designs uniform,adaptive|uniform|adaptive] [--tag=-x]
        [--crowd even|uneven14] [--goal order|top] [--top 4] [--keep FILE]
    .venv/bin/python bench/arena.py --part summary --inputs FILE[,FILE...] [--keep FILE] ...

The defaults fit this 2-core machine: 6 systems, 200 images (200 battles per pair, so a
concentrated design never runs out of its favoured pair), 480 battles per study, a report
every 30 battles, 20 seeds x 2 designs: about 15 s a study on a quiet machine (0.5 s a
report job), 40-90 s under load. Issue 47's runs (14 systems, 1,000 images, 10,000 battles)
take 4-10 minutes a study: 21-48 ms a served and answered battle on SQLite, two processes
side by side, on the machines so far (``bench/results-arena.md``).
``--designs`` runs one design only (two processes can then share the seeds; the studies
are the same, built from the seed), ``--tag`` names the result files apart.

``--keep FILE`` also adds each finished run to a kept file (``bench/arena-runs/*.json.gz``,
committed): one setting's seeds, measured over several sessions, summarised together with
``--part summary --inputs FILE``. Each run records the commit that ran it; a seed already
kept must come out the same (the runs are seeded, never by database ids), or the run is
refused: a file never mixes the outcomes of two designs' code.
A summary may also take the uniform runs of a file kept for another goal (a uniform study
never reads the goal): ``--goal order --inputs order.json.gz,top4.json.gz`` pairs the
order goal's adaptive seeds with the uniform seeds kept for the top 4.

``design``: each seed is its own study in one scratch SQLite file (migrated once), run twice:
the mode's default settings (uniform pairing), and the same with ``adaptive=True``. The crowd
answers through ``assignment_next`` and ``judgment_submit`` (the calls the views make, as
``annotation/services/simulation.py`` does) until ``--budget`` battle judgments are stored;
every ``--step`` battles a report job is run by ``services.runner.job_run`` (the Celery
task's code path) and its stored leaderboard is scored (``report_at_checkpoint``): the
platform's own refresh when the beat's ``reports_refresh`` finds the adaptive study due
(``adaptive_refresh``, 250 battles by default: every checkpoint of ``--step 250``), else a
researcher's ``report_request``. The adaptive design reads the latest report's covariance
for the next draws, as it does live.

Assumptions of the simulated crowd (stated, not measured):

- ``--systems`` systems with true Bradley-Terry strengths evenly spaced over
  [-1.5, 1.5] natural log-odds (6 systems: adjacent ones 65% of decisive battles);
- honest workers answer the Bradley-Terry choice of the two captions' strengths; with
  probability 0.05 they pick the caption shown left whatever it is (the 5% position bias);
  they never tie;
- ``--clickers`` of the ``--workers`` workers (default 3 of 40) click one of the four
  outcomes at random on every battle, gold battles included;
- every worker takes 6 to 20 s per battle (the server's clock, so ``min_seconds`` = 5 holds);
  workers arrive round by round, one battle each, as in ``crowd_simulate``.

``--crowd uneven14`` replaces the even strengths by issue 47's uneven 14-system crowd (the
audit's Elo 1127 ... 955, 720); ``--goal`` is the adaptive study's goal (the whole order,
or the ``--top`` best systems), and each checkpoint also records whether the top set is
right, for the plain leaderboard and for the weighted fit beside it; the summary gives the
budget from which 90% of the seeds have it right (a lower bound on the saving when uniform
pairing never gets there within the budget) and, beside it, ``top_design_share``: what the
rule's own design would need had it known the truth from the first battle, by the plain
fit's normal approximation (a yardstick, not a bound on every design).

Scored at every checkpoint, per design: Kendall tau of the leaderboard's order with the
true order, and coverage: the share of systems whose 95% interval holds its true score.
The true score is the estimand of the fit: Bradley-Terry fitted (``rubrics.arena.fit``) to
the honest crowd's expected outcome shares per pair with equal weight per pair (the
position bias averaged over random sides makes the raw strengths unreachable: a pair
with win probability p is seen as 0.95 p + 0.025); coverage of the raw strengths is shown
too. "Battles to tau >= 0.9": the first checkpoint from which tau stays >= 0.9 to the
budget (budget + step when never), per seed; compared by the median over seeds and seed by
seed (``--part summary``: the saving of the medians and means, and a paired sign count).

``fit``: ``bench/arena_fit.py`` (1,000,000 battles through ``count_table`` + ``fit``, the
report's fitting functions) as a subprocess. Judgments/s of the battle page through
gunicorn beside ``bench/humanr_load.py``: ``bench/arena_load.py``. Results:
``bench/results/arena-<part>.json``; summary: ``bench/results-arena.md``.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

POSITION_BIAS = 0.05
SPREAD = 1.5
TAU_TARGET = 0.9


def setup_django() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="capeval-bench-arena-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["CAPEVAL_VAR_DIR"] = str(scratch)
    os.environ.pop("REDIS_URL", None)
    # As a deployment runs: with DEBUG on, Django's cursor formats and keeps every
    # statement's text (``last_executed_query``), which no answer or report reads.
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return scratch


#: Issue 47's uneven crowd (the audit's Elo): some neighbours 6-7 apart, one gap of 235.
UNEVEN_ELO = (1127, 1108, 1096, 1090, 1075, 1068, 1050, 1043, 1030, 1005, 998, 975, 955, 720)


def strengths(k: int, crowd: str = "even") -> np.ndarray:
    """True strengths in natural log-odds, in the systems' order (names system-00, ...)."""
    if crowd == "uneven14":
        return (np.array(UNEVEN_ELO, dtype=float) - 1000) * np.log(10) / 400
    return np.linspace(-SPREAD, SPREAD, k)


def top_set(scores: dict[str, float], k: int) -> set[str]:
    """The names of the ``k`` highest scores."""
    return set(sorted(scores, key=lambda name: -scores[name])[:k])


def estimand(names: list[str], s: np.ndarray) -> dict[str, float]:
    """The score the fit converges to on the honest crowd with equal weight per pair."""
    from rubrics import arena as rules

    a, b, out, w = [], [], [], []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            p = 1 / (1 + np.exp(-(s[i] - s[j])))
            seen = (1 - POSITION_BIAS) * p + POSITION_BIAS / 2
            a += [names[i], names[i]]
            b += [names[j], names[j]]
            out += ["model_a", "model_b"]
            w += [seen, 1 - seen]
    fitted = rules.fit(rules.count_table(a, b, out, np.array(w)))
    return dict(zip(fitted.systems, map(float, fitted.scores), strict=True))


def build_study(
    owner, *, seed: int, names: list[str], images: int, adaptive: bool, goal: dict | None = None
):
    from annotation.models import Caption, Image
    from annotation.services.studies import study_create, study_open

    settings = {"adaptive": True, **(goal or {})} if adaptive else {}
    study = study_create(
        owner=owner,
        name=f"bench arena {seed} {'adaptive' if adaptive else 'uniform'}",
        mode="arena",
        settings=settings,
        seed=seed,
    )
    rng = random.Random(seed)
    captions = []
    for index in range(images):
        number = seed * 100_000 + index + (50_000 if adaptive else 0)
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
        for k, system in enumerate(names):
            # Lengths independent of the system: no length preference is planted here.
            text = " ".join(["word"] * rng.randint(60, 200))
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=text,
                    text=text,
                    line=index * len(names) + k + 2,
                )
            )
    Caption.objects.bulk_create(captions)
    study_open(study=study)
    study.refresh_from_db()
    return study


def answer(lease, strength: dict[str, float], clicker: bool, rng: random.Random) -> str:
    """The outcome as the page posts it (sides as shown)."""
    from annotation.modes.arena.protocol import CATCH, left_is_a

    if clicker:
        return rng.choice(["a", "b", "tie", "bothbad"])
    left_a = left_is_a(lease.participant.study, lease)
    if rng.random() < POSITION_BIAS:
        return "a"
    spec = lease.item.spec
    if lease.item.kind == CATCH:
        canonical_a_wins = True  # the real caption beats its alteration
    else:
        d = strength[spec["system_a"]] - strength[spec["system_b"]]
        canonical_a_wins = rng.random() < 1 / (1 + np.exp(-d))
    return "a" if canonical_a_wins == left_a else "b"


def run_design(owner, *, seed, names, s, truth, args, adaptive: bool) -> dict:
    from scipy.stats import kendalltau

    from annotation.errors import ServiceError
    from annotation.models import Judgment, Participant
    from annotation.services.assignments import assignment_next
    from annotation.services.judgments import judgment_submit
    from annotation.services.participants import participant_for_crowd_worker

    goal = {"adaptive_goal": args.goal, "adaptive_top": args.top}
    study = build_study(
        owner, seed=seed, names=names, images=args.images, adaptive=adaptive, goal=goal
    )
    true_top = top_set(dict(zip(names, s, strict=True)), args.top)
    strength = dict(zip(names, s, strict=True))
    raw_truth = {
        n: float(v) for n, v in zip(names, 1000 + 400 / np.log(10) * (s - s.mean()), strict=True)
    }
    crowd = []
    for number in range(args.workers):
        external_id = f"bench-{seed}-{number}"
        participant, _ = participant_for_crowd_worker(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=external_id,
            meta={"PROLIFIC_PID": external_id, "STUDY_ID": "bench", "SESSION_ID": "bench"},
        )
        crowd.append((participant, number < args.clickers, random.Random(f"{seed}:{number}")))
    checkpoints = []
    battles = 0
    refusals = 0
    serve_submit = 0.0
    report_seconds = []
    next_check = args.step
    reported = 0  # battles at the last checkpoint's report
    started = time.perf_counter()
    while battles < args.budget and crowd:
        still = []
        for participant, clicker, rng in crowd:
            if battles >= next_check or battles >= args.budget:
                still.append((participant, clicker, rng))
                continue
            t0 = time.perf_counter()
            try:
                lease = assignment_next(participant=participant)
                if lease is None:
                    continue
                judgment_submit(
                    participant=participant,
                    token=lease.token,
                    data={"outcome": answer(lease, strength, clicker, rng)},
                    part=0,
                    now=lease.served_at + timedelta(seconds=rng.uniform(6, 20)),
                )
            except ServiceError:
                refusals += 1
                continue
            serve_submit += time.perf_counter() - t0
            # One battle judgment stored per answered battle lease (gold battles are not
            # counted); checked against the table at every checkpoint below.
            battles += lease.item.kind == "battle"
            still.append((participant, clicker, rng))
        crowd = still
        if battles >= next_check or not crowd:
            stored = Judgment.objects.filter(study=study, item__kind="battle").count()
            if stored != battles:
                raise SystemExit(f"{stored} battle judgments stored, {battles} answered")
            t0 = time.perf_counter()
            job = report_at_checkpoint(study, owner, battles - reported)
            reported = battles
            report_seconds.append(time.perf_counter() - t0)
            board = job.result["leaderboard"]
            fitted = {row["system"]: row["score"] for row in board}
            if set(fitted) != set(names):
                # Too few battles for a fit (a system unmet, or a graph not strongly
                # connected: the report says why): scored as not reached, nothing covered.
                checkpoints.append(
                    {
                        "battles": battles,
                        "kept": job.result["battles"],
                        "tau": -1.0,
                        "coverage": 0.0,
                        "raw_coverage": 0.0,
                        "mean_ci_width": None,
                        "fit_error": job.result.get("leaderboard_error", "systems missing"),
                    }
                )
                next_check += args.step
                continue
            tau = float(kendalltau([fitted[n] for n in names], list(s)).statistic)
            coverage = np.mean(
                [row["ci_low"] <= truth[row["system"]] <= row["ci_high"] for row in board]
            )
            raw_coverage = np.mean(
                [row["ci_low"] <= raw_truth[row["system"]] <= row["ci_high"] for row in board]
            )
            checkpoints.append(
                {
                    "battles": battles,
                    "kept": job.result["battles"],
                    "tau": round(tau, 4),
                    "coverage": float(coverage),
                    # Which intervals missed the estimand: the adaptive design's coverage
                    # dips below the uniform one's, and the summary counts where.
                    "missed": sorted(
                        row["system"]
                        for row in board
                        if not row["ci_low"] <= truth[row["system"]] <= row["ci_high"]
                    ),
                    "raw_coverage": float(raw_coverage),
                    "mean_ci_width": float(np.mean([r["ci_high"] - r["ci_low"] for r in board])),
                    "weighted": job.result.get("weighted"),
                    "top_right": top_set(fitted, args.top) == true_top,
                    # The weighted fit beside the plain one (adaptive designs, issue 47).
                    **_weighted_scores(job.result.get("weighted_leaderboard"), names, s, args),
                    # What was served and what the design serves next (issue 47: does the
                    # adaptive study serve its design's pairs?).
                    **_pairs_traced(study),
                }
            )
            next_check += args.step
    excluded = Judgment.objects.filter(study=study, excluded=True).count()
    return {
        "seed": seed,
        "design": "adaptive" if adaptive else "uniform",
        "checkpoints": checkpoints,
        "battles": battles,
        "judgments": Judgment.objects.filter(study=study).count(),
        "excluded": excluded,
        "refusals": refusals,
        "serve_submit_ms_mean": round(1000 * serve_submit / max(battles, 1), 2),
        "report_seconds_mean": round(statistics.mean(report_seconds), 3),
        "seconds": round(time.perf_counter() - started, 1),
        "code": code_id(),
    }


def report_at_checkpoint(study, owner, since: int):
    """The report scored at a checkpoint, finished. First the beat's minute
    (``reports_refresh``, what ``tasks.refresh_reports`` runs: the crowd answers about 275
    battles a minute, near the default ``adaptive_refresh`` of 250): an adaptive study due
    a refresh gets the platform's own report, which its design then reads, as live. Else
    (a uniform study; a step shorter than ``adaptive_refresh``; the crowd's last battles)
    the researcher asks for one to read, which an adaptive design reads too. An adaptive
    study left unrefreshed after ``since`` >= ``adaptive_refresh`` battles since the last
    report stops the bench: it would measure a path the platform does not take."""
    from annotation.models import Job
    from annotation.modes import get_mode
    from annotation.services.reports import report_request, reports_refresh
    from annotation.services.runner import job_run

    refreshed = reports_refresh()
    for job in refreshed:  # the worker runs every queued report, this study's or not
        job_run(job=job)
    mine = [job for job in refreshed if job.study_id == study.pk]
    config = get_mode(study.mode).settings(study)
    if config.adaptive and not mine and 0 < config.adaptive_refresh <= since:
        raise SystemExit(f"study {study.pk}: not refreshed after {since} battles")
    if mine:
        job = mine[0]
    else:
        job = report_request(study=study, user=owner)
        job_run(job=job)
    job.refresh_from_db()
    if job.status != Job.Status.DONE:
        raise SystemExit(f"report failed: {job.error}")
    return job


def _pairs_traced(study) -> dict:
    """Battles stored so far per system pair (``"a|b"``, a < b), and the pair probabilities
    the study serves by until the next report (the mode's own ``pair_probabilities``,
    which the report just refitted: uniform for a uniform study)."""
    from annotation.models import Judgment
    from annotation.modes import get_mode

    served = Counter(
        "|".join(sorted(pair))
        for pair in Judgment.objects.filter(study=study, item__kind="battle").values_list(
            "item__spec__system_a", "item__spec__system_b"
        )
    )
    design = get_mode(study.mode).pair_probabilities(study)
    return {
        "pairs_served": dict(sorted(served.items())),
        "design_next": {"|".join(sorted(pair)): round(p, 5) for pair, p in design.items()},
    }


def _weighted_scores(board, names, s, args) -> dict:
    """The weighted fit's tau and top-set at a checkpoint, when the report has one."""
    from scipy.stats import kendalltau

    fitted = {row["system"]: row["score"] for row in board or []}
    if set(fitted) != set(names):
        return {}
    true_top = top_set(dict(zip(names, s, strict=True)), args.top)
    tau = float(kendalltau([fitted[n] for n in names], list(s)).statistic)
    return {
        "weighted_tau": round(tau, 4),
        "weighted_top_right": top_set(fitted, args.top) == true_top,
    }


def code_id() -> str:
    """The commit of the code that ran (``+changes`` when the tree differs from it)."""

    def git(*words):
        return subprocess.run(
            ["git", *words], capture_output=True, text=True, cwd=ROOT, timeout=30
        ).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


#: What a seed's run has that another run of the same seed need not share: its timings and
#: the code's commit. Everything else is the seeded study's outcome.
TIMINGS = ("seconds", "serve_submit_ms_mean", "report_seconds_mean", "code")
#: The settings a kept file's runs must share (``--keep``).
KEPT_SETTINGS = (
    "crowd",
    "goal",
    "top",
    "systems",
    "images",
    "workers",
    "clickers",
    "budget",
    "step",
)


def kept_settings(args) -> dict:
    """The settings a kept file records (``KEPT_SETTINGS``), from the command line."""
    return {name: getattr(args, name) for name in KEPT_SETTINGS}


def compact(run: dict) -> dict:
    """A run as kept in the repository: the per-pair traces of the last checkpoint only
    (the served battles and the design there), every other checkpoint's outcome whole."""
    points = [
        {k: v for k, v in point.items() if k not in ("pairs_served", "design_next")}
        for point in run["checkpoints"]
    ]
    if points:
        points[-1] = run["checkpoints"][-1]
    return {**run, "checkpoints": points}


def read_runs(
    path: Path, settings: dict | None = None, *, lend_uniform: bool = False
) -> list[dict]:
    """Runs from a partial file (a list) or a kept file (``{"settings", "runs"}``, gzip);
    a kept file must have been kept with ``settings`` when they are given (a summary with
    another budget or step would score its runs wrongly).

    ``lend_uniform`` (the summary): a kept file whose settings differ from ``settings`` in
    the goal alone gives its uniform runs. A uniform study is built without the goal
    (``build_study``) and scored with ``--top`` whatever the goal, so its run is the same
    for every goal; the seeds of one uniform file then pair with each goal's adaptive runs.
    """
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as handle:
            data = json.load(handle)
    else:
        data = json.loads(path.read_text())
    if isinstance(data, list):
        return data
    if settings is None or data["settings"] == settings:
        return data["runs"]
    if lend_uniform and {**data["settings"], "goal": settings["goal"]} == settings:
        return [run for run in data["runs"] if run["design"] == "uniform"]
    raise SystemExit(f"{path} holds runs of other settings: {data['settings']}")


def same_outcome(a, b) -> bool:
    """``a == b``, floats equal to 1e-9 relative. Another machine's BLAS rounds the
    interval widths differently in the last bits (seed 1 on two machines: 136.89994147954266
    against ...263), which is not another outcome."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_outcome(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_outcome, a, b))
    return a == b


def known_fields(new, old):
    """``new`` cut to the fields ``old`` has, at every depth (a checkpoint recorded since
    with a field more, ``missed`` since 2f3b2b7, compares on the fields both have)."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: known_fields(v, old[k]) for k, v in new.items() if k in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [known_fields(a, b) for a, b in zip(new, old, strict=True)]
    return new


def keep_runs(path: Path, runs: list[dict], settings: dict) -> dict[str, int]:
    """Add ``runs`` to the kept file at ``path`` (made if missing), one run per seed and
    design. A seed already kept must have come out the same, timings and code apart: the
    runs are seeded, so a difference means the code changed what it serves, and the file
    would then mix two designs; refused. Returns how many runs were added and re-found.
    Two processes (one per design) may keep into one file: a lock file orders them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _keep_locked(path, runs, settings)


def _keep_locked(path: Path, runs: list[dict], settings: dict) -> dict[str, int]:
    kept = read_runs(path, settings) if path.exists() else []
    index = {(r["seed"], r["design"]): r for r in kept}
    added = same = 0
    for run in map(compact, runs):
        old = index.get((run["seed"], run["design"]))
        if old is None:
            index[(run["seed"], run["design"])] = run
            added += 1
            continue
        outcome = {k: v for k, v in run.items() if k not in TIMINGS}
        before = {k: v for k, v in old.items() if k not in TIMINGS}
        # Every field the kept run has must come out the same (a field it lacks must be
        # new, not lost); a run that recorded more replaces it, its code and timings too.
        if not same_outcome(known_fields(outcome, before), before):
            raise SystemExit(
                f"seed {run['seed']} {run['design']} came out differently from the kept run "
                f"(code {old.get('code')} against {run.get('code')}): not kept"
            )
        if known_fields(outcome, before) != outcome:
            index[(run["seed"], run["design"])] = run
        same += 1
    kept = {"settings": settings, "runs": [index[key] for key in sorted(index)]}
    # mtime=0: the same runs give the same bytes, so git sees no change for a re-found seed.
    with gzip.GzipFile(path, "wb", mtime=0) as raw:
        raw.write((json.dumps(kept, indent=1, sort_keys=True) + "\n").encode())
    return {"added": added, "reproduced": same, "kept": len(kept["runs"])}


def battles_to_share(runs: list[dict], key: str, share: float = 0.9) -> int | None:
    """The first checkpoint from which at least ``share`` of the seeds have ``key`` true at
    every later checkpoint (None: never). A checkpoint a seed lacks counts as false."""
    by_battles: dict[int, list[bool]] = {}
    for run in runs:
        for point in run["checkpoints"]:
            by_battles.setdefault(point["battles"], []).append(bool(point.get(key)))
    reached = None
    for battles in sorted(by_battles, reverse=True):
        if sum(by_battles[battles]) / len(runs) < share:
            break
        reached = battles
    return reached


def design_matrices(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For true strengths ``s`` (natural log-odds, in rank order): each pair's contrast row
    ``x_p = e_i - e_j`` (i < j), the information ``I_p`` of one battle of it, and the
    adjacent contrasts ``e_r - e_(r+1)``."""
    k = len(s)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    x = np.zeros((len(pairs), k))
    for row, (i, j) in enumerate(pairs):
        x[row, i], x[row, j] = 1.0, -1.0
    win = 1 / (1 + np.exp(-(x @ s)))
    return x, win * (1 - win), np.eye(k)[:-1] - np.eye(k)[1:]


def design_bound(s: np.ndarray) -> dict[str, float]:
    """What any pairing design can save at the true strengths, asymptotically (no crowd).

    The weighted (IPW) fit's variance of a contrast c is sum_p (c' H^-1 x_p)^2 I_p / q_p
    per battle (``rubrics.arena.adaptive_pair_probabilities``' formula, H the uniform
    design's information); the best static design q is Neyman's. The ratio of its variance
    to the uniform design's is the share of battles it needs for the same precision: for
    the five adjacent contrasts weighted alike (the order as a whole) and for one contrast
    alone (the most an adaptive design can gain while one order is the only doubt).
    """
    x, info, adjacent = design_matrices(s)
    k = len(s)
    lever = adjacent @ np.linalg.pinv(x.T @ (info[:, None] * x)) @ x.T
    out = {}
    for name, rows in (("all_adjacent", lever), ("one_adjacent", lever[k // 2 - 1 : k // 2])):
        need = info * (rows**2).sum(axis=0)
        out[name] = round(float(np.sqrt(need).sum() ** 2 / (len(info) * need.sum())), 3)
    return out


#: Draws of the normal approximation in ``top_design_share`` (common to every N and design,
#: so the chance of the right set grows with N draw by draw and bisection is exact).
TOP_DRAWS = 4000


def top_design_share(truth: dict[str, float], top: int, explore: float = 0.2) -> dict:
    """What the adaptive rule's own design could save for the top set, had it known the
    truth from the first battle (no crowd, no platform; a yardstick for the measured
    figure, not a bound on every design).

    At the estimand's scores (Elo, ``estimand``) the plain fit's scores after N battles of
    a design q are about normal with covariance ``H(q)^+ / N`` (``H(q) = sum_p q_p I_p x_p
    x_p'``). ``battles_p90``: the N from which the top ``top`` set is right in 90% of
    ``TOP_DRAWS`` draws, for the uniform design and for
    ``rubrics.arena_design.adaptive_pair_probabilities`` at the true scores (goal ``top``,
    the plain fit, ``explore`` spread uniformly, the flip weights from the uniform design's
    covariance at uniform's own N). ``share``: the second over the first.
    """
    from rubrics import arena as rules
    from rubrics import arena_design

    names = sorted(truth)
    elo = np.array([truth[n] for n in names])
    k = len(names)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    x = np.zeros((len(pairs), k))
    for row, (i, j) in enumerate(pairs):
        x[row, i], x[row, j] = 1.0, -1.0
    win = rules.logistic((x @ elo) / rules.ELO_PER_NATURAL)
    info = win * (1 - win)
    best = set(np.argsort(-elo)[:top])
    noise = np.random.default_rng(47).standard_normal((TOP_DRAWS, k))

    def covariance(q: np.ndarray, n: float) -> np.ndarray:
        # On the Elo scale: the information is per natural unit.
        return np.linalg.pinv(x.T @ ((q * info)[:, None] * x)) * rules.ELO_PER_NATURAL**2 / n

    def right_share(q: np.ndarray, n: float) -> float:
        values, vectors = np.linalg.eigh(covariance(q, n))
        draws = elo + (noise * np.sqrt(np.clip(values, 0, None))) @ vectors.T
        tops = np.argsort(-draws, axis=1)[:, :top]
        return float(np.mean([set(row) == best for row in tops]))

    def battles_p90(q: np.ndarray) -> int:
        low, high = 10.0, 10.0**7
        while high / low > 1.01:
            mid = np.sqrt(low * high)
            low, high = (mid, high) if right_share(q, mid) < 0.9 else (low, mid)
        return int(round(high))

    uniform = np.full(len(pairs), 1 / len(pairs))
    n_uniform = battles_p90(uniform)
    _, rule = arena_design.adaptive_pair_probabilities(
        elo, covariance(uniform, n_uniform), explore, pairs, goal="top", top=top, fit="plain"
    )
    n_rule = battles_p90(rule)
    return {
        "battles_p90_uniform": n_uniform,
        "battles_p90_rule_at_truth": n_rule,
        "share": round(n_rule / n_uniform, 3),
        "draws": TOP_DRAWS,
    }


def battles_to_target(run: dict, budget: int, step: int) -> int:
    """First checkpoint from which tau stays >= the target (budget + step when never)."""
    reached = budget + step
    for point in reversed(run["checkpoints"]):
        if point["tau"] < TAU_TARGET:
            break
        reached = point["battles"]
    return reached


def summarise(runs: list[dict], budget: int, step: int) -> dict:
    """Per design: battles to tau >= 0.9, coverage per checkpoint; then the paired saving.

    With both designs present, only the seeds both ran count: a seed one process ran ahead
    of the other (kept for a later session to pair) would weigh on one side only."""
    summary = {}
    designs = {r["design"] for r in runs}
    if {"uniform", "adaptive"} <= designs:
        both = {r["seed"] for r in runs if r["design"] == "uniform"} & {
            r["seed"] for r in runs if r["design"] == "adaptive"
        }
        summary["unpaired_runs_left_out"] = sum(r["seed"] not in both for r in runs)
        runs = [r for r in runs if r["seed"] in both]
    for design in ("uniform", "adaptive"):
        mine = [r for r in runs if r["design"] == design]
        if not mine:
            continue
        needed = [battles_to_target(r, budget, step) for r in mine]
        by_checkpoint = {}
        for point in (p for r in mine for p in r["checkpoints"]):
            by_checkpoint.setdefault(point["battles"], []).append(point)
        summary[design] = {
            "battles_to_tau_median": statistics.median(needed),
            "battles_to_tau_mean": statistics.mean(needed),
            "reached_within_budget": sum(n <= budget for n in needed),
            "final_coverage_mean": statistics.mean(r["checkpoints"][-1]["coverage"] for r in mine),
            "final_raw_coverage_mean": statistics.mean(
                r["checkpoints"][-1]["raw_coverage"] for r in mine
            ),
            "per_checkpoint": {
                str(b): {
                    "runs": len(points),
                    "tau_mean": round(statistics.mean(p["tau"] for p in points), 4),
                    "tau_ge_target_share": round(
                        statistics.mean(p["tau"] >= TAU_TARGET for p in points), 3
                    ),
                    "coverage_mean": round(statistics.mean(p["coverage"] for p in points), 4),
                    # The top set's shares (a checkpoint without the key counts as wrong,
                    # as in battles_to_share): the results' tables read these.
                    "top_right_share": round(
                        statistics.mean(bool(p.get("top_right")) for p in points), 3
                    ),
                    "weighted_top_right_share": round(
                        statistics.mean(bool(p.get("weighted_top_right")) for p in points), 3
                    ),
                    "fits_failed": sum(p["mean_ci_width"] is None for p in points),
                    "ci_width_mean": round(
                        statistics.mean(
                            [p["mean_ci_width"] for p in points if p["mean_ci_width"] is not None]
                            or [float("nan")]
                        ),
                        1,
                    ),
                }
                for b, points in sorted(by_checkpoint.items())
            },
            "serve_submit_ms_mean": round(
                statistics.mean(r["serve_submit_ms_mean"] for r in mine), 2
            ),
            "report_seconds_mean": round(
                statistics.mean(r["report_seconds_mean"] for r in mine), 3
            ),
            "coverage_all_checkpoints": round(
                statistics.mean(p["coverage"] for r in mine for p in r["checkpoints"]), 4
            ),
            # Misses per system over the checkpoints that record them (runs kept before
            # the record have none): where the intervals fall short.
            "missed_by_system": dict(
                sorted(
                    Counter(
                        name for r in mine for p in r["checkpoints"] for name in p.get("missed", ())
                    ).items()
                )
            ),
            "checkpoints_with_misses_recorded": sum(
                "missed" in p for r in mine for p in r["checkpoints"]
            ),
            # The issue asks >= 0.90 at every checkpoint: the lowest checkpoint's mean.
            "coverage_lowest_checkpoint": min(
                (round(statistics.mean(p["coverage"] for p in points), 4), b)
                for b, points in by_checkpoint.items()
            ),
            # Issue 47's goals: the budget from which 90% of the seeds have the top set
            # right (plain fit, and the weighted fit where the report has one).
            "battles_to_top_right_p90": battles_to_share(mine, "top_right"),
            "battles_to_top_right_p90_weighted": battles_to_share(mine, "weighted_top_right"),
        }
    if "uniform" in summary and "adaptive" in summary:
        # Paired by seed: the same study data and the same seeded workers; the pair drawn
        # and the side shown come from the seed and the worker, never a database id.
        u_runs = {r["seed"]: r for r in runs if r["design"] == "uniform"}
        a_runs = {r["seed"]: r for r in runs if r["design"] == "adaptive"}
        seeds = sorted(set(u_runs) & set(a_runs))
        pairs = [
            (battles_to_target(u_runs[x], budget, step), battles_to_target(a_runs[x], budget, step))
            for x in seeds
        ]
        summary["paired"] = {
            "seeds": len(seeds),
            "adaptive_fewer": sum(a < u for u, a in pairs),
            "equal": sum(a == u for u, a in pairs),
            "adaptive_more": sum(a > u for u, a in pairs),
            "saving_of_medians": round(
                1 - statistics.median(a for _, a in pairs) / statistics.median(u for u, _ in pairs),
                3,
            ),
            "saving_of_means": round(
                1 - statistics.mean(a for _, a in pairs) / statistics.mean(u for u, _ in pairs), 3
            ),
        }
    if "uniform" in summary and "adaptive" in summary:
        # Issue 47's top-set target: the budget from which 90% of the seeds have the set
        # right, per design. A design that never gets there within the budget needs more
        # than the budget, so its saving is then a lower bound.
        u_top = summary["uniform"]["battles_to_top_right_p90"]
        a_top = summary["adaptive"]["battles_to_top_right_p90"]
        summary["top_right_p90"] = {
            "uniform": u_top if u_top is not None else f"> {budget}",
            "adaptive": a_top if a_top is not None else f"> {budget}",
            "saving": (
                round(1 - a_top / u_top, 3)
                if u_top is not None and a_top is not None
                else f"> {round(1 - a_top / budget, 3)}"
                if a_top is not None
                else None
            ),
        }
    summary["target"] = "adaptive >= 30% fewer battles to tau >= 0.9, coverage >= 0.90"
    return summary


def design_part(args) -> dict:
    setup_django()
    from annotation.models import User

    owner = User.objects.create_user("bench", is_researcher=True)
    names = [f"system-{i:02d}" for i in range(args.systems)]
    s = strengths(args.systems, args.crowd)
    truth = estimand(names, s)
    runs = []
    designs = [d == "adaptive" for d in args.designs.split(",")]
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for adaptive in designs:
            run = run_design(
                owner, seed=seed, names=names, s=s, truth=truth, args=args, adaptive=adaptive
            )
            runs.append(run)
            # Written after every run, so an interrupted bench keeps what it measured.
            partial = ROOT / "bench" / "results" / f"arena-design{args.tag}-partial.json"
            partial.parent.mkdir(exist_ok=True)
            partial.write_text(json.dumps(runs, indent=1) + "\n")
            if args.keep:
                keep_runs(Path(args.keep), [run], kept_settings(args))
            last = run["checkpoints"][-1]
            print(
                f"seed {seed:2d} {run['design']:8s} {run['battles']} battles "
                f"({run['excluded']} judgments excluded) tau {last['tau']:.3f} "
                f"coverage {last['coverage']:.2f} to-target "
                f"{battles_to_target(run, args.budget, args.step)} [{run['seconds']} s]",
                flush=True,
            )
    summary = summarise(runs, args.budget, args.step)
    return {
        "design_bound_battle_share": design_bound(s),
        "top_design_share": top_yardstick(args, s),
        "assumptions": {
            "systems": args.systems,
            "crowd": args.crowd,
            "goal": args.goal,
            "top": args.top,
            "strengths_natural": [round(float(v), 4) for v in s],
            "estimand_scores": truth,
            "position_bias": POSITION_BIAS,
            "workers": args.workers,
            "random_clickers": args.clickers,
            "images": args.images,
            "budget": args.budget,
            "step": args.step,
            "seeds": args.seeds,
            "first_seed": args.first_seed,
        },
        "summary": summary,
        "runs": runs,
    }


def top_yardstick(args, s: np.ndarray) -> dict | None:
    """``top_design_share`` at the crowd's estimand, for a study whose goal is the top set."""
    if args.goal != "top":
        return None
    names = [f"system-{i:02d}" for i in range(len(s))]
    return top_design_share(estimand(names, s), args.top)


def fit_part() -> dict:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "arena_fit.py"), "--runs", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    print(out.stdout[-2000:], flush=True)
    path = ROOT / "bench" / "results" / "arena_fit.json"
    return json.loads(path.read_text()) if path.is_file() else {"error": out.stderr[-2000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["all", "design", "fit", "summary"], default="all")
    parser.add_argument(
        "--inputs", default="", help="summary: comma-separated run files (*-partial.json)"
    )
    parser.add_argument("--seeds", type=int, default=20)
    # Seeds used while designing a rule must not be the ones reported: pick fresh ones.
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--systems", type=int, default=6)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--budget", type=int, default=480)
    parser.add_argument("--step", type=int, default=30)
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--clickers", type=int, default=3)
    # Two processes can run the two designs side by side (same seeds, same study data).
    parser.add_argument(
        "--designs", choices=["uniform,adaptive", "uniform", "adaptive"], default="uniform,adaptive"
    )
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument(
        "--keep",
        default="",
        help="design, summary: also add the runs to this kept file (bench/arena-runs/*.json.gz)",
    )
    # Issue 47: the audit's uneven 14-system crowd, and the adaptive study's goal.
    parser.add_argument("--crowd", choices=["even", "uneven14"], default="even")
    parser.add_argument("--goal", choices=["order", "top"], default="order")
    parser.add_argument("--top", type=int, default=4, help="the top set's size (goal top)")
    args = parser.parse_args()
    if args.crowd == "uneven14":
        args.systems = len(UNEVEN_ELO)
    if not (
        1 <= args.seeds <= 200
        and 3 <= args.systems <= 20
        and 10 <= args.images <= 1000
        and 50 <= args.budget <= 10_000
        and 10 <= args.step <= args.budget
        and 0 <= args.clickers < args.workers <= 500
        and 1 <= args.top < args.systems
    ):
        parser.error("sizes out of bounds (see --help)")
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(exist_ok=True)
    result: dict = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    started = time.perf_counter()
    if args.part in ("all", "fit"):
        result["fit"] = fit_part()
    if args.part == "summary":
        runs, seen = [], set()
        for name in args.inputs.split(","):
            for run in read_runs(Path(name), kept_settings(args), lend_uniform=True):
                # A seed run twice (two processes overlapping) counts once: the first given.
                if (run["seed"], run["design"]) not in seen:
                    seen.add((run["seed"], run["design"]))
                    runs.append(run)
        if args.keep:
            print(json.dumps(keep_runs(Path(args.keep), runs, kept_settings(args))), flush=True)
        s = strengths(args.systems, args.crowd)
        result["design"] = {
            "design_bound_battle_share": design_bound(s),
            "top_design_share": top_yardstick(args, s),
            "inputs": args.inputs.split(","),
            "codes": sorted({run.get("code", "not recorded") for run in runs}),
            "summary": summarise(runs, args.budget, args.step),
            "runs": runs,
        }
        print(json.dumps(result["design"]["summary"], indent=2), flush=True)
        print(json.dumps({"top_design_share": result["design"]["top_design_share"]}), flush=True)
    if args.part in ("all", "design"):
        result["design"] = design_part(args)
        print(json.dumps(result["design"]["summary"], indent=2), flush=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = results_dir / f"arena-{args.part}{args.tag}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
