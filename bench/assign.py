"""Benchmark: 64 participants asking for the next item and submitting, on 20,000 items.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about 1.5 minutes:

    .venv/bin/python bench/assign.py [--participants 64] [--items 20000] [--seconds 45] \
        [--race-items 40] [--race-target 3] [--race-seconds 20] [--workers 3] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench_assign]

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
    args = parser.parse_args()
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
    with harness.gunicorn(env, workers=args.workers) as server:
        for label, seconds, (study, link) in scenarios:
            print(
                f"{label}: gunicorn ({args.workers} workers) on {server.base}; "
                f"{args.participants} participants, {study.items.filter(kind='game').count()} "
                f"game pairs, at most {seconds:.0f} s",
                flush=True,
            )
            crowd = harness.run_crowd(
                args.participants,
                arrive=lambda k, link=link: arrive(server.base, link, k),
                play=lambda k, arrived, deadline: play(server.base, k, arrived, deadline),
                seconds=seconds,
                server=server,
            )
            runs[label] = (study, crowd)
    result = {
        "when": harness.now_iso(),
        "python_speed_s_per_1e7_additions": speed,
        "participants": args.participants,
        "gunicorn_workers": args.workers,
        "gunicorn_cpu_seconds_both_runs": server.cpu_seconds,
        "mode": "vicr (game phase, seconds_before_submit=0)",
    }
    ok = True
    for label, (study, crowd) in runs.items():
        result[label], passed = run_result(study, crowd, race=label == "race")
        ok = ok and passed
    harness.write_result("assign", result)
    if not ok:
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
    finished = False
    while time.monotonic() < deadline:
        began = time.perf_counter()
        page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
        next_latencies.append(time.perf_counter() - began)
        action = FORM_ACTION.search(page.text)
        if action is None:
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
    }


def run_result(study, crowd: harness.Crowd, *, race: bool) -> tuple[dict, bool]:
    sent = [row for played in crowd.results for row in played["sent"]]
    errors = crowd.errors + [error for played in crowd.results for error in played["errors"]]
    check = integrity_check(study, sent)
    measured = {
        "seconds": round(crowd.elapsed, 2),
        "load_average_at_start": crowd.load_at_start,
        "load_average_at_end": crowd.load_at_end,
        "cpu": crowd.cpu,
        "cpu_ms_per_request": harness.cpu_per_request(
            crowd.cpu, sum(len(p["next"]) + len(p["submit"]) for p in crowd.results)
        ),
        "judgments": len(sent),
        "judgments_per_second": round(len(sent) / crowd.elapsed, 1),
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
