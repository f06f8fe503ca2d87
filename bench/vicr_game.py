"""Benchmark: 100 VICR players on 2,000 game pairs through gunicorn and PostgreSQL.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about a minute:

    .venv/bin/python bench/vicr_game.py [--players 100] [--pairs 2000] [--seconds 45] \
        [--workers 4] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_vicr]

1. (Re)creates the scratch database and migrates it (``manage.py migrate``).
2. Builds a live VICR study: 10 tutorial, 20 probation and ``--pairs`` game pairs (image
   rows without files; two primed ratings per game pair), settings
   ``seconds_before_submit=0`` (benchmark only: the 3-second wait would measure sleeping).
   The players skip the tutorial: their participants are created in the database already
   in the game phase (as ``after_submit`` leaves a player who passed the tutorial), under
   the Prolific ids they then arrive with.
3. Starts gunicorn (``--workers`` sync workers) on a free loopback port and lets each
   player (a thread with its own ``requests.Session``) arrive through the signed crowd
   link, then loop: GET the next pair, parse the form, POST a rating (a noisy view of a
   hidden per-pair quality) and read the feedback page, until ``--seconds`` pass (at most
   60) or nothing is left.
4. Stops gunicorn and replays every game pair's ratings in commit order (Judgment id)
   through ``rubrics.vicr`` (priming rule + Algorithm 1): each stored pool size, consensus
   and points must equal the replay's. Also checks that no pair exceeds ``max_ratings``
   and that no player rated a pair twice.

Prints ratings/s, latency percentiles of submit+feedback (the POST, which renders the
feedback page) and the replay check, and writes JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
MAX_SECONDS = 60
FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="capeval_bench_vicr")
    args = parser.parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    database_url = f"{args.server.rstrip('/')}/{args.database}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "capeval.settings",
        "ALLOWED_HOSTS": "127.0.0.1",
        "CAPEVAL_DB_CONN_MAX_AGE": "60",
        "DEBUG": "false",
    }
    env.pop("REDIS_URL", None)
    recreate_database(args.server, args.database)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
    )
    os.environ.update(env)
    sys.path[:0] = [str(REPO), str(REPO / "platform")]
    import django

    django.setup()
    study, link = build_study(args.players, args.pairs)
    port = free_port()
    server = subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "gunicorn"),
            "capeval.wsgi:application",
            "--pythonpath",
            f"{REPO},{REPO / 'platform'}",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.workers),
            "--preload",
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(base)
        print(
            f"gunicorn ({args.workers} workers) on {base}; {args.players} players, "
            f"{args.pairs} pairs, {seconds:.0f} s",
            flush=True,
        )
        played = play(base, link, args.players, seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    check = replay_check(study)
    latencies = sorted(played["latencies"])
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "players": args.players,
        "pairs": args.pairs,
        "workers": args.workers,
        "seconds": round(played["elapsed"], 2),
        "cpus": os.cpu_count(),
        "load_average_at_start": played["load"],
        "ratings": len(latencies),
        "ratings_per_second": round(len(latencies) / played["elapsed"], 1),
        "submit_feedback_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 1),
            "p95": round(percentile(latencies, 95) * 1000, 1),
            "p99": round(percentile(latencies, 99) * 1000, 1),
            "mean": round(statistics.fmean(latencies) * 1000, 1) if latencies else None,
        },
        "errors": played["errors"][:20],
        "error_count": len(played["errors"]),
        "replay": check,
    }
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"vicr_game-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if not check["ok"] or played["errors"]:
        sys.exit(1)


def recreate_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def build_study(players: int, pairs: int):
    from annotation.models import Caption, Image, Participant, User
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="VICR benchmark",
        mode="vicr",
        seed=7,
        settings={"seconds_before_submit": 0},
    )
    rng = random.Random(7)
    total = 10 + 20 + pairs
    images = Image.objects.bulk_create(
        Image(
            study=study,
            name=f"img-{i}.jpg",
            sha256="",
            file="",
            display="",
            width=0,
            height=0,
            format="",
            alt_text=f"Benchmark image {i}",
        )
        for i in range(total)
    )
    captions = []
    for i, image in enumerate(images):
        purpose = "tutorial" if i < 10 else "probation" if i < 30 else "study"
        quality = rng.randint(1, 5)
        captions.append(
            Caption(
                study=study,
                image=image,
                system="Bench",
                raw_text=f"caption {i}",
                text=f"caption {i}",
                purpose=purpose,
                line=i + 2,
                truth=quality if purpose != "study" else None,
                explanation="Benchmark." if purpose != "study" else "",
                prime_ratings=[]
                if purpose != "study"
                else [min(5, max(1, quality + rng.choice((-1, 0, 0, 1)))) for _ in range(2)],
                metrics={"quality": quality},
            )
        )
    Caption.objects.bulk_create(captions, batch_size=1000)
    study_open(study=study)
    Participant.objects.bulk_create(
        Participant(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=f"bench-{k}",
            status="game",
            state={
                "player": {"phase": "game", "probation_attempts": 0, "score": 0, "game_ratings": 0},
                "tutorial_score": 20,
                "block": [],
            },
        )
        for k in range(players)
    )
    return study, f"/p/{crowd_link_token(study)}/"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(base: str) -> None:
    import requests

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            requests.get(base + "/accounts/login/", timeout=15)
            return
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.2)
    raise SystemExit("gunicorn did not start within 30 s")


def play(base: str, link: str, players: int, seconds: float) -> dict:
    import requests

    qualities = caption_qualities()
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(players + 1)
    deadline_box: list[float] = []

    def player(k: int) -> None:
        try:
            run_player(k)
        except Exception as exc:  # a broken player must not hang the barrier
            start.abort()
            with lock:
                errors.append(f"player {k}: {exc!r}")

    def run_player(k: int) -> None:
        rng = random.Random(k)
        session = requests.Session()
        response = session.get(f"{base}{link}?PROLIFIC_PID=bench-{k}", timeout=30)
        study_next = response.url.replace("/s/", "/s/", 1).rstrip("/") + "/next/"
        mine: list[float] = []
        # Warm-up, not measured: each worker's first request imports the URL configuration.
        page = session.get(study_next, timeout=60)
        start.wait()
        while time.monotonic() < deadline_box[0]:
            action = FORM_ACTION.search(page.text)
            if action is None:
                if "Thank you" not in page.text:
                    with lock:
                        errors.append(
                            f"player {k}: no pair form: {page.status_code} {page.text[:300]!r}"
                        )
                break  # nothing left for this player
            token = CSRF_INPUT.search(page.text).group(1)
            caption = re.search(r"“caption (\d+)”", page.text)
            quality = qualities.get(int(caption.group(1)), 3) if caption else 3
            rating = min(5, max(1, quality + rng.choice((-1, 0, 0, 0, 1))))
            sent = time.perf_counter()
            answer = session.post(
                base + action.group(1),
                data={"csrfmiddlewaretoken": token, "rating": str(rating), "part": "0"},
                headers={"Referer": page.url},
                timeout=30,
            )
            took = time.perf_counter() - sent
            if answer.status_code != 200 or 'id="vicr-next"' not in answer.text:
                with lock:
                    errors.append(f"player {k}: {answer.status_code} {answer.text[:120]!r}")
            else:
                mine.append(took)
            page = session.get(study_next, timeout=30)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=player, args=(k,), daemon=True) for k in range(players)]
    deadline_box.append(float("inf"))
    for thread in threads:
        thread.start()
    start.wait(timeout=300)  # every player has arrived and seen a first pair
    began = time.monotonic()
    deadline_box[0] = began + seconds
    load = os.getloadavg()[0]
    for thread in threads:
        thread.join(timeout=seconds + 60)
    return {
        "latencies": latencies,
        "errors": errors,
        "elapsed": time.monotonic() - began,
        "load": load,
    }


def caption_qualities() -> dict[int, int]:
    from annotation.models import Caption

    return {
        int(text.split()[-1]): metrics["quality"]
        for text, metrics in Caption.objects.filter(purpose="study").values_list("text", "metrics")
    }


def replay_check(study) -> dict:
    """Replay each pair's ratings in commit (id) order through rubrics.vicr."""
    from annotation.models import Caption, Item, Judgment
    from rubrics import vicr as rules

    primes = dict(Caption.objects.filter(study=study).values_list("id", "prime_ratings"))
    caption_of = {
        pk: spec["caption_id"]
        for pk, spec in Item.objects.filter(study=study, kind="game").values_list("id", "spec")
    }
    rows = (
        Judgment.objects.filter(study=study, phase="game")
        .order_by("id")
        .values_list("item_id", "participant_id", "payload", "result")
    )
    humans: dict[int, list[int]] = defaultdict(list)
    seen: set[tuple[int, int]] = set()
    mismatches, repeats = [], 0
    for item_id, participant_id, payload, result in rows:
        if (participant_id, item_id) in seen:
            repeats += 1
        seen.add((participant_id, item_id))
        pool = rules.consensus_pool(humans[item_id], primes[caption_of[item_id]])
        scored = rules.score_rating(payload["rating"], pool)
        expected = (len(pool), scored.consensus, scored.points)
        got = (result["pool_size"], result["consensus"], result["points"])
        if expected != got:
            mismatches.append({"item": item_id, "expected": expected, "stored": got})
        humans[item_id].append(payload["rating"])
    max_ratings = study.settings["max_ratings"]
    over = sum(1 for ratings in humans.values() if len(ratings) > max_ratings)
    per_pair = [len(humans.get(pk, [])) for pk in caption_of]
    return {
        "ok": not mismatches and not repeats and not over,
        "ratings_replayed": sum(per_pair),
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:5],
        "repeated_pairs": repeats,
        "pairs_over_max": over,
        "pairs_with_3_or_more": sum(1 for n in per_pair if n >= 3),
        "most_ratings_on_a_pair": max(per_pair, default=0),
    }


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(pct / 100 * len(values) + 0.5) - 1))
    return values[index]


if __name__ == "__main__":
    main()
