"""Benchmark: the study page, the live dashboard, the report page and the data browser of a
large study.

Not a test. Issue 11: the pages of a 20,000-item study answer in under 300 ms each, with a
query count that does not grow with the study (issue 26 added the data browser's first
page, whose 20 images are the tutorial and probation pairs every player rated). Takes
about two minutes:

    .venv/bin/python bench/pages.py [--database sqlite|postgres] [--sizes 2000,20000] \
        [--requests 30] [--hours 72] [--server postgres://postgres@127.0.0.1:5432] \
        [--name capeval_bench_pages]

1. Creates a scratch database: a SQLite file in a temporary folder, or (``--database
   postgres``) the PostgreSQL database ``--name`` on ``--server`` over loopback (dropped
   first!), and migrates it.
2. Builds, per size, a live VICR study through ``study_create`` and ``study_open`` (the mode
   builds the items): ``size`` game pairs plus the tutorial and probation pools, and one
   Prolific player per 20 pairs. Their history is written in bulk as the submission service
   writes it (a submitted ``Assignment`` and a ``Judgment`` per rating, each item's
   ``judgment_count``, the player's state, status, completion time and flags): every player
   rated the 10 tutorial pairs, 30% then failed the tutorial and rated 20 probation pairs
   (the block ends carry ``result.transition`` as VICR stores it), and every game pair has 3
   ratings from distinct players with Algorithm 1's result fields; 2% of the game ratings
   carry a catch-trial result, 1% of players an integrity flag, 40 leases are open, ratings
   are spread evenly over the last ``--hours`` (default 72: a 20,000-pair crowd study takes
   days; the dashboard's hourly counts read the last 12 hours). On PostgreSQL the tables are
   then analysed (as autovacuum would). A report job runs (the real report code path, eager).
3. Requests each page ``--requests`` times through the whole Django stack in-process (the
   test client: middleware, sessions, CSP, templates, ORM) as the study's owner: the study
   page, the dashboard partial (what htmx polls), the report page and the data browser's
   first page (``/studies/<id>/items/``, unfiltered). The query count is
   taken once per page (``CaptureQueriesContext``) outside the timed requests.

Prints, per database, size and page: median and p95 ms and the query count; the query
counts must be equal across sizes (the script exits 1 otherwise) and the target is a p95
under 300 ms at 20,000 items. Writes JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import _harness as harness

REPO = harness.REPO
PAGES = ("study_detail", "study_dashboard", "study_report", "study_items")
TARGET_MS = 300
#: Game pairs per player, and ratings per game pair.
PAIRS_PER_PLAYER = 20
RATINGS_PER_PAIR = 3
TUTORIAL_POOL, PROBATION_POOL = 10, 40


def prepare(database: str, server: str, name: str) -> None:
    """Recreate and migrate the scratch database, then set Django up against it."""
    if database == "postgres":
        harness.prepare_database(server, name)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="capeval-bench-pages-"))
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{scratch / 'bench.sqlite3'}",
            "CAPEVAL_VAR_DIR": str(scratch),
            "DJANGO_SETTINGS_MODULE": "capeval.settings",
            "DEBUG": "false",
        }
        env.pop("REDIS_URL", None)  # Celery stays eager: the report runs in this process
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
        )
        os.environ.update(env)
        sys.path[:0] = [str(REPO), str(REPO / "platform")]
        import django

        django.setup()
    # The test client's host.
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def build_study(size: int, owner, *, hours: float = 72, seed: int = 7):
    """A live VICR study of ``size`` game pairs with its players' history (see the docstring)."""
    from django.db import transaction
    from django.db.models import Count
    from django.utils import timezone

    from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant
    from annotation.modes.importing import fileless_image
    from annotation.services.studies import study_create, study_open

    rng = random.Random(seed)
    study = study_create(
        owner=owner,
        name=f"Pages benchmark, {size} pairs",
        mode="vicr",
        seed=seed,
        # pools of one draw (the bench's players rate the whole tutorial pool), below the
        # crowd default of 3 draws (issue 29)
        settings={"gate_pool_multiple": 1},
    )
    images = Image.objects.bulk_create(
        (
            fileless_image(study=study, name=f"img-{i}.jpg", alt_text=f"Benchmark image {i}")
            for i in range(TUTORIAL_POOL + PROBATION_POOL + size)
        ),
        batch_size=2000,
    )
    captions = []
    for i, image in enumerate(images):
        purpose = (
            "tutorial"
            if i < TUTORIAL_POOL
            else "probation"
            if i < TUTORIAL_POOL + PROBATION_POOL
            else "study"
        )
        quality = rng.randint(1, 5)
        captions.append(
            Caption(
                study=study,
                image=image,
                system=f"System {i % 4}",
                raw_text=f"caption {i}",
                text=f"caption {i}",
                purpose=purpose,
                line=i + 2,
                spec={"truth": quality, "explanation": "Benchmark."} if purpose != "study" else {},
            )
        )
    Caption.objects.bulk_create(captions, batch_size=2000)
    study_open(study=study)
    items = {kind: [] for kind in ("tutorial", "probation", "game")}
    for item in Item.objects.filter(study=study).order_by("id"):
        items[item.kind].append(item)
    now = timezone.now()
    players = Participant.objects.bulk_create(
        Participant(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=f"PID-{size}-{k}",
            external_meta={"PROLIFIC_PID": f"PID-{size}-{k}", "SESSION_ID": f"S-{k}"},
            status="game",
            address="127.0.0.1",
            flags=[{"kind": "foreign_browser", "at": now.isoformat(), "detail": "bench"}]
            if k % 100 == 0
            else [],
        )
        for k in range(max(RATINGS_PER_PAIR, size // PAIRS_PER_PLAYER))
    )
    leases, rows = [], []  # (assignment, judgment) built together, saved in bulk

    def rate(person, item, result, points):
        served = now - timedelta(seconds=rng.randint(60, int(hours * 3600)))
        dwell = rng.randint(2500, 20000)
        lease = Assignment(
            participant=person,
            item=item,
            status=Assignment.Status.SUBMITTED,
            served_at=served,
            expires_at=served + timedelta(minutes=30),
            submitted_at=served + timedelta(milliseconds=dwell),
        )
        leases.append(lease)
        rows.append(
            Judgment(
                study=study,
                item=item,
                participant=person,
                payload={"rating": rng.randint(1, 5)},
                result={"points": points, **result},
                dwell_ms=dwell,
                created_at=lease.submitted_at,
            )
        )

    game_counts = {}
    for person in players:
        failed_tutorial = rng.random() < 0.3
        for n, item in enumerate(items["tutorial"]):
            result = {"truth": 3}
            if n == len(items["tutorial"]) - 1:  # the block's end: the tutorial check
                to = "probation" if failed_tutorial else "game"
                result["transition"] = {"from": "tutorial", "to": to}
            rate(person, item, result, rng.choice((0, 1, 2)))
        if failed_tutorial:
            for n, item in enumerate(rng.sample(items["probation"], 20)):
                result = {"truth": 3, "attempt": 1}
                if n == 19:
                    result["transition"] = {"from": "probation", "to": "game"}
                rate(person, item, result, rng.choice((0, 1, 2)))
    for item in items["game"]:
        for person in rng.sample(players, RATINGS_PER_PAIR):
            result = {
                "consensus": 3,
                "pool_size": 2,
                "pool_human": 2,
                "pool_primed": 0,
                "n": 2,
                "var": 0.5,
                "v": 1.0,
                "d": 0.5,
                "reason": "",
                "score_after": 40,
                "phase_after": "game",
            }
            if rng.random() < 0.02:
                result["catch"] = {"kind": "T_WP", "gamma": 0.5, "caught": rng.random() < 0.7}
            rate(person, item, result, rng.choice((-1, 0, 1, 2)))
            game_counts[person.pk] = game_counts.get(person.pk, 0) + 1
    with transaction.atomic():
        Assignment.objects.bulk_create(leases, batch_size=5000)
        for lease, judgment in zip(leases, rows, strict=True):
            judgment.assignment = lease
        Judgment.objects.bulk_create(rows, batch_size=5000)
        counts = dict(
            Judgment.objects.filter(study=study)
            .values_list("item_id")
            .annotate(n=Count("id"))
            .values_list("item_id", "n")
        )
        for kind_items in items.values():
            for item in kind_items:
                item.judgment_count = counts.get(item.pk, 0)
        Item.objects.bulk_update(
            [item for kind_items in items.values() for item in kind_items],
            ["judgment_count"],
            batch_size=5000,
        )
        for person in players:
            total = game_counts.get(person.pk, 0)
            person.state = {
                "player": {"probation_attempts": 0, "score": 40, "game_ratings": total},
                "block": [],
                "tutorial_score": 12,
                "game_total": total,
                "game_points": total,
            }
            person.completed_at = now if total >= 20 else None
        Participant.objects.bulk_update(players, ["state", "completed_at"], batch_size=5000)
        # Leases open now: workers on a pair each (the Release buttons of the dashboard).
        unrated = [item for item in items["game"] if counts.get(item.pk, 0) < item.target]
        opened = []
        for person, item in zip(players[:40], unrated, strict=False):
            opened.append(
                Assignment(
                    participant=person,
                    item=item,
                    round=1,
                    served_at=now,
                    expires_at=now + timedelta(minutes=30),
                )
            )
            item.open_lease_count += 1
        Assignment.objects.bulk_create(opened)
        Item.objects.bulk_update(unrated[: len(opened)], ["open_lease_count"])
    return study, len(rows)


def measure(client, url: str, requests: int) -> dict:
    """Median and p95 ms of ``requests`` GETs (after one warm-up), and the query count."""
    from django.db import connection

    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    captured = []

    def count(execute, sql, params, many, context):
        captured.append(sql)
        return execute(sql, params, many, context)

    # A wrapper sees every query, even when a request closes the connection at its end.
    with connection.execute_wrapper(count):
        client.get(url)
    seconds, cpu, sql = [], [], []
    waited = [0.0]

    def timed(execute, sql_text, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            waited[0] += time.perf_counter() - started

    for _ in range(requests):
        waited[0] = 0.0
        start, start_cpu = time.perf_counter(), time.process_time()
        with connection.execute_wrapper(timed):
            response = client.get(url)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        sql.append(waited[0])
        assert response.status_code == 200
    timing = harness.summary(seconds)
    return {
        "median_ms": timing["p50"],
        "p95_ms": timing["p95"],
        # CPU of this process (Django, and SQLite's work, which runs in it): on a busy
        # machine the wall time is mostly waiting for a core, this much less so.
        "cpu_median_ms": harness.summary(cpu)["p50"],
        # Time inside the database calls (wall), SQLite's or PostgreSQL's round trips.
        "sql_median_ms": harness.summary(sql)["p50"],
        "queries": len(captured),
        "bytes": len(response.content),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--hours", type=float, default=72)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--name", default="capeval_bench_pages")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if not all(1 <= size <= 100_000 for size in sizes):
        raise SystemExit("sizes from 1 to 100,000 pairs")
    requests = max(3, min(args.requests, 200))
    prepare(args.database, args.server, args.name)
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from annotation.models import Job, User
    from annotation.services.reports import report_request
    from annotation.tasks import enqueue

    owner = User.objects.create_user("bench-owner", is_researcher=True)
    client = Client()
    client.force_login(owner)
    result = {"database": args.database, "requests": requests, "hours": args.hours, "sizes": {}}
    for size in sizes:
        started = time.perf_counter()
        study, judgments = build_study(size, owner, hours=max(1.0, args.hours))
        built = time.perf_counter() - started
        if connection.vendor == "postgresql":
            # Autovacuum analyses tables after large writes; done at once here, so the
            # planner knows the real row counts (unanalysed, it expects 4 participants and
            # sorts every judgment on disk to count them).
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        started = time.perf_counter()
        job = enqueue(report_request(study=study, user=owner))
        job.refresh_from_db()
        if job.status != Job.Status.DONE:
            raise SystemExit(f"the report failed: {job.error}")
        report_seconds = time.perf_counter() - started
        pages = {page: measure(client, reverse(page, args=[study.pk]), requests) for page in PAGES}
        result["sizes"][size] = {
            "items": study.items.count(),
            "participants": study.participants.count(),
            "judgments": judgments,
            "build_s": round(built, 1),
            "report_job_s": round(report_seconds, 1),
            "pages": pages,
        }
        print(f"{args.database}: {size} pairs, {judgments} judgments, built in {built:.0f} s")
        for page, numbers in pages.items():
            print(
                f"  {page:16} median {numbers['median_ms']:7.1f} ms  p95 {numbers['p95_ms']:7.1f}"
                f" ms  cpu {numbers['cpu_median_ms']:6.1f} ms"
                f"  sql {numbers['sql_median_ms']:6.1f} ms  {numbers['queries']:3d} queries"
                f"  {numbers['bytes'] // 1024} KiB"
            )
    counts = {
        page: sorted({result["sizes"][size]["pages"][page]["queries"] for size in sizes})
        for page in PAGES
    }
    result["queries_constant"] = all(len(values) == 1 for values in counts.values())
    largest = result["sizes"][max(sizes)]["pages"]
    result["under_target"] = all(largest[page]["p95_ms"] < TARGET_MS for page in PAGES)
    result["load_average"] = harness.load_average()
    harness.write_result(f"pages-{args.database}", result)
    if not result["queries_constant"]:
        print(f"query counts grow with the study: {counts}")
        sys.exit(1)


if __name__ == "__main__":
    main()
