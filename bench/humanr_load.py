"""Benchmark: 200 simulated HUMANr crowd workers answering groups through gunicorn and PostgreSQL.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about a minute:

    .venv/bin/python bench/humanr_load.py [--workers 200] [--images 1500] [--seconds 45] \
        [--gunicorn-workers 4] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_humanr]

1. (Re)creates the scratch database and migrates it (``manage.py migrate``).
2. Builds a live HUMANr study: ``--images`` images (rows without files), each with three
   human captions and one caption of each of two model systems, so 3 comparisons per
   image in groups of 9 + 1 attention check, 3 workers per group;
   ``min_seconds_per_trial=0`` (benchmark only: the minimum time would measure sleeping).
3. Starts gunicorn (``--gunicorn-workers`` sync workers) on a free loopback port. Each
   simulated worker (a thread with its own ``requests.Session``) arrives through the signed
   Prolific link with its own PROLIFIC_PID, then loops until ``--seconds`` pass (at most
   60) or nothing is left: GET the trial page, read the form (action, part, left caption)
   and the CSRF token from the cookie, POST an answer 1-9 (about 2% of answers are posted
   twice, as a double click would). After the 10th trial it reads the end-of-group page
   (the completion code must be on it) and starts another group.
4. Stops gunicorn and checks the stored judgments against what the simulators sent: the
   set of (worker, lease token, part, raw) must be equal (no lost, duplicated or
   misattributed response), no two judgments share (lease, part), every finished group has
   10 judgments, all of them flagged excluded exactly when its attention check failed (the
   answers are uniform random, so about 5 in 9 checks fail), no group is served beyond its
   target, and no worker saw a comparison twice.

Prints responses/s and latency percentiles of the answer POST and of the trial page GET,
and writes JSON to ``bench/results/`` (git-ignored). Exits 1 if a check fails.
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
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
MAX_SECONDS = 60
FORM = re.compile(r'<form method="post" action="([^"]+)" class="hr-form"')
PART = re.compile(r'name="part" value="(\d+)"')
LEFT = re.compile(r'name="left" value="(\d+)"')
SYSTEMS = ("GIT", "ClipCap")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--images", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="capeval_bench_humanr")
    args = parser.parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    env = {
        **os.environ,
        "DATABASE_URL": f"{args.server.rstrip('/')}/{args.database}",
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
    study, link = build_study(args.images)
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
            str(args.gunicorn_workers),
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
            f"gunicorn ({args.gunicorn_workers} workers) on {base}; {args.workers} crowd "
            f"workers, {study.items.count()} groups, {seconds:.0f} s",
            flush=True,
        )
        run = simulate(base, link, args.workers, seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    check = integrity_check(study, run["sent"])
    posts, gets = sorted(run["post_latencies"]), sorted(run["get_latencies"])
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "crowd_workers": args.workers,
        "images": args.images,
        "groups": study.items.count(),
        "gunicorn_workers": args.gunicorn_workers,
        "database": "postgresql",
        "seconds": round(run["elapsed"], 2),
        "responses": len(run["sent"]),
        "responses_per_second": round(len(run["sent"]) / run["elapsed"], 1),
        "groups_finished": run["groups_finished"],
        "double_posts": run["double_posts"],
        "answer_post_ms": summary(posts),
        "trial_page_get_ms": summary(gets),
        "errors": run["errors"][:20],
        "error_count": len(run["errors"]),
        "integrity": check,
    }
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"humanr_load-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if not check["ok"] or run["errors"]:
        sys.exit(1)


def recreate_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def build_study(images: int):
    from annotation.models import Caption, Image, User
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="HUMANr benchmark",
        mode="humanr",
        seed=7,
        settings={"min_seconds_per_trial": 0, "workers_per_comparison": 3},
    )
    rows = Image.objects.bulk_create(
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
        for i in range(images)
    )
    captions = []
    for i, image in enumerate(rows):
        for k in range(3):
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=Caption.HUMAN,
                    raw_text=f"human {k} of {i}",
                    text=f"human {k} of {i}",
                    line=i * 10 + k,
                )
            )
        for k, system in enumerate(SYSTEMS):
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=f"{system} of {i}",
                    text=f"{system} of {i}",
                    line=i * 10 + 5 + k,
                )
            )
    Caption.objects.bulk_create(captions, batch_size=2000)
    study_open(study=study)
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


def simulate(base: str, link: str, workers: int, seconds: float) -> dict:
    import requests

    sent: list[tuple[str, str, int, int]] = []
    post_latencies: list[float] = []
    get_latencies: list[float] = []
    errors: list[str] = []
    counters: Counter[str] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(workers + 1)
    deadline_box: list[float] = []

    def worker(k: int) -> None:
        pid = f"bench-{k}"
        rng = random.Random(k)
        session = requests.Session()
        mine_sent, mine_post, mine_get, mine_errors = [], [], [], []
        finished = doubles = 0
        try:
            entry = session.get(
                f"{base}{link}?PROLIFIC_PID={pid}&STUDY_ID=bench&SESSION_ID=s{k}", timeout=30
            )
            next_url = entry.url.rstrip("/") + "/next/"
        except requests.RequestException as exc:
            with lock:
                errors.append(f"{pid}: entry failed: {exc}")
            start.wait()
            return
        start.wait()
        try:
            finished, doubles = answer_until_deadline(
                session, next_url, pid, rng, mine_sent, mine_post, mine_get, mine_errors
            )
        except requests.RequestException as exc:
            # A request that timed out may or may not be stored: the check reports it.
            mine_errors.append(f"{pid}: {type(exc).__name__}: {exc}")
        with lock:
            sent.extend(mine_sent)
            post_latencies.extend(mine_post)
            get_latencies.extend(mine_get)
            errors.extend(mine_errors)
            counters["groups_finished"] += finished
            counters["double_posts"] += doubles

    def answer_until_deadline(
        session, next_url, pid, rng, mine_sent, mine_post, mine_get, mine_errors
    ):
        finished = doubles = 0
        while time.monotonic() < deadline_box[0]:
            began = time.perf_counter()
            page = session.get(next_url, timeout=30)
            mine_get.append(time.perf_counter() - began)
            form = FORM.search(page.text)
            if form is None:
                if page.status_code != 200:
                    mine_errors.append(f"{pid}: GET {page.status_code}")
                break  # no group left for this worker
            action = form.group(1)
            token = action.rstrip("/").rsplit("/", 1)[-1]
            part = int(PART.search(page.text).group(1))
            raw = rng.randint(1, 9)
            data = {
                "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
                "part": str(part),
                "raw": str(raw),
                "left": LEFT.search(page.text).group(1),
            }
            began = time.perf_counter()
            answer = session.post(base + action, data=data, allow_redirects=False, timeout=30)
            mine_post.append(time.perf_counter() - began)
            if rng.random() < 0.02:  # a double click: the stored answer comes back
                again = session.post(
                    base + action,
                    data={**data, "raw": str(10 - raw)},
                    allow_redirects=False,
                    timeout=30,
                )
                doubles += 1
                if again.status_code not in (200, 302):
                    mine_errors.append(f"{pid}: double POST {again.status_code}")
            if answer.status_code == 302:
                mine_sent.append((pid, token, part, raw))
            elif answer.status_code == 200 and "Group complete" in answer.text:
                mine_sent.append((pid, token, part, raw))
                finished += 1
                if 'id="hr-code"' not in answer.text:
                    mine_errors.append(f"{pid}: end of group without a completion code")
            else:
                mine_errors.append(f"{pid}: POST {answer.status_code} {answer.text[:100]!r}")
        return finished, doubles

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(workers)]
    for thread in threads:
        thread.start()
    deadline_box.append(time.monotonic() + seconds)
    began = time.monotonic()
    start.wait()
    for thread in threads:
        thread.join(timeout=seconds + 60)
    return {
        "sent": sent,
        "post_latencies": post_latencies,
        "get_latencies": get_latencies,
        "errors": errors,
        "elapsed": time.monotonic() - began,
        "groups_finished": counters["groups_finished"],
        "double_posts": counters["double_posts"],
    }


def integrity_check(study, sent: list[tuple[str, str, int, int]]) -> dict:
    from annotation.models import Assignment, Item, Judgment

    stored = list(
        Judgment.objects.filter(study=study).values_list(
            "participant__external_id",
            "assignment__token",
            "part",
            "payload__raw",
            "participant_id",
            "result",
        )
    )
    stored_set = {(pid, token, part, raw) for pid, token, part, raw, _p, _r in stored}
    sent_set = set(sent)
    keys = Counter((token, part) for _pid, token, part, _raw, _p, _r in stored)
    seen: Counter[tuple[int, str]] = Counter(
        (participant, result["comparison"])
        for _pid, _token, _part, _raw, participant, result in stored
        if result["kind"] == "comparison"
    )
    submitted = Assignment.objects.filter(
        item__study=study, status=Assignment.Status.SUBMITTED
    ).values_list("id", flat=True)
    finished_rows = list(
        Judgment.objects.filter(assignment_id__in=list(submitted)).values_list(
            "assignment_id", "excluded", "result"
        )
    )
    per_group = Counter(assignment for assignment, _excluded, _result in finished_rows)
    # A finished group is flagged (every row) exactly when its attention check failed.
    flags: dict[int, set[bool]] = {}
    failed: dict[int, bool] = {}
    for assignment, excluded, result in finished_rows:
        flags.setdefault(assignment, set()).add(excluded)
        if result["kind"] == "attention_check":
            failed[assignment] = bool(result["check_failed"])
    wrong_flags = sum(1 for a, f in flags.items() if f != {failed.get(a, False)})
    over_target = Item.objects.filter(study=study, judgment_count__gt=3).count()
    check = {
        "stored": len(stored),
        "sent": len(sent),
        "lost": len(sent_set - stored_set),
        "unexpected_or_misattributed": len(stored_set - sent_set),
        "duplicated": sum(n - 1 for n in keys.values() if n > 1) + (len(sent) - len(sent_set)),
        "finished_groups": len(per_group),
        "finished_groups_not_10": sum(1 for n in per_group.values() if n != 10),
        "finished_groups_dropped": sum(1 for f in failed.values() if f),
        "groups_flagged_wrongly": wrong_flags,
        "groups_over_target": over_target,
        "comparisons_seen_twice_by_a_worker": sum(1 for n in seen.values() if n > 1),
    }
    check["ok"] = not any(
        check[key]
        for key in (
            "lost",
            "unexpected_or_misattributed",
            "duplicated",
            "finished_groups_not_10",
            "groups_over_target",
            "comparisons_seen_twice_by_a_worker",
        )
    ) and len(stored) == len(sent)
    return check


def summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50) * 1000, 1),
        "p95": round(percentile(values, 95) * 1000, 1),
        "p99": round(percentile(values, 99) * 1000, 1),
        "mean": round(statistics.fmean(values) * 1000, 1) if values else None,
    }


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(pct / 100 * len(values) + 0.5) - 1))
    return values[index]


if __name__ == "__main__":
    main()
