"""Benchmark: six ids from two addresses squat on every lease while honest workers ask.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about 1.5 minutes:

    python bench/squat.py [--seconds 60] [--honest 5] [--port 8651] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench_squat]

Issue 29, row 11: squatters who re-claim leases as they lapse held a lease on 577 of 577
polls, and the honest worker was served on 0 of 20 tries. This run measures the path an
honest worker takes through the real pages (gunicorn, PostgreSQL, ``GET /p/<study>/next/``
served by ``assignment_next``) while the squatters poll:

1. (Re)creates the scratch database and builds a live VICR study of 6 game pairs with one
   slot each (``min_ratings = max_ratings = 1``) and 30-second crowd leases (the shortest
   allowed), so six squatters can hold all of its capacity; players are created already in
   the game (``vicr_game.build_study``), with their networks set: squatters 0-2 on
   10.1.0.1, 3-5 on 10.2.0.1 (three ids each, the per-network lease limit), every honest
   worker on an address of its own.
2. Serves the project with gunicorn on loopback (``--port``, ``CAPEVAL_TRUSTED_PROXIES=1``:
   this script is the proxy and writes each client's address in X-Forwarded-For).
3. The six squatters enter, take a lease each, then poll ``next`` every 0.2 s without ever
   answering (faster than any person). Once their first leases have lapsed (30 s), the
   honest workers arrive one every 5 s, each polling ``next`` every 0.5 s; an honest worker
   is served when the page holds a pair's form, and then answers it (using the slot).
4. Reports each honest worker's time from first asking to served (p50/p95/max; the target
   is p95 < 5 s), how many squatter polls were refused (429) or held a lease, and checks
   that no item is over its target and the counters match the rows.

Before any lease has lapsed nobody can tell a squatter from a worker who is still reading,
so an honest worker who arrives then waits at most one lease (30 s here); the rule under
test is what happens from the first lapse on. Writes JSON to ``bench/results/``; exits 1
if a check fails or the p95 is over 5 s.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import _harness as harness
import vicr_game

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SQUATTERS = 6
LEASE_SECONDS = 30
SQUAT_POLL = 0.2
HONEST_POLL = 0.5
HONEST_EVERY = 5.0
TARGET_P95_SECONDS = 5.0


def squatter_address(k: int) -> str:
    return "10.1.0.1" if k < SQUATTERS // 2 else "10.2.0.1"


def honest_address(k: int) -> str:
    return f"10.3.0.{k + 1}"


def build(honest: int):
    from annotation.models import Participant

    study, link = vicr_game.build_study(
        SQUATTERS + honest,
        6,
        name="Squatting benchmark",
        settings={
            "min_ratings": 1,
            "max_ratings": 1,
            "crowd_lease_seconds": LEASE_SECONDS,
            "crowd_open_leases_per_address": 3,
        },
        game_ratings=20,  # past VICR's first-game check: every answer stays a game rating
    )
    for k in range(SQUATTERS + honest):
        address = squatter_address(k) if k < SQUATTERS else honest_address(k - SQUATTERS)
        Participant.objects.filter(study=study, external_id=f"bench-{k}").update(
            address=address, network=address
        )
    return study, link


def session_for(base: str, link: str, k: int, address: str):
    import requests

    session = requests.Session()
    session.headers["X-Forwarded-For"] = address
    entry = session.get(f"{base}{link}?PROLIFIC_PID=bench-{k}", timeout=harness.REQUEST_TIMEOUT)
    entry.raise_for_status()
    return session, entry.url.rstrip("/") + "/next/"


def squat(base: str, link: str, k: int, stop: threading.Event, out: dict) -> None:
    session, next_url = session_for(base, link, k, squatter_address(k))
    held = refused = other = 0
    while not stop.is_set():
        page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
        if FORM_ACTION.search(page.text):
            held += 1
        elif page.status_code == 429:
            refused += 1
        else:
            other += 1
        time.sleep(SQUAT_POLL)
    out[k] = {"held": held, "refused": refused, "other": other}


def honest_worker(base: str, link: str, k: int, deadline: float, out: dict) -> None:
    session, next_url = session_for(base, link, SQUATTERS + k, honest_address(k))
    asked = time.monotonic()
    tries = 0
    while time.monotonic() < deadline:
        tries += 1
        page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
        action = FORM_ACTION.search(page.text)
        if action:
            served = time.monotonic() - asked
            answer = session.post(
                base + action.group(1),
                data={
                    "csrfmiddlewaretoken": CSRF_INPUT.search(page.text).group(1),
                    "rating": "3",
                    "part": "0",
                },
                headers={"Referer": page.url},
                timeout=harness.REQUEST_TIMEOUT,
            )
            out[k] = {
                "served_after": round(served, 2),
                "tries": tries,
                "answer": answer.status_code,
            }
            return
        time.sleep(HONEST_POLL)
    out[k] = {"served_after": None, "tries": tries}


def serve(env: dict, port: int) -> subprocess.Popen:
    gunicorn = Path(sys.executable).parent / "gunicorn"
    return subprocess.Popen(
        [
            str(gunicorn),
            "capeval.wsgi:application",
            "--pythonpath",
            f"{harness.REPO},{harness.REPO / 'platform'}",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "3",
            "--preload",
            "--log-level",
            "warning",
        ],
        cwd=harness.REPO,
        env={**env, "CAPEVAL_TRUSTED_PROXIES": "1"},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--honest", type=int, default=5)
    parser.add_argument("--port", type=int, default=8651)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_squat")
    args = parser.parse_args()
    seconds = harness.bounded_seconds(args.seconds)
    env = harness.prepare_database(args.server, args.database)
    study, link = build(args.honest)
    base = f"http://127.0.0.1:{args.port}"
    process = serve(env, args.port)
    squatted: dict = {}
    honest: dict = {}
    try:
        harness.wait_until_up(base, process)
        stop = threading.Event()
        started = time.monotonic()
        deadline = started + seconds
        squatters = [
            threading.Thread(target=squat, args=(base, link, k, stop, squatted))
            for k in range(SQUATTERS)
        ]
        for thread in squatters:
            thread.start()
        workers = []
        for k in range(args.honest):
            # The first honest worker asks just after the squatters' first leases lapse.
            wait = started + LEASE_SECONDS + 1 + k * HONEST_EVERY - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if time.monotonic() >= deadline:
                break
            worker = threading.Thread(target=honest_worker, args=(base, link, k, deadline, honest))
            worker.start()
            workers.append(worker)
        for worker in workers:
            worker.join(timeout=seconds + harness.REQUEST_TIMEOUT)
        stop.set()
        for thread in squatters:
            thread.join(timeout=harness.REQUEST_TIMEOUT * 2)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    result, passed = report(study, squatted, honest)
    harness.write_result("squat", result)
    sys.exit(0 if passed else 1)


def report(study, squatted: dict, honest: dict) -> tuple[dict, bool]:
    from annotation.models import Assignment, Item

    waits = [h["served_after"] for h in honest.values() if h["served_after"] is not None]
    never = sum(1 for h in honest.values() if h["served_after"] is None)
    stats = harness.summary(waits)  # milliseconds
    counters_ok = True
    for item in Item.objects.filter(study=study):
        leases = Assignment.objects.filter(item=item)
        open_leases = leases.filter(status=Assignment.Status.OPEN).count()
        submitted = leases.filter(status=Assignment.Status.SUBMITTED).count()
        counters_ok &= item.open_lease_count == open_leases
        counters_ok &= item.judgment_count == submitted
        counters_ok &= submitted + open_leases <= item.target
    p95 = stats.get("p95")
    passed = bool(waits) and never == 0 and counters_ok and p95 / 1000 < TARGET_P95_SECONDS
    result = {
        "path": "GET /p/<study>/next/ (gunicorn, 3 sync workers, PostgreSQL), VICR game pairs",
        "lease_seconds": LEASE_SECONDS,
        "squatters": SQUATTERS,
        "honest_workers": len(honest),
        "honest_time_to_served_ms": stats,
        "honest_never_served": never,
        "honest": honest,
        "squatter_polls": {
            "held_a_lease": sum(s["held"] for s in squatted.values()),
            "refused_429": sum(s["refused"] for s in squatted.values()),
            "other": sum(s["other"] for s in squatted.values()),
        },
        "counters_match_and_within_target": counters_ok,
        "passed": passed,
    }
    return result, passed


if __name__ == "__main__":
    main()
