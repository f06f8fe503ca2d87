"""People + judge on THumB 1.0 over random human subsets (issue 40, "Real data"; prints a table).

    PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/ppi_thumb.py
        [--metrics "ROUGE-L (rouge-score)" "BLEU-4 (sacrebleu)" "CIDEr (pycocoevalcap)"]
        [--scores Total P R] [--sizes 50 100 200] [--subsets 500]

The figures of ``tests/rubrics/test_ppi_thumb.py`` (whose docstring derives the formula
and the finite-population correction), for more judges: each metric of the metric lab
(``rubrics.metrics.compute``, one call over the 2,500 captions; CIDEr only when Java
runs) mapped onto the human scale with the other systems' mean and spread
(``rubrics.ppi_subsets.on_human_scale``). Per metric, human score, system and size n:
over ``--subsets`` seeded subsets of n of the 500 images (the same subsets for every
system and metric), the coverage of the full-data mean by the PPI++ combined interval
(``rubrics.ppi.ppi_mean``) and by the people-only one, the coverage the finite
population predicts for each, the mean width ratio beside ``sqrt(1 - rho^2 N / (n + N))``,
the spread ratio of the estimates beside ``sqrt(1 - rho^2)``, and the mean tuned lambda.
Targets (issue 40): combined coverage >= 0.90 and the width ratio within 5% of the formula
in every row; exit 1 otherwise. A JSON copy goes to ``bench/results/ppi_thumb.json``.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THUMB = ROOT.parent / "shared" / "datasets" / "thumb-1.0"
DEFAULT_METRICS = ["ROUGE-L (rouge-score)", "BLEU-4 (sacrebleu)", "CIDEr (pycocoevalcap)"]
HEADER = (
    "| metric | score | system | n | rho | coverage | people | expected (comb./people) "
    "| width ratio | formula | off | spread ratio | sqrt(1-rho^2) | mean lambda |"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", nargs="+", default=DEFAULT_METRICS)
    parser.add_argument("--scores", nargs="+", default=["Total", "P", "R"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[50, 100, 200])
    parser.add_argument("--subsets", type=int, default=500)
    args = parser.parse_args()
    if not (THUMB / "mscoco_THumB-1.0.jsonl").is_file():
        sys.exit(f"THumB 1.0 not found at {THUMB}")
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    import numpy as np

    from rubrics import metrics, ppi_subsets

    names = [
        m for m in args.metrics if not metrics.METRICS[m].needs_java or metrics.java_available()
    ]
    skipped = sorted(set(args.metrics) - set(names))
    start = time.perf_counter()
    data = ppi_subsets.load_thumb(THUMB, names)
    draws = {
        n: ppi_subsets.subset_draws(len(data.images), n, args.subsets, ppi_subsets.draw_seed(n))
        for n in args.sizes
    }
    print(f"THumB 1.0: {len(data.systems)} systems x {len(data.images)} images; judges {names}")
    if skipped:
        print(f"skipped (no Java): {skipped}")
    print(f"{args.subsets} subsets per size, the same for every system and judge; 95% intervals\n")
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    rows, off = [], []
    for name in names:
        for score in args.scores:
            human = data.human[score]
            for s, system in enumerate(data.systems):
                fit = np.ones_like(human, dtype=bool)
                fit[s] = False
                yhat = ppi_subsets.on_human_scale(data.metric[name], human, fit, ~fit)
                for n in args.sizes:
                    row = _row(ppi_subsets, name, score, system, human[s], yhat, draws[n], n)
                    rows.append(row)
                    print(_line(row))
                    if row["coverage"] < 0.90 or abs(row["ratio"] / row["predicted"] - 1) > 0.05:
                        off.append(row)
    seconds = time.perf_counter() - start
    worst_cov = min(rows, key=lambda r: r["coverage"])
    worst_ratio = max(rows, key=lambda r: abs(r["ratio"] / r["predicted"] - 1))
    print(
        f"\n{len(rows)} rows in {seconds:.1f} s. Lowest combined coverage "
        f"{worst_cov['coverage']:.3f} ({_label(worst_cov)}); largest width-ratio deviation "
        f"{worst_ratio['ratio'] / worst_ratio['predicted'] - 1:+.4f} ({_label(worst_ratio)}). "
        f"Targets (coverage >= 0.90, ratio within 5%): {'met' if not off else 'MISSED'} "
        f"({len(rows) - len(off)} of {len(rows)} rows)."
    )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "ppi_thumb.json").write_text(
        json.dumps({"args": vars(args), "skipped": skipped, "rows": rows}, indent=1)
    )
    return 1 if off else 0


def _row(ppi_subsets, name, score, system, y, yhat, draws, n) -> dict:
    cell = ppi_subsets.subset_cell(y, yhat, draws, n)
    expected = ppi_subsets.expected_coverage(y, yhat, n)
    return {
        "metric": name,
        "score": score,
        "system": system,
        **{k: getattr(cell, k) for k in cell.__dataclass_fields__},
        "expected_coverage": expected["combined"],
        "expected_people_coverage": expected["people"],
        "sqrt_1_rho2": math.sqrt(1 - max(cell.rho, 0.0) ** 2),
    }


def _label(row: dict) -> str:
    return f"{row['metric']}, {row['score']}, {row['system']}, n={row['n']}"


def _line(r: dict) -> str:
    return (
        f"| {r['metric']} | {r['score']} | {r['system']} | {r['n']} | {r['rho']:+.3f} "
        f"| {r['coverage']:.3f} | {r['people_coverage']:.3f} "
        f"| {r['expected_coverage']:.3f} / {r['expected_people_coverage']:.3f} "
        f"| {r['ratio']:.4f} | {r['predicted']:.4f} | {r['ratio'] / r['predicted'] - 1:+.4f} "
        f"| {r['spread_ratio']:.3f} | {r['sqrt_1_rho2']:.3f} | {r['lam']:.3f} |"
    )


if __name__ == "__main__":
    sys.exit(main())
