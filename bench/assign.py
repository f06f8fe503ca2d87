"""Benchmark: 64 participants asking for the next item and submitting, on 20,000 items.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about 1.5 minutes:

    .venv/bin/python bench/assign.py [--participants 64] [--items 20000] [--seconds 45] \
        [--race-items 40] [--race-target 3] [--race-seconds 20] [--workers 3] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench_assign] \
        [--minimal-seconds 10] [--count-seconds 5] [--count-participants 4] \
        [--old-tree PATH [--new-tree PATH] [--rounds 1]]

What it exercises is the assignment service (``services.assignments.assignment_next``) and
the submission service behind the generic participant pages (crowd link -> next ->
submit), with a real mode: VICR game pairs. VICR is the mode that asks the assignment
service the most: every rating is one lease of a one-part item (HUMANr leases a group of
10 trials once per 10 answers), every player may get every pair (THumB narrows the
candidates by stage and by the annotator's own stage-1 work), and all players are
served the least-rated pairs first, so they all race for the same few rows. Scoring a
game rating also locks the item row against the other ratings of that pair.

1. (Re)creates the scratch database and migrates it.
2. Builds two live VICR studies with ``seconds_before_submit=0`` (the 3-second rule would
   measure sleeping) and ``--participants`` Prolific participants in each, created already
   in the game phase and past the first-game check (so every answer stays a game rating):
   - **bulk**: ``--items`` game pairs, target ``max_ratings`` = 7 each;
   - **race**: ``--race-items`` game pairs with ``max_ratings=--race-target`` (120 slots),
     while each of the participants would rate every pair: all of them race for the last
     slots of every pair, every pair fills up, and the target check is meaningful.
3. Starts gunicorn (``--workers`` sync workers) on a free loopback port. Each participant
   (a thread with its own ``requests.Session``) enters through the signed crowd link (not
   timed), then loops: GET next, read the form, POST a rating 1-5 (the feedback page),
   until the run's time is up or it is told that nothing is left. The race runs first (at
   most ``--race-seconds``), then the bulk run (``--seconds``, at most 60).
4. Stops gunicorn and checks each study against what the clients recorded: every
   submission answered 2xx/3xx (participant, lease token, rating) is stored exactly once
   and nothing else is stored; no participant judged an item twice; every item has at most
   ``target`` judgments, its ``judgment_count`` equals the judgments stored for it and its
   ``open_lease_count`` the leases still open on it. The race must also fill every slot.

The ratio (issue 48, ``_baseline.py``): the same participants GET ``/ping`` (a request
through the full middleware doing no work) on the same gunicorn for ``--minimal-seconds``
before the race and again after the bulk run; each run's gunicorn CPU per request is
reported as a multiple of it. Then a counting pass: ``--count-participants`` of the bulk
run's participants, with their sessions, go on for ``--count-seconds`` through a second
gunicorn whose answers carry each request's SQL statement count (``_count_wsgi.py``); what
they send is checked with the bulk run's. ``--old-tree PATH`` runs all of it twice, first
on that tree's code (a ``git worktree`` of an older commit, its own scratch database
``<database>_old``), then on this checkout's (``<database>_new``), and prints both.

Prints judgments/s and latency percentiles of GET next and POST submit per run, the CPU the
clients, gunicorn and the machine used, the machine's ``python_speed`` (CPU seconds for 10**7
plain additions, to compare CPU per request between machines), and the checks; writes JSON
to ``bench/results/`` (git-ignored). Exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter

import _baseline as baseline
import _harness as harness
import vicr_game

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
#: Players past VICR's first-game check (``first_game_ratings`` = 20) stay in the game.
VETERAN_RATINGS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=64)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--race-items", type=int, default=40)
    parser.add_argument("--race-target", type=int, default=3)
    parser.add_argument("--race-seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_assign")
    parser.add_argument("--minimal-seconds", type=float, default=10)
    parser.add_argument("--count-seconds", type=float, default=5)
    parser.add_argument("--count-participants", type=int, default=4)
    parser.add_argument("--old-tree", help="an older commit's worktree, run first in this run")
    parser.add_argument("--new-tree", help="with --old-tree: the new code's tree, default this")
    parser.add_argument("--rounds", type=int, default=1, help="with --old-tree: old, new, ...")
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.old_tree:
        compare(args)
        return
    speed = harness.python_speed()  # before any load of ours
    env = harness.prepare_database(args.server, args.database)
    scenarios = [
        (
            "race",
            harness.bounded_seconds(args.race_seconds),
            vicr_game.build_study(
                args.participants,
                args.race_items,
                name="Assignment benchmark: race for the last slots",
                settings={
                    "max_ratings": args.race_target,
                    "min_ratings": min(3, args.race_target),
                },
                game_ratings=VETERAN_RATINGS,
            ),
        ),
        (
            "bulk",
            harness.bounded_seconds(args.seconds),
            vicr_game.build_study(
                args.participants,
                args.items,
                name=f"Assignment benchmark: {args.items} pairs",
                game_ratings=VETERAN_RATINGS,
            ),
        ),
    ]
    runs = {}
    minimal = []
    arrived_bulk: dict[int, dict] = {}
    with harness.gunicorn(env, workers=args.workers) as server:
        minimal.append(baseline.minimal_run(server, args.participants, args.minimal_seconds))
        for label, seconds, (study, link) in scenarios:
            print(
                f"{label}: gunicorn ({args.workers} workers) on {server.base}; "
                f"{args.participants} participants, {study.items.filter(kind='game').count()} "
                f"game pairs, at most {seconds:.0f} s",
                flush=True,
            )
            kept = arrived_bulk if label == "bulk" else {}
            crowd = harness.run_crowd(
                args.participants,
                arrive=lambda k, link=link, kept=kept: kept.setdefault(
                    k, arrive(server.base, link, k)
                ),
                play=lambda k, arrived, deadline: play(server.base, k, arrived, deadline),
                seconds=seconds,
                server=server,
            )
            runs[label] = (study, crowd)
        minimal.append(baseline.minimal_run(server, args.participants, args.minimal_seconds))
    # The counting pass: the bulk run's first participants go on, through a counting server.
    counted, count_errors = baseline.count_pass(
        env,
        clients=min(args.count_participants, len(arrived_bulk)),
        seconds=harness.bounded_seconds(args.count_seconds),
        arrive=lambda base, k: baseline.moved(arrived_bulk[k], base),
        play=lambda base, k, arrived, deadline: play(base, k, arrived, deadline),
    )
    runs["bulk"][1].errors.extend(count_errors)
    result = {
        "when": harness.now_iso(),
        "python_speed_s_per_1e7_additions": speed,
        "participants": args.participants,
        "gunicorn_workers": args.workers,
        "gunicorn_cpu_seconds_both_runs": server.cpu_seconds,
        "mode": "vicr (game phase, seconds_before_submit=0)",
        "code": str(harness.TREE),
        "minimal": minimal,
        "queries_per_request": baseline.query_summary(counted),
    }
    ok = True
    for label, (study, crowd) in runs.items():
        extra = counted if label == "bulk" else []
        result[label], passed = run_result(study, crowd, race=label == "race", extra=extra)
        result[label]["cpu_per_request_vs_minimal"] = baseline.ratios(
            result[label]["cpu_ms_per_request"], minimal
        )
        ok = ok and passed
    harness.write_result("assign", result, args.result_file)
    if not ok:
        sys.exit(1)


def compare(args) -> None:
    """Old tree, then this checkout (``--rounds`` times), each as a child run; both printed."""
    argv = baseline.without(sys.argv[1:], baseline.PARENT_ONLY)
    runs = baseline.compare_trees(
        __file__, argv, args.old_tree, args.database, args.rounds, args.new_tree
    )
    rows = []
    for label, run in runs:
        for phase in ("race", "bulk"):
            measured = run.get(phase) or {}
            ratio = measured.get("cpu_per_request_vs_minimal") or {}
            integrity = measured.get("integrity") or {}
            queries = run.get("queries_per_request") or {}
            rows.append(
                [
                    label,
                    phase,
                    (run.get("minimal") or [{}])[0].get("load_average_at_start"),
                    measured.get("load_average_at_end"),
                    ratio.get("minimal_gunicorn_ms_per_request"),
                    ratio.get("gunicorn_ms_per_request"),
                    ratio.get("ratio_to_minimal"),
                    ratio.get("postgres_ms_per_request"),
                    (queries.get("next") or {}).get("besides_session"),
                    (queries.get("submit") or {}).get("besides_session"),
                    (queries.get("feedback") or {}).get("besides_session"),
                    measured.get("judgments_per_second"),
                    f"{integrity.get('sent')} / {integrity.get('stored')}",
                    integrity.get("ok"),
                ]
            )
    table = baseline.markdown_table(
        [
            "code",
            "run",
            "load start",
            "load end",
            "/ping gunicorn ms",
            "gunicorn ms/request",
            "ratio",
            "PostgreSQL ms/request",
            "queries GET next",
            "queries POST",
            "queries feedback GET",
            "judgments/s",
            "sent / stored",
            "checks ok",
        ],
        rows,
    )
    print(table)
    harness.write_result(
        "assign-compare",
        {
            "when": harness.now_iso(),
            "runs": [{**run, "code": code} for code, run in runs],
            "table": table,
        },
    )
    if any(run.get("exit_status") for _label, run in runs):
        sys.exit(1)


def arrive(base: str, link: str, k: int) -> dict:
    """Enter through the crowd link (this creates the session, not a lease)."""
    import requests

    session = requests.Session()
    entry = session.get(f"{base}{link}?PROLIFIC_PID=bench-{k}", timeout=harness.REQUEST_TIMEOUT)
    entry.raise_for_status()
    return {"session": session, "next": entry.url.rstrip("/") + "/next/"}


def play(base: str, k: int, arrived: dict, deadline: float) -> dict:
    """GET next, POST a rating, repeat until the deadline or until nothing is left."""
    rng = random.Random(k)
    session, next_url = arrived["session"], arrived["next"]
    sent: list[tuple[str, str, int]] = []
    next_latencies: list[float] = []
    submit_latencies: list[float] = []
    submitted_at: list[float] = []
    errors: list[str] = []
    counts: dict = {}  # statement counts, from a counting server only
    http_requests = 0  # GET next, POST, the redirect's GET
    finished = False
    while time.monotonic() < deadline:
        began = time.perf_counter()
        page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
        next_latencies.append(time.perf_counter() - began)
        baseline.record_queries(counts, "next", page)
        action = FORM_ACTION.search(page.text)
        if action is None:
            http_requests += 1
            finished = page.status_code == 200 and "Thank you" in page.text
            if not finished:
                errors.append(f"bench-{k}: GET next {page.status_code} {page.text[:200]!r}")
            break
        token = action.group(1).rstrip("/").rsplit("/", 1)[-1]
        rating = rng.randint(1, 5)
        began = time.perf_counter()
        answer = session.post(
            base + action.group(1),
            data={
                "csrfmiddlewaretoken": CSRF_INPUT.search(page.text).group(1),
                "rating": str(rating),
                "part": "0",
            },
            headers={"Referer": page.url},
            timeout=harness.REQUEST_TIMEOUT,
        )
        submit_latencies.append(time.perf_counter() - began)
        # GET next, the POST and, after its redirect (issue 42; requests follows it), the
        # feedback page's GET: each a request to the server, counted as one.
        http_requests += 2 + len(answer.history)
        for hop in answer.history:
            baseline.record_queries(counts, "submit", hop)
        baseline.record_queries(counts, "feedback" if answer.history else "submit", answer)
        if 200 <= answer.status_code < 400 and 'id="vicr-next"' in answer.text:
            sent.append((f"bench-{k}", token, rating))
            submitted_at.append(time.monotonic())
        else:
            errors.append(f"bench-{k}: POST {answer.status_code} {answer.text[:200]!r}")
    return {
        "sent": sent,
        "next": next_latencies,
        "submit": submit_latencies,
        "last_submit": max(submitted_at, default=None),
        "finished": finished,
        "errors": errors,
        "http_requests": http_requests,
        **counts,
    }


def run_result(
    study, crowd: harness.Crowd, *, race: bool, extra: list[dict] = ()
) -> tuple[dict, bool]:
    """The run's numbers and checks; ``extra``: the counting pass's results on the same
    study, whose submissions the check counts too (not its timing)."""
    sent = [row for played in [*crowd.results, *extra] for row in played["sent"]]
    errors = crowd.errors + [
        error for played in [*crowd.results, *extra] for error in played["errors"]
    ]
    check = integrity_check(study, sent)
    measured = {
        "seconds": round(crowd.elapsed, 2),
        "load_average_at_start": crowd.load_at_start,
        "load_average_at_end": crowd.load_at_end,
        "cpu": crowd.cpu,
        # Per HTTP request: GET next, the POST and its redirect's GET (the feedback page).
        "http_requests": sum(p["http_requests"] for p in crowd.results),
        "cpu_ms_per_request": harness.cpu_per_request(
            crowd.cpu, sum(p["http_requests"] for p in crowd.results)
        ),
        # Per judgment (GET next + POST + feedback GET), the unit of the issue-27 tables.
        "cpu_ms_per_judgment": harness.cpu_per_request(
            crowd.cpu, sum(len(played["sent"]) for played in crowd.results)
        ),
        "judgments": sum(len(played["sent"]) for played in crowd.results),
        "judgments_per_second": round(
            sum(len(played["sent"]) for played in crowd.results) / crowd.elapsed, 1
        ),
        "next_ms": harness.summary([t for played in crowd.results for t in played["next"]]),
        "submit_ms": harness.summary([t for played in crowd.results for t in played["submit"]]),
        "participants_told_nothing_left": sum(1 for played in crowd.results if played["finished"]),
        "errors": errors[:20],
        "error_count": len(errors),
        "integrity": check,
    }
    passed = check["ok"] and not errors
    if race:
        last = [played["last_submit"] for played in crowd.results if played["last_submit"]]
        measured["seconds_to_fill"] = round(max(last) - crowd.started, 2) if last else None
        measured["judgments_per_second"] = (
            round(len(sent) / measured["seconds_to_fill"], 1)
            if measured["seconds_to_fill"]
            else None
        )
        passed = passed and check["slots_filled"] == check["slots"]
    return measured, passed


def integrity_check(study, sent: list[tuple[str, str, int]]) -> dict:
    from django.db.models import Count, Q

    from annotation.models import Assignment, Item, Judgment

    stored = list(
        Judgment.objects.filter(study=study).values_list(
            "participant__external_id", "assignment__token", "payload__rating"
        )
    )
    stored_counts = Counter(stored)
    sent_counts = Counter(sent)
    pairs = Counter(Judgment.objects.filter(study=study).values_list("participant_id", "item_id"))
    items = list(
        Item.objects.filter(study=study, kind="game")
        .annotate(
            stored=Count("judgments", distinct=True),
            open_leases=Count(
                "assignments",
                filter=Q(assignments__status=Assignment.Status.OPEN),
                distinct=True,
            ),
        )
        .values_list("target", "judgment_count", "open_lease_count", "stored", "open_leases")
    )
    check = {
        "sent": len(sent),
        "stored": len(stored),
        "lost": sum((sent_counts - stored_counts).values()),
        "duplicated_or_unexpected": sum((stored_counts - sent_counts).values()),
        "judged_an_item_twice": sum(1 for n in pairs.values() if n > 1),
        "items_over_target": sum(1 for target, _c, _o, real, _l in items if real > target),
        "items_with_wrong_judgment_count": sum(
            1 for _t, count, _o, real, _l in items if count != real
        ),
        "items_with_wrong_open_lease_count": sum(
            1 for _t, _c, leases, _r, real in items if leases != real
        ),
        "slots": sum(target for target, *_ in items),
        "slots_filled": sum(min(real, target) for target, _c, _o, real, _l in items),
        "items_full": sum(1 for target, _c, _o, real, _l in items if real >= target),
    }
    check["ok"] = not any(
        check[key]
        for key in (
            "lost",
            "duplicated_or_unexpected",
            "judged_an_item_twice",
            "items_over_target",
            "items_with_wrong_judgment_count",
            "items_with_wrong_open_lease_count",
        )
    )
    return check


if __name__ == "__main__":
    main()
