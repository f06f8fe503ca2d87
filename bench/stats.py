"""Benchmark the rubrics reports at the sizes issue 3 names (not a test; prints numbers).

    .venv/bin/python bench/stats.py [--runs 5]

- VICR virtual raters (100 repetitions) on synthetic data of VICR's size: 15,646 pairs,
  about 68,217 ratings, 3-7 per pair; compared with a straightforward loop that draws in
  Python and calls scipy.stats.kendalltau and statsmodels' fleiss_kappa per repetition,
  measured in the same run. Targets: < 0.5 s and >= 20x faster.
- VICR rater competency (the report's Rasch fit, ``rubrics.rasch.fit``) on the same ratings
  spread over 113 players, scored against the leave-one-out consensus: < 0.5 s (the whole
  VICR report has 2 s).
- THumB report with 1,000 paired bootstrap resamples on 5,000 images x 5 systems: < 0.5 s.
- HUMANr report with 1,000 half-splits (and 1,000 bootstrap resamples) on 3,500 images x
  4 comparison types x 3 workers: < 0.5 s.

Times are the median of ``--runs`` runs (the baseline runs once: it takes seconds).
Results are also written to bench/results/stats.json.
"""

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.stats
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rubrics import humanr, rasch, thumb, vicr  # noqa: E402

VICR_PAIRS = 15_646


def vicr_ratings(seed: int = 0) -> list[list[int]]:
    """VICR-sized ragged ratings: a latent quality per pair plus rater noise."""
    rng = np.random.default_rng(seed)
    # Counts 3-7 with mean 68,217 / 15,646 = 4.36 ratings per pair.
    counts = rng.choice([3, 4, 5, 6, 7], size=VICR_PAIRS, p=[0.33, 0.27, 0.19, 0.13, 0.08])
    quality = rng.integers(1, 6, size=VICR_PAIRS)
    return [
        np.clip(q + rng.integers(-1, 2, size=k), 1, 5).astype(int).tolist()
        for q, k in zip(quality, counts, strict=True)
    ]


def vicr_competency(ratings: list[list[int]], seed: int = 0):
    """The VICR report's Rasch fit on these ratings, spread over the paper's 113 players."""
    rng = np.random.default_rng(seed)
    pairs = np.repeat(np.arange(len(ratings)), [len(r) for r in ratings])
    players = np.concatenate([rng.choice(113, len(r), replace=False) for r in ratings])
    x = np.concatenate(ratings)
    others = vicr.consensus_of_others(pairs, x, np.ones(x.size, dtype=bool))
    keep = others > 0
    scores = vicr.agreement_scores(x[keep], others[keep])
    return lambda: rasch.fit(players[keep], pairs[keep], scores, max_score=2, max_iterations=200)


def straightforward_virtual_raters(ratings, repetitions=100, seed=0, collapse_top=True):
    """The loop a researcher would write first: Python draws, scipy and statsmodels calls."""
    rng = random.Random(seed)
    eligible = [r for r in ratings if len(r) >= 3]
    values = []
    for _ in range(repetitions):
        triples = np.array([sorted(rng.sample(r, 3)) for r in eligible])
        x, y, z = triples.T
        taus = [
            scipy.stats.kendalltau(np.tile(c, 2), np.concatenate(refs), variant="c").statistic
            for c, refs in ((x, (y, z)), (y, (x, z)), (z, (x, y)))
        ]
        ranks = np.column_stack([scipy.stats.rankdata(col) for col in (x, y, z)])
        m, n = 3, len(eligible)
        s = ((ranks.sum(axis=1) - m * (n + 1) / 2) ** 2).sum()
        ties = sum(
            (t**3 - t).sum() for col in (x, y, z) for t in [np.unique(col, return_counts=True)[1]]
        )
        w = 12 * s / (m**2 * (n**3 - n) - m * ties)
        kappa_input = np.minimum(triples, 4) if collapse_top else triples
        kappa = fleiss_kappa(aggregate_raters(kappa_input)[0])
        values.append([*taus, w, kappa])
    return np.array(values).mean(axis=0) * 100


