"""Profile: where the CPU of GET next and POST submit goes, on bench/assign.py's path.

Not a test. Needs a local PostgreSQL server (loopback); takes about a minute:

    .venv/bin/python bench/request_profile.py [--players 8] [--rounds 40] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench_profile]

The same study as ``bench/assign.py``'s bulk run (``vicr_game.build_study``: a live VICR
study, players already in the game phase, ``seconds_before_submit=0``), the same requests
(the crowd link, untimed; then GET next, POST a rating), through the same WSGI handler,
middleware, views and services as gunicorn runs, with ``DEBUG`` off and persistent
connections, but in this one process (Django's test ``Client``) under ``cProfile``, one
player after the other: no concurrency, so the lock waits of a crowd do not show; what
shows is the CPU each request costs a worker. Prints, per request kind, the CPU per
request and the inclusive time of each part (middleware by class, session load and save,
the view, the assignment and judgment services, template rendering, SQL round trips
measured around each query), and writes the table to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import sys
import time
from collections import defaultdict

import _harness as harness
import vicr_game

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')

#: Parts of a request: a label -> (file suffix, function name) whose inclusive time counts.
PARTS = {
    "whole request (handler)": ("django/test/client.py", "__call__"),
    "view": ("annotation/views/participate.py", None),
    "assignment_next (service)": ("annotation/services/assignments.py", "assignment_next"),
    "judgment_submit (service)": ("annotation/services/judgments.py", "judgment_submit"),
    "study and participant (view helper)": (
        "annotation/views/participate.py",
        "_study_and_participant",
    ),
    "current_participant (the full path of the helper above)": (
        "annotation/views/participate.py",
        "current_participant",
    ),
    "lapse rule (lapse_wait_until, in assignment_next)": (
        "annotation/services/assignments.py",
        "lapse_wait_until",
    ),
    "item page context (mode)": ("annotation/modes/vicr/pages.py", "item_context"),
    "feedback page context (mode)": ("annotation/modes/vicr/pages.py", "feedback_context"),
    "leaderboard (in the feedback context)": ("annotation/modes/vicr/pages.py", "leaderboard"),
    "template rendering": ("django/template/backends/django.py", "render"),
    "session load": ("django/contrib/sessions/backends/db.py", "load"),
    "session save": ("django/contrib/sessions/backends/db.py", "save"),
    "auth (request.user)": ("django/contrib/auth/middleware.py", "get_user"),
    "CSRF check": ("django/middleware/csrf.py", "process_view"),
    "CSP header": ("csp/middleware.py", "process_response"),
    "axes": ("axes/middleware.py", "__call__"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_profile")
    parser.add_argument(
        "--dump",
        default="",
        help="also write each request kind's pstats to DUMP-next.prof and DUMP-submit.prof",
    )
    args = parser.parse_args()
    harness.prepare_database(args.server, args.database)
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    import annotation

    print(f"code: {annotation.__file__}; DEBUG={settings.DEBUG}", flush=True)
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    study, link = vicr_game.build_study(args.players, 2_000, game_ratings=20)
    clients = []
    for k in range(args.players):
        client = Client(enforce_csrf_checks=True)
        entry = client.get(f"{link}?PROLIFIC_PID=bench-{k}", follow=True)
        assert entry.status_code == 200, entry.status_code
        clients.append((client, entry.redirect_chain[-1][0].rstrip("/") + "/next/"))
    # Warm up: one round untimed (imports, template loading, the first connection).
    pages = [client.get(url) for client, url in clients]

    sql = {"next": [0.0, 0], "submit": [0.0, 0]}
    kind = ["next"]

    def timed(execute, query, params, many, context):
        began = time.perf_counter()
        try:
            return execute(query, params, many, context)
        finally:
            sql[kind[0]][0] += time.perf_counter() - began
            sql[kind[0]][1] += 1

    def run(rounds: int, profiles: dict | None) -> tuple[dict, dict]:
        """``rounds`` rounds of every player: POST the rating, GET the next pair."""
        cpu = {"next": 0.0, "submit": 0.0}
        counts = {"next": 0, "submit": 0}
        for _ in range(rounds):
            for k, (client, url) in enumerate(clients):
                page = pages[k]
                text = page.content.decode()
                action = FORM_ACTION.search(text)
                assert action, text[:300]
                data = {
                    "csrfmiddlewaretoken": CSRF_INPUT.search(text).group(1),
                    "rating": str(1 + (k + counts["submit"]) % 5),
                    "part": "0",
                }
                kind[0] = "submit"
                began = time.process_time()
                if profiles:
                    profiles["submit"].enable()
                answer = client.post(action.group(1), data, HTTP_REFERER="http://testserver" + url)
                if profiles:
                    profiles["submit"].disable()
                cpu["submit"] += time.process_time() - began
                counts["submit"] += 1
                assert answer.status_code in (200, 302), answer.status_code
                kind[0] = "next"
                began = time.process_time()
                if profiles:
                    profiles["next"].enable()
                pages[k] = client.get(url)
                if profiles:
                    profiles["next"].disable()
                cpu["next"] += time.process_time() - began
                counts["next"] += 1
        return cpu, counts

    # Unprofiled first: the CPU a request costs (cProfile multiplies it several times).
    plain_cpu, plain_counts = run(args.rounds, None)
    for name in sql:
        sql[name] = [0.0, 0]
    profiles = {name: cProfile.Profile(time.process_time) for name in ("next", "submit")}
    with connection.execute_wrapper(timed):
        cpu, counts = run(args.rounds, profiles)
    lines = [
        f"Profile of {counts['next']} GET next and {counts['submit']} POST submit "
        f"({args.players} players, VICR game pairs, PostgreSQL, in-process, CPU time); "
        f"load average {harness.load_average()}",
        "",
        "| part | GET next ms/request | POST submit ms/request |",
        "| --- | ---: | ---: |",
    ]
    table = {name: _parts(profiles[name], counts[name]) for name in profiles}
    lines.append(
        "| CPU per request, not profiled (process time) | "
        + " | ".join(f"{1000 * plain_cpu[n] / plain_counts[n]:.2f}" for n in ("next", "submit"))
        + " |"
    )
    lines.append(
        "| CPU per request, profiled (the parts below are in these units) | "
        + " | ".join(f"{1000 * cpu[n] / counts[n]:.2f}" for n in ("next", "submit"))
        + " |"
    )
    for label in PARTS:
        lines.append(
            f"| {label} | "
            + " | ".join(f"{table[n].get(label, 0.0):.2f}" for n in ("next", "submit"))
            + " |"
        )
    lines.append(
        "| SQL round trips (wall, count per request) | "
        + " | ".join(
            f"{1000 * sql[n][0] / counts[n]:.2f} ({sql[n][1] / counts[n]:.1f})"
            for n in ("next", "submit")
        )
        + " |"
    )
    for name in ("next", "submit"):
        lines += ["", f"Top functions of {name} by own CPU (ms per request):", ""]
        stats = pstats.Stats(profiles[name]).stats
        top = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:12]
        for (path, line, func), (_cc, _nc, tottime, _ct, _callers) in top:
            short = "/".join(path.split("/")[-2:])
            lines.append(f"- {1000 * tottime / counts[name]:.3f} {short}:{line} {func}")
    text = "\n".join(lines)
    print(text)
    if args.dump:
        # For callers and callees (``python -m pstats``), which the table cannot show.
        for name, profile in profiles.items():
            profile.dump_stats(f"{args.dump}-{name}.prof")
    harness.write_result("request-profile", {"table": text})


def _parts(profile: cProfile.Profile, requests: int) -> dict[str, float]:
    """Inclusive ms per request of each of ``PARTS`` (the outermost call of each)."""
    stats = pstats.Stats(profile).stats
    out: dict[str, float] = defaultdict(float)
    for label, (suffix, func) in PARTS.items():
        for (path, _line, name), (_cc, _nc, _tt, cumtime, _callers) in stats.items():
            if path.endswith(suffix) and (func is None or name == func):
                if func is None and name not in ("participate_next", "participate_submit"):
                    continue
                out[label] += 1000 * cumtime / requests
    return out


if __name__ == "__main__":
    sys.exit(main())
