"""Benchmark people + judge estimates on the platform's own code path (issue 40; not a test).

    nice .venv/bin/python bench/ppi.py --part coverage|saving|arena|check [--seeds N]
        [--first-seed 1] [--procs 2] [--via-job] [--rhos 0.5 ...]

Every study is built and run through the services in a scratch SQLite file per process
(migrated once; loopback only, nothing else): ``bench/ppi_study.py`` (VICR, the means) and
``bench/ppi_arena.py`` (the arena, Bradley-Terry). The simulated crowd and judge:
``bench/ppi_sim.py`` (a per-caption latent quality both see; the judge's per-system bias,
its noise tuned to a target correlation rho with the captions' human means, and repeated
runs whose spread tracks its error). The numbers read are ``people_judge_report``'s (the
service the report job stores as ``result["people_judge"]``; ``--via-job`` runs the job).

- ``check``: one seed of each design; prints the section and the measured correlation.
- ``coverage``: ``bench/ppi_coverage.py``; ``saving``: ``bench/ppi_saving.py``;
  ``arena``: ``bench/ppi_arena.py``.

Results: ``bench/results/ppi-<part>.json``; summary: ``bench/results-ppi.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench.adaptive import setup_django as setup_scratch_django  # noqa: E402 (after the path)

MAX_SEEDS = 2000
OUT = ROOT / "bench" / "results"
_OWNER = None


def setup_django() -> Path:
    """Django on a fresh scratch SQLite file of this process (migrated): the adaptive
    bench's setup, which this bench shares."""
    return setup_scratch_django("capeval-bench-ppi-")


def owner():
    """This process's researcher (created once)."""
    global _OWNER
    if _OWNER is None:
        from django.contrib.auth import get_user_model

        _OWNER = get_user_model().objects.create_user(
            f"bench-ppi-{os.getpid()}", is_researcher=True
        )
    return _OWNER


def _init_worker() -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    setup_django()


def run_seeds(task, seeds: list[int], procs: int, partial: Path) -> list[dict]:
    """``task(seed)`` over the seeds, in ``procs`` processes each on its own scratch
    database; what is done so far is written to ``partial`` every few seeds."""
    runs: list[dict] = []
    if procs <= 1:
        setup_django()
        iterator = map(task, seeds)
        return _collect(iterator, partial, runs)
    context = multiprocessing.get_context("spawn")
    with context.Pool(procs, initializer=_init_worker) as pool:
        return _collect(pool.imap_unordered(task, seeds), partial, runs)


def _collect(iterator, partial: Path, runs: list[dict]) -> list[dict]:
    started = time.perf_counter()
    for run in iterator:
        runs.append(run)
        # Every seed written as it ends: a slow part (minutes a seed) loses none at a cut.
        partial.write_text(json.dumps({"runs": runs}))
        if len(runs) % 5 == 0:
            print(f"{len(runs)} seeds, {time.perf_counter() - started:.0f} s", flush=True)
    runs.sort(key=lambda r: r["seed"])
    return runs


def machine() -> dict:
    return {"load_average": os.getloadavg(), "cpus": os.cpu_count()}


def _summary_of(part: str):
    if part == "coverage":
        from bench.ppi_coverage import summary
    elif part == "saving":
        from bench.ppi_saving import summary
    else:
        from bench.ppi_arena import summary
    return summary


def summarize(part: str, paths: list[Path]) -> int:
    """Print the summary of the runs in ``paths`` (one run per seed: the first file's)."""
    by_seed: dict[int, dict] = {}
    for path in paths:
        for run in json.loads(path.read_text())["runs"]:
            by_seed.setdefault(run["seed"], run)
    runs = [by_seed[seed] for seed in sorted(by_seed)]
    print(json.dumps(_summary_of(part)(runs), indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("check", "coverage", "saving", "arena"), required=True)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--via-job", action="store_true")
    parser.add_argument("--tag", default="", help="suffix of the result file")
    # The saving part at some of its correlations only (more seeds where the noise is).
    parser.add_argument("--rhos", nargs="*", type=float, default=None)
    # The summary of runs already written (a -partial.json of a run cut short, or several
    # files of seed ranges run apart), each seed once; nothing is run.
    parser.add_argument("--summarize", nargs="*", type=Path, default=None)
    args = parser.parse_args()
    if args.summarize:
        return summarize(args.part, args.summarize)
    if not 1 <= args.seeds <= MAX_SEEDS:
        parser.error(f"--seeds must be 1-{MAX_SEEDS}")
    if not 1 <= args.procs <= 4:
        parser.error("--procs must be 1-4")
    OUT.mkdir(exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    started = time.perf_counter()
    if args.part == "check":
        from bench.ppi_coverage import check

        setup_django()
        print(json.dumps(check(args.first_seed, via_job=args.via_job), indent=1))
        return 0
    if args.part == "coverage":
        from bench.ppi_coverage import coverage_seed as task
    elif args.part == "saving":
        from bench.ppi_saving import RHOS, saving_seed

        rhos = tuple(args.rhos or RHOS)
        if not set(rhos) <= set(RHOS):
            parser.error(f"--rhos: some of {RHOS}")
        task = functools.partial(saving_seed, rhos=rhos)
    else:
        from bench.ppi_arena import arena_seed as task
    summary = _summary_of(args.part)
    name = f"ppi-{args.part}{args.tag}"
    load_before = machine()
    runs = run_seeds(task, seeds, args.procs, OUT / f"{name}-partial.json")
    result = {
        "command": " ".join(["bench/ppi.py", *sys.argv[1:]]),
        "summary": summary(runs),
        "seconds": round(time.perf_counter() - started, 1),
        "machine_before": load_before,
        "machine_after": machine(),
        "runs": runs,
    }
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
