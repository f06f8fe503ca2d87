"""Benchmark: what the "can this study finish?" read (issue 26) costs the live dashboard.

Not a test. The dashboard htmx polls every 10 seconds computes ``Mode.workers_needed``
(``annotation/dashboard.py:study_capacity``) on every poll. This measures the dashboard
partial of the 20,000-pair VICR study of ``bench/pages.py`` (same builder: every pair has
3 of its 7 ratings, so every pair still has room and the bound reads them all) through the
whole Django stack, twice in one run: with the read (the real path) and, as the baseline,
with ``workers_needed`` answering None (the dashboard as it was before issue 26). The
study's players are Prolific workers, so the dashboard skips the bound (crowd in use) and
pays one ``exists()``; the read alone is timed as the planner calls it
(``study_capacity(study, with_crowd=True)``: the bound computed, with its early exit when
the participants outnumber any pair's room plus ratings). About a minute per size:

    PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/capacity.py \
        [--database sqlite|postgres] [--sizes 2000,20000] [--requests 20]

Prints median and p95 ms, the query counts and the ratio to the baseline; writes JSON to
``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as harness  # noqa: E402
import pages  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--name", default="capeval_bench_capacity")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    requests = max(3, min(args.requests, 200))
    pages.prepare(args.database, args.server, args.name)
    from django.db import connection
    from django.db.models import IntegerField, Value
    from django.test import Client
    from django.urls import reverse

    from annotation import dashboard
    from annotation.models import Participant, User
    from annotation.modes import get_mode
    from annotation.modes.capacity import unit_shortfall

    owner = User.objects.create_user("bench-owner", is_researcher=True)
    client = Client()
    client.force_login(owner)
    mode = get_mode("vicr")
    result = {"database": args.database, "requests": requests, "sizes": {}}
    for size in sizes:
        study, judgments = pages.build_study(size, owner)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        url = reverse("study_dashboard", args=[study.pk])
        capacity = dashboard.study_capacity(study, with_crowd=True)
        with_read = pages.measure(client, url, requests)
        # The baseline: the same requests with the mode declaring no constraint.
        mode.workers_needed = lambda study: None
        try:
            baseline = pages.measure(client, url, requests)
        finally:
            del mode.workers_needed
        alone = []
        for _ in range(requests):
            started = time.perf_counter()
            dashboard.study_capacity(study, with_crowd=True)
            alone.append(time.perf_counter() - started)
        read = harness.summary(alone)
        # The worst path: no early exit and the per-unit subquery, as a lab study whose
        # gates excluded someone pays it: every participant but one counted, and a target
        # raised far enough (room + ratings above the players) that the early exit fails.
        people = Participant.objects.filter(study=study)
        players = people.exclude(pk=people.order_by("pk").values_list("pk", flat=True)[0])
        far = Value(players.count() + 10, IntegerField())
        worst = []
        for _ in range(max(3, requests // 3)):
            started = time.perf_counter()
            unit_shortfall(study, kinds=["game"], unit="pk", players=players, wanted=far)
            worst.append(time.perf_counter() - started)
        worst_read = harness.summary(worst)
        row = {
            "judgments": judgments,
            "capacity": capacity,
            "dashboard": with_read,
            "baseline": baseline,
            "read_alone_ms": {"median": read["p50"], "p95": read["p95"]},
            "subquery_path_ms": {"median": worst_read["p50"], "p95": worst_read["p95"]},
            "ratio_median": round(with_read["median_ms"] / baseline["median_ms"], 2),
            "ratio_p95": round(with_read["p95_ms"] / baseline["p95_ms"], 2),
        }
        result["sizes"][size] = row
        print(f"{args.database}: {size} pairs, {judgments} judgments; bound: {capacity}")
        for name, numbers in (("with the read", with_read), ("baseline", baseline)):
            print(
                f"  {name:14} median {numbers['median_ms']:7.1f} ms  p95 "
                f"{numbers['p95_ms']:7.1f} ms  {numbers['queries']:3d} queries"
            )
        print(
            f"  read alone median {read['p50']:.1f} ms p95 {read['p95']:.1f} ms; "
            f"ratio {row['ratio_median']} (median), {row['ratio_p95']} (p95)"
        )
        print(f"  subquery path median {worst_read['p50']:.1f} ms p95 {worst_read['p95']:.1f} ms")
    result["load_average"] = harness.load_average()
    harness.write_result(f"capacity-{args.database}", result)


if __name__ == "__main__":
    main()
