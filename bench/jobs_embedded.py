"""Jobs on the embedded default: "Compute the metrics" on the demo's finished THumB study.

Issue 26 must show: on the embedded default (``make demo``: SQLite, Kombu's filesystem
broker, ``manage.py demo_server`` = runserver + a real Celery worker) the POST answers in
under 1 s and the page reaches 100% by polling.

The real path over HTTP: a fresh var/ folder (``--var``, default a temporary one) is
migrated and loaded with ``load_demo --no-published`` (the finished studies included); the
researcher logs in through the login form and presses "Compute the metrics" as htmx does,
with the metrics the form has checked by default (all this machine can compute).

- **baseline**, measured in the same run: ``manage.py runserver`` alone (Celery eager, the
  embedded default before issue 26): the POST runs the whole job before it answers;
- **worker**: ``demo_server``; the POST's latency, then the job's fragment polled every
  0.25 s until it reads Done at 100% (the page polls every 1 s): time to 100% from the
  POST, and the slowest poll (the page is not blocked while the job runs).

Run: ``PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/jobs_embedded.py``
(``--repeat N`` worker runs, default 2). Writes ``bench/results/jobs_embedded.json``. The
harness is ``tests/factories/embedded.py`` (shared with the test of the same path).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from tests.factories.embedded import (  # noqa: E402  (after the path is set)
    DemoServer,
    EagerServer,
    job_state,
    login,
    manage,
    poll_job,
    post_metrics,
    study_id,
)

STUDY = "Demo (finished): THumB rubric"
JOB_TIMEOUT_S = 900
TARGET_POST_S = 1.0


def measure_eager(var_dir: Path) -> dict:
    server = EagerServer(var_dir)
    try:
        session = login(server.url, "researcher", "researcher")
        study = study_id(session, server.url, STUDY)
        started = time.perf_counter()
        answer = post_metrics(session, server.url, study, timeout=JOB_TIMEOUT_S)
        post_s = time.perf_counter() - started
        job, status, percent, _polls = job_state(answer.text)
        return {"post_s": post_s, "job": job, "status": status, "percent": percent}
    finally:
        server.stop()


def measure_worker(demo: DemoServer) -> dict:
    session = login(demo.url, "researcher", "researcher")
    study = study_id(session, demo.url, STUDY)
    started = time.perf_counter()
    answer = post_metrics(session, demo.url, study)
    post_s = time.perf_counter() - started
    job, status, percent, polls = job_state(answer.text)
    latencies: list[float] = []
    seen = poll_job(session, demo.url, study, job, JOB_TIMEOUT_S, latencies)
    done_s = time.perf_counter() - started
    return {
        "post_s": post_s,
        "answered_status": status,
        "answered_percent": percent,
        "answer_polls": polls,
        "final": list(seen[-1]),
        "to_100_s": done_s,
        "polls": len(latencies),
        "poll_max_s": max(latencies),
        "poll_median_s": statistics.median(latencies),
        "progress_seen": sorted({p for _, p in seen}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--var", type=Path, help="var folder to use (default: a new temp one)")
    parser.add_argument("--repeat", type=int, default=2, help="worker runs (default 2)")
    args = parser.parse_args()
    var_dir = args.var or Path(tempfile.mkdtemp(prefix="capeval-jobs-")) / "var"
    started = time.perf_counter()
    manage(var_dir, "migrate", "--no-input")
    manage(var_dir, "load_demo", "--no-published", timeout=1800)
    print(f"demo loaded in {time.perf_counter() - started:.0f} s ({var_dir})")

    eager = measure_eager(var_dir)
    print(f"baseline (eager runserver): POST {eager['post_s']:.2f} s, answered {eager['status']}")
    demo = DemoServer(var_dir, concurrency=2)
    runs = []
    try:
        for n in range(args.repeat):
            run = measure_worker(demo)
            runs.append(run)
            print(
                f"worker run {n + 1}: POST {run['post_s']:.3f} s (answered "
                f"{run['answered_status']} {run['answered_percent']}%), 100% after "
                f"{run['to_100_s']:.1f} s, slowest poll {run['poll_max_s']:.3f} s "
                f"of {run['polls']}; final {run['final']}"
            )
    finally:
        demo.interrupt()
    worst_post = max(run["post_s"] for run in runs)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "study": STUDY,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "baseline_eager": eager,
        "worker_runs": runs,
        "worst_post_s": worst_post,
        "post_ratio_vs_eager": worst_post / eager["post_s"],
        "target_post_s": TARGET_POST_S,
        "post_under_target": worst_post < TARGET_POST_S,
        "all_reached_100": all(run["final"] == ["Done", 100] for run in runs),
    }
    out = REPO / "bench" / "results" / "jobs_embedded.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(
        f"worst POST {worst_post:.3f} s = {result['post_ratio_vs_eager']:.4f} x the eager "
        f"POST; under {TARGET_POST_S} s: {result['post_under_target']}; "
        f"all reached 100%: {result['all_reached_100']}; load {result['load_average']}"
    )
    print(f"written {out}")


if __name__ == "__main__":
    main()
