"""Benchmark: the error-span report on the imported TED en-de MQM study, and crowd workers
marking detailed captions through gunicorn beside ``bench/vicr_game.py`` (issue 24; not a
test).

    .venv/bin/python bench/spans.py [--report-runs 3] [--path FILE] [--workers 20] \
        [--images 300] [--seconds 20] [--gunicorn-workers 2] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench_spans] \
        [--no-vicr]

Run it from the repository root with ``PYTHONPATH=$PWD:$PWD/platform`` so this checkout's
code is what runs (it prints ``annotation.__file__``).

1. The report (code path: ``release_import`` of ``../shared/datasets/wmt-mqm-ted/
   mqm_ted_ende.tsv`` (8,435 rows) as a closed spans study with Freitag et al.'s weights,
   untimed; then ``report_request`` + ``services.runner.job_run``, the job a worker runs,
   timed ``--report-runs`` times: reading the judgments from PostgreSQL, the ESA/MQM
   scores, counts, span and score agreement, the adjudication view, storing the result).
   Target < 2 s. Checked: the stored MQM per caption of each system equals the published
   score of the repository's README to +-0.01.
2. The submission path (code path: gunicorn (sync workers) -> the crowd entry link -> GET
   the next caption page -> POST the marks as the page's script does (``spans`` JSON with
   each span's ``text``, ``score``) -> ``judgment_submit`` with the mode's default
   settings but ``min_seconds=0`` (the wait would measure sleeping) and per-address crowd
   limits lifted (every worker is 127.0.0.1)). ``--workers`` threads with their own
   sessions mark one or two random words of the served caption (a 100-300 word caption,
   fileless image) until ``--seconds`` pass (at most 60). Checked: every POST answered 302
   is one stored judgment whose marks equal the words sent.
3. ``bench/vicr_game.py`` as a subprocess with the same players, seconds and gunicorn
   workers (its own database), so both rates come from the same run and load; the ratio
   spans judgments/s over VICR ratings/s is reported.
Writes ``bench/results/spans-<time>.json``; exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import _harness as harness

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "datasets" / "wmt-mqm-ted" / "mqm_ted_ende.tsv"
TARGET_SECONDS = 2.0
#: Seconds gunicorn may take to answer its first request (the harness's own limit is 30).
STARTUP_SECONDS = 120
FORM = re.compile(r'<form method="post" action="([^"]+)" class="spans-form"')
TEXT = re.compile(r'id="spans-caption" class="spans-caption" data-text="([^"]*)"')
WORD = re.compile(r'<span class="w" data-start="(\d+)" data-end="(\d+)">')
#: Published TED en-de system scores (wmt-mqm-human-evaluation README; its ref.A is the
#: imported "ref"), to check the report.
PUBLISHED_ENDE = {"ref": 0.91, "Facebook-AI": 1.06, "Online-W": 1.12, "eTranslation": 1.96,
                  "Nemo": 2.14}  # fmt: skip


def down(value: float, digits: int = 3) -> float:
    """``value`` cut (never rounded up) to ``digits`` decimals, as the results are quoted."""
    scale = 10**digits
    return math.floor(value * scale) / scale


def report_part(path: Path, runs: int) -> dict:
    from annotation.models import Job, User
    from annotation.services.imports.releases import release_import
    from annotation.services.reports import report_request
    from annotation.services.runner import job_run

    owner = User.objects.create_user("bench-report", password="x", is_researcher=True)
    started = time.perf_counter()
    done = release_import(owner=owner, path=path, fmt="mqm-tsv", name="TED en-de")
    import_seconds = time.perf_counter() - started
    timings, cpu, result = [], [], {}
    for _ in range(runs):
        job = report_request(study=done.study, user=owner)
        began, began_cpu = time.perf_counter(), time.process_time()
        job_run(job=job)
        timings.append(time.perf_counter() - began)
        # This process's CPU (PostgreSQL's is not in it): less sensitive to a loaded machine.
        cpu.append(time.process_time() - began_cpu)
        job = Job.objects.get(pk=job.pk)
        if job.status != Job.Status.DONE:
            return {"error": job.message or job.error}
        result = job.result
    systems = {row["system"]: row["mqm_per_caption"] for row in result["systems"]}
    differences = {s: round(systems.get(s, float("nan")) - v, 4) for s, v in PUBLISHED_ENDE.items()}
    return {
        "code_path": "report_request + services.runner.job_run (SpansReport.run, PostgreSQL)",
        "file_rows": 8435,
        "judgments": done.details["judgments"],
        "marks": done.details["marks"],
        "import_seconds_untimed_part": round(import_seconds, 2),
        "report_seconds": [down(t) for t in timings],
        "report_seconds_median": down(sorted(timings)[len(timings) // 2]),
        "report_seconds_max": down(max(timings)),
        "report_process_cpu_seconds": [down(t) for t in cpu],
        "load_average_after_report": harness.load_average(),
        "target_seconds": TARGET_SECONDS,
        "under_target": max(timings) < TARGET_SECONDS,
        "published_minus_ours": differences,
        "published_ok": all(abs(d) <= 0.01 for d in differences.values()),
    }


def build_study(images: int):
    from annotation.models import Caption, Image, User
    from annotation.modes.importing import fileless_image
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="Spans benchmark",
        mode="spans",
        seed=7,
        settings={
            "min_seconds": 0,
            "crowd_arrivals_per_address_per_hour": 100_000,
            "crowd_open_leases_per_address": 100_000,
        },
    )
    rows = Image.objects.bulk_create(
        fileless_image(study=study, name=f"img-{i}.jpg", alt_text=f"Benchmark image {i}")
        for i in range(images)
    )
    rng = random.Random(7)
    vocabulary = [
        "a",
        "red",
        "dog",
        "sits",
        "on",
        "the",
        "old",
        "sofa",
        "near",
        "two",
        "small",
        "cats",
        "under",
        "lamp",
        "light",
    ]
    captions = []
    for i, image in enumerate(rows):
        for k, system in enumerate(("alpha", "beta")):
            text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(100, 300))) + "."
            text = text[0].upper() + text[1:]
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=text,
                    text=text,
                    line=i * 10 + k + 2,
                )  # fmt: skip
            )
    Caption.objects.bulk_create(captions, batch_size=2000)
    study_open(study=study)
    return study, f"/p/{crowd_link_token(study)}/"


def arrive(base: str, link: str, k: int) -> dict:
    import requests

    session = requests.Session()
    entry = session.get(
        f"{base}{link}?PROLIFIC_PID=bench-{k}&STUDY_ID=bench&SESSION_ID=s{k}",
        timeout=harness.REQUEST_TIMEOUT,
    )
    entry.raise_for_status()
    return {"session": session, "next": entry.url.rstrip("/") + "/next/"}


def mark_until_deadline(base: str, k: int, arrived: dict, deadline: float) -> dict:
    """GET the caption page, POST one or two marked words and a score, until the deadline."""
    import requests

    pid = f"bench-{k}"
    rng = random.Random(k)
    session, next_url = arrived["session"], arrived["next"]
    run = {"sent": [], "post": [], "get": [], "errors": []}
    try:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
            run["get"].append(time.perf_counter() - began)
            form = FORM.search(page.text)
            if form is None:
                if page.status_code != 200:
                    run["errors"].append(f"{pid}: GET {page.status_code}")
                break
            text = html.unescape(TEXT.search(page.text).group(1))
            words = [(int(a), int(b)) for a, b in WORD.findall(page.text)]
            chosen = sorted(rng.sample(words, rng.randint(1, 2)))
            marks = [
                {
                    "start": a,
                    "end": b,
                    "text": text[a:b],
                    "severity": rng.choice(["minor", "major"]),
                    "category": "object",
                }  # fmt: skip
                for a, b in chosen
            ]
            action = form.group(1)
            data = {
                "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
                "part": "0",
                "spans": json.dumps(marks),
                "score": str(rng.randint(0, 100)),
            }
            began = time.perf_counter()
            answer = session.post(
                base + action, data=data, allow_redirects=False, timeout=harness.REQUEST_TIMEOUT
            )
            run["post"].append(time.perf_counter() - began)
            if answer.status_code == 302:
                token = action.rstrip("/").rsplit("/", 1)[-1]
                run["sent"].append((pid, token, [(m["start"], m["end"], m["text"]) for m in marks]))
            else:
                run["errors"].append(f"{pid}: POST {answer.status_code} {answer.text[:100]!r}")
    except requests.RequestException as exc:
        run["errors"].append(f"{pid}: {type(exc).__name__}: {exc}")
    return run


def integrity_check(study, sent) -> dict:
    from annotation.models import Judgment

    stored = {
        (pid, str(token)): sorted((m["start"], m["end"], m["text"]) for m in payload["spans"])
        for pid, token, payload in Judgment.objects.filter(study=study).values_list(
            "participant__external_id", "assignment__token", "payload"
        )
    }
    expected = {(pid, str(token)): sorted(marks) for pid, token, marks in sent}
    return {"sent": len(expected), "stored": len(stored), "ok": expected == stored}


def vicr_same_run(args) -> dict:
    """``bench/vicr_game.py`` at the same size, as a subprocess (its own database), with the
    same longer gunicorn start limit as this script (nothing else of it changes)."""
    runner = (
        "import runpy, sys; sys.path.insert(0, 'bench'); import _harness as h; "
        "wait = h.wait_until_up; h.wait_until_up = lambda base, process=None, timeout=0: "
        f"wait(base, process, timeout={STARTUP_SECONDS}); "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            runner,
            str(ROOT / "bench" / "vicr_game.py"),
            "--players",
            str(args.workers),
            "--seconds",
            str(args.seconds),
            "--workers",
            str(args.gunicorn_workers),
            "--server",
            args.server,
            "--database",
            f"{args.database}_vicr",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    written = sorted(harness.RESULTS.glob("vicr_game-*.json"))
    if out.returncode not in (0, 1) or not written:
        return {"error": out.stderr[-1500:]}
    result = json.loads(written[-1].read_text())
    keys = ("ratings_per_second", "ratings", "seconds", "replay", "load_average_at_start")
    return {key: result.get(key) for key in keys} | {"file": written[-1].name}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-runs", type=int, default=3)
    parser.add_argument("--path", type=Path, default=DEFAULT)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_spans")
    parser.add_argument("--no-vicr", action="store_true")
    args = parser.parse_args()
    if not (1 <= args.workers <= 200 and 10 <= args.images <= 5000 and 1 <= args.report_runs <= 10):
        parser.error("--workers 1..200, --images 10..5,000, --report-runs 1..10")
    if not args.path.is_file():
        sys.exit(f"MQM TSV not found at {args.path}")
    seconds = harness.bounded_seconds(args.seconds)
    env = harness.prepare_database(args.server, args.database)
    import annotation

    print(f"code under test: {annotation.__file__}", flush=True)
    result = {"when": harness.now_iso(), "code": annotation.__file__,
              "load_average_before": harness.load_average()}  # fmt: skip
    result["report"] = report_part(args.path, args.report_runs)
    print(json.dumps({"report": result["report"]}, indent=2), flush=True)
    study, link = build_study(args.images)
    # The harness gives gunicorn 30 s to answer; on a machine shared with other builds it
    # may need longer, so it gets STARTUP_SECONDS and its start (not the measured traffic)
    # is tried up to 3 times.
    wait = harness.wait_until_up
    harness.wait_until_up = lambda base, process=None, timeout=0: wait(
        base, process, timeout=STARTUP_SECONDS
    )
    for attempt in range(3):
        try:
            with harness.gunicorn(env, workers=args.gunicorn_workers) as server:
                print(f"spans: gunicorn on {server.base}, {args.workers} workers, {seconds:.0f} s")
                crowd = harness.run_crowd(
                    args.workers,
                    arrive=lambda k: arrive(server.base, link, k),
                    play=lambda k, arrived, deadline: mark_until_deadline(
                        server.base, k, arrived, deadline
                    ),
                    seconds=seconds,
                    server=server,
                )
            break
        except SystemExit as exc:
            if "did not start" not in str(exc) or attempt == 2:
                raise
            print(f"{exc}; starting it again", flush=True)
    sent = [row for run in crowd.results for row in run["sent"]]
    errors = crowd.errors + [error for run in crowd.results for error in run["errors"]]
    check = integrity_check(study, sent)
    result["spans"] = {
        "code_path": "gunicorn -> crowd link -> GET next caption page -> POST spans JSON + "
        "score -> judgment_submit (PostgreSQL)",
        "crowd_workers": args.workers,
        "images": args.images,
        "gunicorn_workers": args.gunicorn_workers,
        "seconds": round(crowd.elapsed, 2),
        "judgments": len(sent),
        "judgments_per_second": down(len(sent) / crowd.elapsed),
        "answer_post_ms": harness.summary([t for run in crowd.results for t in run["post"]]),
        "caption_page_get_ms": harness.summary([t for run in crowd.results for t in run["get"]]),
        "cpu": crowd.cpu,
        "load_average_at_start": crowd.load_at_start,
        "errors": errors[:20],
        "error_count": len(errors),
        "integrity": check,
    }
    print(json.dumps({"spans": result["spans"]}, indent=2, default=str), flush=True)
    if not args.no_vicr:
        result["vicr_game"] = vicr_same_run(args)
        vicr = result["vicr_game"]
        # From VICR's counts, not its rounded ratings_per_second.
        rate = vicr["ratings"] / vicr["seconds"] if vicr.get("seconds") else None
        if rate:
            result["spans_over_vicr"] = down(len(sent) / crowd.elapsed / rate)
    result["load_average_after"] = harness.load_average()
    harness.write_result("spans", result)
    if not check["ok"] or errors or not result["report"].get("published_ok"):
        sys.exit(1)


if __name__ == "__main__":
    main()
