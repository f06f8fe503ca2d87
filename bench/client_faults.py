"""Benchmark: annotators in real browsers on a flaky network lose no answer (issue 42).

Not a test. Beside ``bench/faults.py`` (which breaks the server's components), this one
breaks the network between the browser and the server:

    .venv/bin/python bench/client_faults.py [--annotators 20] [--browsers 4] [--seconds 120] \
        [--drop 0.3] [--max-delay 0.4] [--seed 42] [--grace 60] [--markdown FILE]

Per run, everything is private and on loopback: a fresh ``var/`` folder and database (a
SQLite file; a scratch PostgreSQL database ``capeval_bench_client_faults_<run>``, dropped
first and after, when ``DATABASE_URL`` names a PostgreSQL server), ``migrate`` and
``load_demo --no-finished --no-published`` (the demo's live study of every mode, THumB,
VICR, HUMANr, arena and spans, with the demo's photographs, captions and settings; only the
crowd's per-address limits are lifted, since every simulated worker comes from 127.0.0.1),
``manage.py runserver --noreload`` (the embedded default's web server) and, in front of it,
the TCP proxy of ``tests/factories/flaky_proxy.py``. ``--annotators`` simulated annotators
(``tests/factories/browser_crowd.py``; the modes taken in turn) work in ``--browsers``
headless Chromiums (Debian's, several contexts per browser to stay within 2 cores) through
the pages, as Prolific workers, until the study tells them "Thank you" or ``--seconds``
pass; an answer still unacknowledged then is waited for up to ``--grace`` seconds.

Two runs, the same annotators, seeds and studies:

- **baseline**: the proxy forwards everything, undelayed;
- **faults**: the proxy cuts ``--drop`` of the requests (half before forwarding them, half
  after the server answered; a TCP reset either way) and delays the others by up to
  ``--max-delay`` seconds, seeded.

Counted per run (from what the annotators recorded and the Judgment rows): answers given
(distinct lease parts whose submit button was pressed), stored, duplicated (two judgments
of one lease part, or of one item part by one worker: 0 by construction, counted anyway),
lost (given but not stored), stored but never given (0), answers typed a second time
(the page came back without the answer), the browser's error pages, annotators finished;
the time an answer waited from its first send to the page moving on (median, p95); the
proxy's requests and faults. The faults run's rates are given as ratios to the baseline's.
Writes ``bench/results/client_faults-*.json`` (and ``--markdown``); exits 1 if an answer
was lost or duplicated in either run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import _harness as harness

REPO = harness.REPO
sys.path[:0] = [str(REPO), str(REPO / "platform")]

from tests.factories.browser_crowd import (  # noqa: E402  (after the path is set)
    Annotator,
    new_annotator_page,
    new_browser,
)
from tests.factories.flaky_proxy import FlakyProxy  # noqa: E402
from tests.factories.study_server import (  # noqa: E402
    RunServer,
    prepare_demo,
    scratch_postgres,
    server_env,
    stored_judgments,
)

MAX_SECONDS = 300  # a few minutes of traffic per run, whatever the command line says
ARRIVAL_S = 300  # every annotator holds a first item by then, or is reported


async def crowd(base: str, studies: list[dict], args, run: str, proxy: FlakyProxy):
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browsers = [await new_browser(playwright) for _ in range(args.browsers)]
        try:
            pages = [
                await new_annotator_page(browsers[k % args.browsers])
                for k in range(args.annotators)
            ]
            annotators = [
                Annotator(
                    pages[k],
                    base=base,
                    link=studies[k % len(studies)]["link"],
                    worker=f"cf-{run}-{k:02d}",
                    mode=studies[k % len(studies)]["mode"],
                    seed=args.seed + k,
                    deadline=time.monotonic() + ARRIVAL_S,
                    grace_s=args.grace,
                )
                for k in range(args.annotators)
            ]
            # Arrival is not timed and not faulted (bench/_harness.py's rule): the clock and
            # the faults start once everyone holds a first item.
            proxy.faults = False
            arrived = await asyncio.gather(
                *(annotator.arrive() for annotator in annotators), return_exceptions=True
            )
            failed = [repr(outcome) for outcome in arrived if isinstance(outcome, Exception)]
            proxy.faults = run == "faults"
            deadline = time.monotonic() + args.seconds
            for annotator in annotators:
                annotator.deadline = deadline
            records = await asyncio.gather(*(annotator.work() for annotator in annotators))
            for record, problem in zip(records, arrived, strict=True):
                if isinstance(problem, Exception):
                    record.notes.append(f"did not arrive: {problem!r}"[:300])
            return records, failed, deadline - args.seconds
        finally:
            for browser in browsers:
                await browser.close()


def one_run(run: str, args, root: Path) -> dict:
    var_dir = root / run
    var_dir.mkdir()
    url = os.environ.get("DATABASE_URL", "")
    database = (
        scratch_postgres(url, f"capeval_bench_client_faults_{run}")
        if url.startswith("postgres")
        else nullcontext("")
    )
    with database as database_url:
        env = server_env(var_dir, database_url)
        studies = prepare_demo(env)
        server = RunServer(env, var_dir / "server.log")
        server.start()
        proxy = FlakyProxy(server.port, drop=args.drop, max_delay_s=args.max_delay, seed=args.seed)
        load_before = harness.load_average()
        began = time.monotonic()  # replaced by the clock's start once everyone arrived
        failed: list[str] = []
        try:
            records, failed, began = asyncio.run(
                crowd(f"http://127.0.0.1:{proxy.port}", studies, args, run, proxy)
            )
        finally:
            elapsed = time.monotonic() - began
            proxy.stop()
            server.stop()
        rows = stored_judgments(env)
    result = measure(run, records, rows, proxy, elapsed, load_before, studies)
    result["arrival_failures"] = failed
    return result


def measure(run, records, rows, proxy, elapsed, load_before, studies) -> dict:
    ours = [row for row in rows if row[2].startswith(f"cf-{run}-")]
    stored = Counter((token, part) for token, part, *_ in ours)
    by_item = Counter((worker, item, part) for _token, part, worker, item, _mode in ours)
    given = {key for record in records for key in record.given}
    waits = sorted(wait for record in records for wait in record.waits())
    per_mode = {}
    for study in studies:
        mode = study["mode"]
        mine = [r for r in records if r.mode == mode]
        keys = {key for r in mine for key in r.given}
        mode_waits = sorted(wait for r in mine for wait in r.waits())
        per_mode[mode] = {
            "wait_ms_median": round(statistics.median(mode_waits) * 1000) if mode_waits else None,
            "wait_ms_p95": round(harness.percentile(mode_waits, 95) * 1000) if mode_waits else None,
            "annotators": len(mine),
            "given": len(keys),
            "stored": sum(1 for row in ours if row[4] == mode),
            "lost": len(keys - set(stored)),
            "typed_twice": sum(r.typed_twice for r in mine),
            "finished": sum(r.finished for r in mine),
        }
    statuses = Counter()
    for record in records:
        statuses.update(record.statuses.keys())
    return {
        "run": run,
        "seconds": round(elapsed, 1),  # from the clock's start to the last annotator's end
        "load_average_before": load_before,
        "load_average_after": harness.load_average(),
        "annotators": len(records),
        "finished": sum(r.finished for r in records),
        "given": len(given),
        "stored": sum(stored.values()),
        "duplicated": sum(n - 1 for n in stored.values() if n > 1)
        + sum(n - 1 for n in by_item.values() if n > 1),
        "lost": len(given - set(stored)),
        "stored_not_given": len(set(stored) - given),
        "typed_twice": sum(r.typed_twice for r in records),
        "restored_drafts": sum(r.restored for r in records),
        "sends": sum(r.sends for r in records),
        "error_pages": sum(r.error_pages for r in records),
        "wait_ms": {
            "n": len(waits),
            "median": round(statistics.median(waits) * 1000) if waits else None,
            "p95": round(harness.percentile(waits, 95) * 1000) if waits else None,
        },
        "stored_per_minute": round(sum(stored.values()) / elapsed * 60, 1),
        "proxy": {
            "connections": proxy.counts.connections,
            "requests": proxy.counts.requests,
            "fates": dict(proxy.counts.fates),
            "submissions_cut": sum(
                1 for _fate, line in proxy.counts.dropped_lines if "/submit/" in line
            ),
        },
        "per_mode": per_mode,
        "status_lines_seen": sorted(statuses)[:30],
        "notes": [note for r in records for note in r.notes][:40],
    }


def code_version() -> dict:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip()

    drafts = REPO / "static" / "capeval" / "drafts.js"
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_files": len(git("status", "--porcelain").splitlines()),
        "drafts_js": drafts.is_file(),
    }


def markdown(result: dict) -> str:
    base, faults = result["baseline"], result["faults"]

    def ratio(a, b):
        return f"{a / b:.2f}x" if a is not None and b else "n/a"

    lines = [
        "# Client faults (`bench/client_faults.py`, issue 42)",
        "",
        f"Command: `{result['command']}`  ",
        f"Machine: {result['cpus']} CPUs (nproc), load average {base['load_average_before']} "
        f"before the baseline, {faults['load_average_after']} after the faults run; "
        f"python_speed {result['python_speed']} s.  ",
        f"Code: commit {result['code']['commit']}, drafts.js present: "
        f"{result['code']['drafts_js']}, uncommitted files in the tree: "
        f"{result['code']['uncommitted_files']}.  ",
        f"Measured: {result['path']}",
        "",
        "| | baseline (no faults) | faults | ratio |",
        "| --- | --- | --- | --- |",
    ]
    rows = [
        ("annotators (finished)", "annotators", None),
        ("answers given", "given", None),
        ("answers stored", "stored", None),
        ("lost (given - stored)", "lost", None),
        ("duplicated", "duplicated", None),
        ("stored but never given", "stored_not_given", None),
        ("typed a second time", "typed_twice", None),
        ("drafts restored", "restored_drafts", None),
        ("submit presses", "sends", None),
        ("browser error pages", "error_pages", None),
        ("stored per minute", "stored_per_minute", "ratio"),
    ]
    for label, key, kind in rows:
        b, f = base[key], faults[key]
        if key == "annotators":
            b, f = f"{b} ({base['finished']})", f"{f} ({faults['finished']})"
        lines.append(f"| {label} | {b} | {f} | {ratio(f, b) if kind else ''} |")
    for q in ("median", "p95"):
        b, f = base["wait_ms"][q], faults["wait_ms"][q]
        lines.append(f"| wait, first send to acknowledged, {q} ms | {b} | {f} | {ratio(f, b)} |")
    p = faults["proxy"]
    lines += [
        f"| proxy requests (cut before / after / forwarded) | {base['proxy']['requests']} | "
        f"{p['requests']} ({p['fates'].get('drop_before', 0)} / {p['fates'].get('drop_after', 0)}"
        f" / {p['fates'].get('forward', 0)}; {p['fates'].get('spared', 0)} static spared); "
        f"submissions cut: {p['submissions_cut']} | |",
        "",
        "Per mode (faults run): "
        + "; ".join(
            f"{mode} {m['given']} given, {m['stored']} stored, {m['lost']} lost, "
            f"{m['typed_twice']} typed twice, wait median/p95 {m['wait_ms_median']}/"
            f"{m['wait_ms_p95']} ms (baseline {base['per_mode'][mode]['wait_ms_median']}/"
            f"{base['per_mode'][mode]['wait_ms_p95']})"
            for mode, m in faults["per_mode"].items()
        )
        + ".",
        "",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--browsers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--drop", type=float, default=0.3)
    parser.add_argument("--max-delay", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--grace", type=float, default=60)
    parser.add_argument("--markdown", type=Path, help="also write the summary table here")
    args = parser.parse_args()
    args.seconds = max(10.0, min(args.seconds, MAX_SECONDS))
    args.annotators = max(1, args.annotators)
    with tempfile.TemporaryDirectory(prefix="client-faults-") as folder:
        result = {
            "benchmark": "client_faults",
            "started": harness.now_iso(),
            "command": "python bench/client_faults.py " + " ".join(sys.argv[1:]),
            "cpus": os.cpu_count(),
            "python_speed": harness.python_speed(),
            "code": code_version(),
            "path": (
                "Chromium (Playwright, Debian's build) -> the asyncio TCP proxy on 127.0.0.1 "
                "-> manage.py runserver --noreload -> "
                + (
                    "PostgreSQL"
                    if os.environ.get("DATABASE_URL", "").startswith("postgres")
                    else "SQLite file"
                )
                + "; the pages' own scripts as served; the demo's live studies of every mode"
            ),  # fmt: skip
            "settings": vars(args) | {"markdown": str(args.markdown or "")},
        }
        for run in ("baseline", "faults"):
            print(f"{run}: {args.annotators} annotators for {args.seconds:.0f} s ...", flush=True)
            result[run] = one_run(run, args, Path(folder))
            print({k: v for k, v in result[run].items() if k not in {"notes", "per_mode"}})
    harness.write_result("client_faults", result)
    if args.markdown:
        args.markdown.write_text(markdown(result), encoding="utf-8")
        print(f"wrote {args.markdown}")
    bad = any(result[run]["lost"] or result[run]["duplicated"] for run in ("baseline", "faults"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
