"""Benchmark adaptive designs on the platform's own code path (issues 27 and 48; not a test).

    PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/adaptive.py \
        [--part all|humanr|vicr] [--seeds 20] [--images 270] [--target 0.12] [--no-unspread]

Everything runs the real modes through the services, in one scratch SQLite file (migrated
once), as ``bench/arena.py`` does: ``study_create`` and ``study_open`` build the items;
simulated workers take leases with ``assignment_next`` and answer with ``judgment_submit``
(the calls the participant views make); the stopping and allocation rules act as wired
(HUMANr: ``eligible_items`` -> ``adaptive_settled_groups`` and the spreading rule; VICR:
``after_submit`` -> ``stopping.adaptive_stop``); the numbers read are the report job's
(``report_request`` +
``services.runner.job_run``, the Celery task's code path without the broker).

HUMANr (``--part humanr``): see ``bench/adaptive_humanr.py`` (the adaptive design, with and
without spreading each worker's groups over the systems, against the planner-sized fixed
design and the hindsight-cheapest fixed design, on per-system answer streams).

VICR (``--part vicr``): see ``bench/adaptive_vicr.py``.

Results: ``bench/results/adaptive-<part>.json``; summary: ``bench/results-adaptive.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "humanr", "vicr", "vicr-fixed"), default="all")
    parser.add_argument("--seeds", type=int, default=20)
    # Seeds first-seed .. first-seed + seeds - 1 (to split a run over processes).
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--images", type=int, default=270)
    parser.add_argument("--target", type=float, default=0.12)
    # Also run the adaptive design with adaptive_spread_workers off (the allocation before
    # issue 48), for comparison.
    parser.add_argument("--unspread", action=argparse.BooleanOptionalAction, default=True)
    # Run the planner-sized fixed study (for its coverage) on every N-th seed only; its
    # cost is the planner's size either way.
    parser.add_argument("--planner-every", type=int, default=1)
    # VICR: game pairs per study (the VICR sample has 249).
    parser.add_argument("--pairs", type=int, default=40)
    # Merge the per-seed runs of several HUMANr processes (their JSON files) and print the
    # pooled summary (no Django, nothing run).
    parser.add_argument("--merge", nargs="*", type=Path, default=None)
    args = parser.parse_args()
    if args.merge:
        # The summary reads the mode's constants: Django set up, no database touched.
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
        import django

        django.setup()
        from bench.adaptive_humanr import humanr_summary

        # One run per seed (a seed run by two processes counts once: the first file's).
        by_seed: dict[int, dict] = {}
        for path in args.merge:
            for run in json.loads(path.read_text())["runs"]:
                by_seed.setdefault(run["seed"], run)
        runs = [by_seed[seed] for seed in sorted(by_seed)]
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
    if args.part == "vicr-fixed":
        from bench.adaptive_vicr import vicr_fixed_baselines

        print(json.dumps(vicr_fixed_baselines(args.seeds, args.pairs), indent=2))
        return 0
    setup_django("capeval-bench-adaptive-")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    if args.part in ("all", "humanr"):
        from bench.adaptive_humanr import humanr_part

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
