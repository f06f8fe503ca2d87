"""Time reading and scoring the MQM TED en-de file with rubrics' span functions (issue 24).

    .venv/bin/python bench/spans_score.py [--runs 5] [--path FILE]

``--path`` defaults to ``../shared/datasets/wmt-mqm-ted/mqm_ted_ende.tsv``.

Measures, per run, in one process after the imports: ``rubrics.span_files.read_mqm_tsv``
on the file (8,435 rows), then what the spans report computes from it with
``rubrics.spans``: Freitag et al.'s system scores with weighted errors per 100 words
(``mqm_system_scores``) and the error counts by category and severity (``count_spans``).
The issue's target for the whole report on the imported study is under 2 s; this is the
pure part of it (no database, no figure). Prints the timings and writes
``bench/results/spans-score-<time>.json``.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "datasets" / "wmt-mqm-ted" / "mqm_ted_ende.tsv"
TARGET_SECONDS = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--path", type=Path, default=DEFAULT)
    args = parser.parse_args()
    if not args.path.is_file():
        sys.exit(f"MQM TSV not found at {args.path}")
    if not 1 <= args.runs <= 50:
        sys.exit("--runs must be from 1 to 50")
    sys.path.insert(0, str(ROOT))
    started = time.perf_counter()
    from rubrics.span_files import read_mqm_tsv
    from rubrics.spans import FREITAG_2021, count_spans, mqm_system_scores

    import_seconds = time.perf_counter() - started
    timings = []
    for _ in range(args.runs):
        start = time.perf_counter()
        rows = read_mqm_tsv(args.path)
        read_seconds = time.perf_counter() - start
        words = {(r.system, (r.doc, r.seg_id)): len(r.target.split()) for r in rows}
        scores = mqm_system_scores(
            [r.system for r in rows],
            [(r.doc, r.seg_id) for r in rows],
            [r.rater for r in rows],
            [r.category for r in rows],
            [r.severity for r in rows],
            FREITAG_2021,
            words=words,
        )
        errors = [r for r in rows if r.severity != "No-error"]
        counts = count_spans([r.system for r in errors], [(r.category, r.severity) for r in errors])
        total = time.perf_counter() - start
        timings.append({"read": read_seconds, "total": total})
    best = min(t["total"] for t in timings)
    median = statistics.median(t["total"] for t in timings)
    cells = sum(map(len, counts.values()))
    print(f"{args.path} ({len(rows):,} rows, {len(scores)} systems, {cells} count cells)")
    print(f"imports (numpy, scipy, rubrics): {import_seconds:.3f} s, paid once")
    for i, t in enumerate(timings, 1):
        print(f"run {i}: read {t['read']:.3f} s, read + score {t['total']:.3f} s")
    verdict = "meets" if median < TARGET_SECONDS else "MISSES"
    print(f"median {median:.3f} s, best {best:.3f} s: {verdict} the {TARGET_SECONDS} s target")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = results / f"spans-score-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "path": str(args.path),
                "rows": len(rows),
                "import_seconds": import_seconds,
                "runs": timings,
                "median_seconds": median,
                "cpu_count": os.cpu_count(),
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
    )
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
