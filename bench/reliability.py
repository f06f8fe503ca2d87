"""Benchmark the reports' annotator-reliability fit at VICR's size (not a test; prints numbers).

    .venv/bin/python bench/reliability.py [--runs 5]

``rubrics.reliability.dawid_skene`` (crowd-kit's Dawid-Skene plus the leave-one-out tables)
on the ratings of ``bench/stats.py`` (15,646 pairs, about 68,000 ratings, 3-7 per pair)
spread over VICR's 113 players, 10% of them replaced by spammers (half uniform, half
constant). This is the part the reliability section adds to the VICR report, whose whole
budget is 2 s; target < 1 s. The first call also pays crowd-kit's import (once per worker
process, after scipy.stats, which the reports load anyway), reported separately. Results
are written to bench/results/reliability.json.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import vicr_ratings  # noqa: E402
from rubrics import agreement  # noqa: E402, F401  (scipy.stats: loaded in any report process)
from rubrics.reliability import dawid_skene  # noqa: E402

PLAYERS = 113


def rows_with_spammers(seed: int = 0) -> tuple[list[tuple[int, int, int]], set[int]]:
    rng = np.random.default_rng(seed)
    spammers = set(rng.choice(PLAYERS, PLAYERS // 10, replace=False).tolist())
    constant = {player: int(rng.integers(1, 6)) for player in spammers}
    rows = []
    for pair, ratings in enumerate(vicr_ratings(seed)):
        drawn = rng.choice(PLAYERS, len(ratings), replace=False)
        for player, rating in zip(drawn, ratings, strict=True):
            player = int(player)
            if player in spammers:
                rating = constant[player] if player % 2 else int(rng.integers(1, 6))
            rows.append((player, pair, int(rating)))
    return rows, spammers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows, spammers = rows_with_spammers()
    start = time.perf_counter()
    import crowdkit.aggregation  # noqa: F401

    import_s = time.perf_counter() - start
    times, cpu = [], []
    for _ in range(args.runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = dawid_skene(rows)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    flagged = set(result.flagged)
    results = {
        "ratings": len(rows),
        "players": PLAYERS,
        "crowdkit_import_s": import_s,
        "dawid_skene_s": statistics.median(times),
        # CPU time of this process: on a shared, loaded machine it says more than wall time.
        "dawid_skene_cpu_s": statistics.median(cpu),
        "iterations": result.iterations,
        "converged": result.converged,
        "spammers": len(spammers),
        "flagged": len(flagged),
        "precision": len(flagged & spammers) / len(flagged) if flagged else 0.0,
        "recall": len(flagged & spammers) / len(spammers),
    }
    print(
        f"Dawid-Skene reliability, {len(rows):,} ratings, {PLAYERS} players: "
        f"{results['dawid_skene_s']:.3f} s wall, {results['dawid_skene_cpu_s']:.3f} s CPU "
        f"(median of {args.runs}; target < 1 s), "
        f"{result.iterations} iterations, converged: {result.converged}"
    )
    print(f"  crowd-kit import, once per process: {import_s:.2f} s")
    print(
        f"  planted spammers {len(spammers)}, flagged {len(flagged)}: precision "
        f"{results['precision']:.2f}, recall {results['recall']:.2f}"
    )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "reliability.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