def thumb_judgments(seed: int = 0) -> thumb.CaptionJudgments:
    rng = np.random.default_rng(seed)
    images, systems = 5_000, ["Human", "A", "B", "C", "D"]
    n = images * len(systems)
    return thumb.CaptionJudgments(
        image_ids=np.repeat(np.arange(images), len(systems)),
        systems=np.tile(systems, images),
        precision=rng.integers(1, 6, n),
        recall=rng.integers(1, 6, n),
        fluency=rng.choice([0.0, 0.1, 0.5], n, p=[0.9, 0.08, 0.02]),
        conciseness=rng.choice([0.0, 0.5], n, p=[0.97, 0.03]),
        inclusive=rng.choice([0.0, 0.5, 2.0], n, p=[0.98, 0.015, 0.005]),
    )


def humanr_responses(seed: int = 0) -> humanr.Responses:
    rng = np.random.default_rng(seed)
    images, workers = 3_500, 3
    systems = np.array(["Human", "A", "B", "C"])
    image = np.repeat(np.arange(images), len(systems) * workers)
    system = np.tile(np.repeat(systems, workers), images)
    worker = np.tile(np.arange(workers), images * len(systems))
    n = image.size
    return humanr.Responses(
        worker_ids=worker,
        image_ids=image,
        systems=system,
        raw=rng.integers(1, 10, n),
        human_on_left=rng.random(n) < 0.5,
        is_attention_check=np.zeros(n, dtype=bool),
        group_ids=np.arange(n) // 10,
    )


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    ratings = vicr_ratings()
    # The loop below merges 4 and 5 for Fleiss' kappa (as the paper's VICR column); so must
    # this call, whose default is off.
    fast = median_seconds(
        lambda: vicr.virtual_raters(ratings, repetitions=100, collapse_top=True), args.runs
    )
    start = time.perf_counter()
    slow_values = straightforward_virtual_raters(ratings)
    slow = time.perf_counter() - start
    fast_values = vicr.virtual_raters(ratings, repetitions=100, collapse_top=True)
    competency = vicr_competency(ratings)
    rasch_s = median_seconds(competency, args.runs)
    rasch_fit = competency()
    judgments = thumb_judgments()
    thumb_s = median_seconds(lambda: thumb.report(judgments, n_resamples=1000), args.runs)
    responses = humanr_responses()
    humanr_s = median_seconds(
        lambda: humanr.report(responses, n_bootstrap=1000, n_splits=1000), args.runs
    )
    results = {
        "vicr_ratings": sum(len(r) for r in ratings),
        "vicr_virtual_raters_s": fast,
        "vicr_straightforward_loop_s": slow,
        "vicr_speedup": slow / fast,
        "vicr_fast_means": [fast_values[k]["mean"] for k in vicr.VIRTUAL_RATER_KEYS],
        "vicr_loop_means": slow_values.tolist(),
        "vicr_rasch_fit_s": rasch_s,
        "vicr_rasch_iterations": rasch_fit.iterations,
        "vicr_rasch_converged": rasch_fit.converged,
        "thumb_report_s": thumb_s,
        "humanr_report_s": humanr_s,
    }
    print(f"VICR virtual raters, {results['vicr_ratings']:,} ratings on {VICR_PAIRS:,} pairs:")
    print(f"  ours {fast:.3f} s, straightforward loop {slow:.2f} s -> {slow / fast:.0f}x faster")
    print(
        "  means (ours / loop; different random draws): "
        + ", ".join(
            f"{a:.1f}/{b:.1f}"
            for a, b in zip(results["vicr_fast_means"], results["vicr_loop_means"], strict=True)
        )
    )
    print(
        f"VICR rater competency (Rasch fit), 113 players: {rasch_s:.3f} s, "
        f"{rasch_fit.iterations} iterations, converged: {rasch_fit.converged}"
    )
    print(f"THumB report, 5,000 images x 5 systems, 1,000 resamples: {thumb_s:.3f} s")
    print(f"HUMANr report, 42,000 responses, 1,000 half-splits: {humanr_s:.3f} s")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "stats.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
