"""Benchmark: crowd workers answering arena battles through gunicorn and PostgreSQL, beside
the HUMANr, THumB and error-span load benches in the same run (issues 23, 48; not a test).

    .venv/bin/python bench/arena_load.py [--workers 20] [--images 300] [--seconds 20] \
        [--gunicorn-workers 2] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_arena_load] [--no-humanr] [--no-thumb] [--no-spans] \
        [--minimal-seconds 10] [--count-seconds 5] [--count-workers 4] \
        [--old-tree PATH [--new-tree PATH] [--rounds 1]]

Follows ``bench/humanr_load.py``: recreates the scratch database, builds a live arena study
(``--images`` fileless images, 6 systems: 15 pairs x images battles; the mode's defaults but
``min_seconds=0``, since the minimum time would measure sleeping, and the per-address crowd
limits lifted, since every worker comes from 127.0.0.1), serves it with gunicorn on a free
loopback port, and lets ``--workers`` threads (each its own ``requests.Session``) arrive
through the signed Prolific link, then GET the battle page and POST one of the four
outcomes at random until ``--seconds`` pass (at most 60). Gold battles are served like any
battle and answered as an attentive worker would (the unaltered caption wins), which the
bench reads from the database (``gold_side``), so the catch rule keeps the crowd. Then
``bench/humanr_load.py``, ``bench/thumb_load.py`` and ``bench/spans_load.py`` run in turn
as subprocesses (``same_run``; ``--no-humanr``, ``--no-thumb``, ``--no-spans`` leave one
out) with the same crowd size, seconds and gunicorn workers, so every mode's judgments/s
and ratio come from the same machine at about the same load.
Checked: every POST answered 302 is one stored judgment, no worker met an image twice.
The ratio (issue 48, ``_baseline.py``): the same number of clients GET ``/ping`` (through
the full middleware, no work) on the same gunicorn for ``--minimal-seconds`` before and after
the battles; the battles' gunicorn CPU per request is reported as a multiple of it; then
``--count-workers`` of the workers go on for ``--count-seconds`` through a counting gunicorn
(``_count_wsgi.py``) for the queries per request, their answers checked with the run's.
The other modes' scripts do the same. ``--old-tree PATH`` runs everything on that tree's code
first (an older commit's ``git worktree``, databases ``<database>_old``), then on this
checkout's (``<database>_new``), and prints both.
Writes ``bench/results/arena_load-<time>.json`` (with the machine's ``python_speed``, to compare
CPU per request between machines); exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import _baseline as baseline
import _harness as harness

FORM = re.compile(r'<form method="post" action="([^"]+)" class="arena-form"')
PART = re.compile(r'name="part" value="(\d+)"')
SYSTEMS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
ROOT = Path(__file__).resolve().parents[1]


def build_study(images: int):
    from annotation.models import Caption, Image, User
    from annotation.modes.importing import fileless_image
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="Arena benchmark",
        mode="arena",
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
    captions = []
    for i, image in enumerate(rows):
        for k, system in enumerate(SYSTEMS):
            # Detailed captions (100-300 words), the arena's subject.
            text = " ".join(f"{system}{j % 17}" for j in range(rng.randint(100, 300)))
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=text,
                    text=text,
                    line=i * 10 + k + 2,
                )
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


def battle_until_deadline(base: str, k: int, arrived: dict, deadline: float) -> dict:
    """GET the battle page, POST a random outcome, until the deadline or nothing left."""
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
            baseline.record_queries(run, "get", page)
            form = FORM.search(page.text)
            if form is None:
                if page.status_code != 200:
                    run["errors"].append(f"{pid}: GET {page.status_code}")
                run["told_nothing_left"] = True
                break  # nothing left for this worker
            action = form.group(1)
            token = action.rstrip("/").rsplit("/", 1)[-1]
            data = {
                "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
                "part": PART.search(page.text).group(1),
                "outcome": gold_side(token) or rng.choice(["a", "b", "tie", "bothbad"]),
            }
            began = time.perf_counter()
            answer = session.post(
                base + action, data=data, allow_redirects=False, timeout=harness.REQUEST_TIMEOUT
            )
            run["post"].append(time.perf_counter() - began)
            baseline.record_queries(run, "post", answer)
            if answer.status_code == 302:
                run["sent"].append((pid, token))
            else:
                run["errors"].append(f"{pid}: POST {answer.status_code} {answer.text[:100]!r}")
    except requests.RequestException as exc:
        run["errors"].append(f"{pid}: {type(exc).__name__}: {exc}")
    finally:
        from django.db import connection

        connection.close()  # this thread's, opened by gold_side
    return run


def gold_side(token: str) -> str | None:
    """The side an attentive worker picks on a gold battle (the unaltered caption), or None
    on a system battle.

    The page does not say which battles are gold, so the bench reads it from the database
    (one indexed query per battle, in the bench's own process). Workers who clicked at
    random on gold battles too were flagged by the catch rule and served nothing more, so
    runs of the faster code ended before their time with few workers left.
    """
    from annotation.models import Assignment
    from annotation.modes.arena.protocol import left_is_a
    from annotation.modes.catch import CATCH

    lease = Assignment.objects.select_related("item", "participant__study").get(token=token)
    if lease.item.kind != CATCH:
        return None
    # The side was drawn from the lease id until cc043ea, from the lease since: the old
    # tree of an --old-tree comparison (issue 48's baseline, 230e884) takes the id.
    takes_id = "assignment_id" in inspect.signature(left_is_a).parameters
    return "a" if left_is_a(lease.participant.study, lease.pk if takes_id else lease) else "b"


def integrity_check(study, sent: list[tuple[str, str]]) -> dict:
    from django.db.models import Count

    from annotation.models import Judgment

    stored = set(
        Judgment.objects.filter(study=study).values_list(
            "participant__external_id", "assignment__token"
        )
    )
    sent_set = {(pid, str(token)) for pid, token in sent}
    stored = {(pid, str(token)) for pid, token in stored}
    repeats = (
        Judgment.objects.filter(study=study)
        .values("participant_id", "item__image_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    return {
        "sent": len(sent_set),
        "stored": len(stored),
        "equal": sent_set == stored,
        "image_repeats": repeats,
        "ok": sent_set == stored and repeats == 0,
    }


#: The other modes' load benches this one runs after the arena, in the same run: the
#: script ``bench/<mode>_load.py`` of each, left out by ``--no-<mode>``.
SAME_RUN = ("humanr", "thumb", "spans")
#: What the summary keeps of a same-run result (a key the mode's script does not write is
#: left out: HUMANr counts responses, the others judgments; each names its page's latency).
SAME_RUN_KEYS = (
    "judgments_per_second",
    "judgments",
    "judgments_by_kind",
    "responses_per_second",
    "responses",
    "seconds",
    "answer_post_ms",
    "trial_page_get_ms",
    "item_page_get_ms",
    "caption_page_get_ms",
    "error_count",
    "errors",
    "load_average_at_start",
    "load_average_at_end",
    "cpu_ms_per_request",
    "cpu_per_request_vs_minimal",
    "queries_per_request",
    "minimal",
)


def same_run(args, mode: str) -> dict:
    """``bench/<mode>_load.py`` with the same crowd size, seconds and gunicorn workers, as a
    subprocess (its own database, ``<database>_<mode>``)."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        path = Path(handle.name)
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / f"{mode}_load.py"),
            "--workers",
            str(args.workers),
            "--seconds",
            str(args.seconds),
            "--gunicorn-workers",
            str(args.gunicorn_workers),
            "--server",
            args.server,
            "--database",
            f"{args.database}_{mode}",
            "--minimal-seconds",
            str(args.minimal_seconds),
            "--count-seconds",
            str(args.count_seconds),
            "--count-workers",
            str(args.count_workers),
            "--result-file",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=harness.TREE,  # Celery's Django fix-up puts it first on sys.path
    )
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"error": out.stderr[-1500:]}
    finally:
        path.unlink(missing_ok=True)
    if out.returncode not in (0, 1):
        return {"error": out.stderr[-1500:]}
    return {key: result[key] for key in SAME_RUN_KEYS if key in result} | {
        "integrity_ok": result.get("integrity", {}).get("ok"),
        "sent": result.get("integrity", {}).get("sent"),
        "stored": result.get("integrity", {}).get("stored"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_arena_load")
    for mode in SAME_RUN:
        parser.add_argument(f"--no-{mode}", action="store_true", help=f"skip {mode}_load.py")
    parser.add_argument("--minimal-seconds", type=float, default=10)
    parser.add_argument("--count-seconds", type=float, default=5)
    parser.add_argument("--count-workers", type=int, default=4)
    parser.add_argument("--old-tree", help="an older commit's worktree, run first in this run")
    parser.add_argument("--new-tree", help="with --old-tree: the new code's tree, default this")
    parser.add_argument("--rounds", type=int, default=1, help="with --old-tree: old, new, ...")
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (1 <= args.workers <= 200 and 10 <= args.images <= 5000):
        parser.error("--workers 1..200, --images 10..5,000")
    if args.old_tree:
        compare(args)
        return
    seconds = harness.bounded_seconds(args.seconds)
    speed = harness.python_speed()  # before any load of ours
    env = harness.prepare_database(args.server, args.database)
    study, link = build_study(args.images)
    minimal = []
    kept: dict[int, dict] = {}
    with harness.gunicorn(env, workers=args.gunicorn_workers) as server:
        minimal.append(baseline.minimal_run(server, args.workers, args.minimal_seconds))
        print(f"arena: gunicorn on {server.base}, {args.workers} workers, {seconds:.0f} s")
        crowd = harness.run_crowd(
            args.workers,
            arrive=lambda k: kept.setdefault(k, arrive(server.base, link, k)),
            play=lambda k, arrived, deadline: battle_until_deadline(
                server.base, k, arrived, deadline
            ),
            seconds=seconds,
            server=server,
        )
        minimal.append(baseline.minimal_run(server, args.workers, args.minimal_seconds))
    counted, count_errors = baseline.count_pass(
        env,
        clients=min(args.count_workers, len(kept)),
        seconds=harness.bounded_seconds(args.count_seconds),
        arrive=lambda base, k: baseline.moved(kept[k], base),
        play=battle_until_deadline,
    )
    sent = [row for run in [*crowd.results, *counted] for row in run["sent"]]
    errors = (
        crowd.errors
        + count_errors
        + [error for run in [*crowd.results, *counted] for error in run["errors"]]
    )
    check = integrity_check(study, sent)
    timed = sum(len(run["sent"]) for run in crowd.results)
    cpu_ms = harness.cpu_per_request(
        crowd.cpu, sum(len(run["get"]) + len(run["post"]) for run in crowd.results)
    )
    result = {
        "when": harness.now_iso(),
        "python_speed_s_per_1e7_additions": speed,
        "arena": {
            "crowd_workers": args.workers,
            "images": args.images,
            "gunicorn_workers": args.gunicorn_workers,
            "seconds": round(crowd.elapsed, 2),
            "judgments": timed,
            "judgments_per_second": round(timed / crowd.elapsed, 1),
            # Workers served nothing more before the time was up (the catch rule, or done).
            "workers_told_nothing_left": sum(
                bool(run.get("told_nothing_left")) for run in crowd.results
            ),
            "answer_post_ms": harness.summary([t for run in crowd.results for t in run["post"]]),
            "battle_page_get_ms": harness.summary([t for run in crowd.results for t in run["get"]]),
            "cpu": crowd.cpu,
            "cpu_ms_per_request": cpu_ms,
            "cpu_per_request_vs_minimal": baseline.ratios(cpu_ms, minimal),
            "queries_per_request": baseline.query_summary(counted),
            "minimal": minimal,
            "load_average_at_start": crowd.load_at_start,
            "load_average_at_end": crowd.load_at_end,
            "errors": errors[:20],
            "error_count": len(errors),
            "integrity": check,
        },
    }
    print(json.dumps(result["arena"], indent=2, default=str), flush=True)
    for mode in SAME_RUN:
        if not getattr(args, f"no_{mode}"):
            result[mode] = same_run(args, mode)
            print(json.dumps({mode: result[mode]}, indent=2, default=str), flush=True)
    harness.write_result("arena_load", result, args.result_file)
    if not check["ok"] or errors:
        sys.exit(1)


def compare(args) -> None:
    """Old tree, then this checkout (``--rounds`` times), each as a child run; both printed."""
    argv = baseline.without(sys.argv[1:], baseline.PARENT_ONLY)
    runs = baseline.compare_trees(
        __file__, argv, args.old_tree, args.database, args.rounds, args.new_tree
    )
    rows = []
    for label, run in runs:
        for mode in ("arena", *SAME_RUN):
            measured = run.get(mode) or {}
            if not measured:
                continue
            ratio = measured.get("cpu_per_request_vs_minimal") or {}
            queries = measured.get("queries_per_request") or {}
            integrity = measured.get("integrity") or measured
            rows.append(
                [
                    label,
                    mode,
                    measured.get("load_average_at_start"),
                    measured.get("load_average_at_end"),
                    ratio.get("minimal_gunicorn_ms_per_request"),
                    ratio.get("gunicorn_ms_per_request"),
                    ratio.get("ratio_to_minimal"),
                    ratio.get("postgres_ms_per_request"),
                    (queries.get("get") or {}).get("besides_session"),
                    (queries.get("post") or {}).get("besides_session"),
                    measured.get("judgments_per_second") or measured.get("responses_per_second"),
                    f"{integrity.get('sent')} / {integrity.get('stored')}",
                    integrity.get("ok", integrity.get("integrity_ok")),
                ]
            )
    table = baseline.markdown_table(
        [
            "code",
            "mode",
            "load start",
            "load end",
            "/ping gunicorn ms",
            "gunicorn ms/request",
            "ratio",
            "PostgreSQL ms/request",
            "queries GET",
            "queries POST",
            "judgments/s",
            "sent / stored",
            "checks ok",
        ],
        rows,
    )
    print(table)
    harness.write_result(
        "arena_load-compare",
        {
            "when": harness.now_iso(),
            "runs": [{**run, "code": code} for code, run in runs],
            "table": table,
        },
    )
    if any(run.get("exit_status") for _label, run in runs):
        sys.exit(1)


if __name__ == "__main__":
    main()
