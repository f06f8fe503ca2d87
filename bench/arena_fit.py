"""Time the arena leaderboard fit at LMArena's size (issue 23; not a test; prints numbers).

    .venv/bin/python bench/arena_fit.py [--battles 1000000] [--rounds 1000] [--runs 3]

One million battles among 12 systems (generated from known strengths, seeded, 10% ties),
given as the lists of names and outcomes a battle log or the database yields:

- ``count_table`` (strings to a pair/outcome count table) plus ``fit`` (choix + Newton
  polish): target < 5 s on this 2-core machine;
- ``bootstrap`` with ``--rounds`` multinomial resamples over the count table;
- ``sandwich`` intervals.

Times are the median of ``--runs`` runs; the whole script is bounded by the sizes
(--battles <= 5,000,000, --rounds <= 5,000, --runs <= 10). Results are also written to
bench/results/arena_fit.json.
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

from rubrics import arena  # noqa: E402


def battles(
    n: int, k: int = 12, seed: int = 0
) -> tuple[list[str], list[str], list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    strengths = np.linspace(-1.5, 1.5, k)
    names = np.array([f"system-{i:02d}" for i in range(k)])
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1 / (1 + np.exp(-(strengths[a] - strengths[b])))
    u = rng.random(n)
    out = np.where(
        u < 0.05,
        "tie",
        np.where(u < 0.1, "tie (bothbad)", np.where(rng.random(n) < p, "model_a", "model_b")),
    )
    return names[a].tolist(), names[b].tolist(), out.tolist(), strengths


def timed(fn, runs: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--battles", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not (
        1000 <= args.battles <= 5_000_000 and 20 <= args.rounds <= 5000 and 1 <= args.runs <= 10
    ):
        parser.error("--battles 1000..5,000,000, --rounds 20..5,000, --runs 1..10")
    sa, sb, out, _ = battles(args.battles)
    anchor = ("system-00", 1000.0)

    def table_and_fit():
        return arena.fit(arena.count_table(sa, sb, out), anchor)

    fit_s, fitted = timed(table_and_fit, args.runs)
    table = arena.count_table(sa, sb, out)
    boot_s, (boot, _) = timed(
        lambda: arena.bootstrap(table, anchor, rounds=args.rounds, seed=1), args.runs
    )
    sand_s, (sand, _) = timed(lambda: arena.sandwich(table, anchor), args.runs)
    result = {
        "battles": args.battles,
        "systems": len(fitted.systems),
        "count_table_rows": len(table.count),
        "fit_seconds": round(fit_s, 3),
        "fit_target_seconds": 5.0,
        "bootstrap_rounds": args.rounds,
        "bootstrap_seconds": round(boot_s, 3),
        "sandwich_seconds": round(sand_s, 3),
        "bootstrap_mean_width": round(float(np.mean((boot.high - boot.low)[1:])), 3),
        "sandwich_mean_width": round(float(np.mean((sand.high - sand.low)[1:])), 3),
        "runs": args.runs,
    }
    print(json.dumps(result, indent=2))
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "arena_fit.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if fit_s < 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
