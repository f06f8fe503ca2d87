"""Issue 48's ratio: a mode's request against a minimal one, queries, old code against new.

Not a test and not imported by the project; used by ``assign.py``, ``arena_load.py`` and
``humanr_load.py``:

- ``minimal_run``: the same number of clients as the mode's run GET ``/ping``
  (``annotation/views/health.py``: through every middleware, no session, query or template)
  on the same gunicorn, in the same run; its CPU per request is the denominator of
  ``ratios``. The absolute CPU of a request moves with the machine (7-32 ms for the same
  code on five machines, bench/results-requests.md); the ratio to a request that does no
  work moves with the code.
- ``count_pass``: after the timed runs, a second gunicorn serving ``_count_wsgi.py``'s
  wrapper (each answer carries its SQL statement count) takes a few clients through the
  same requests on the same study for a few seconds; ``record_queries`` collects the counts
  per request kind and ``query_summary`` averages them. The timed runs never carry it.
- ``compare_trees``: runs the calling script once per tree, as a child process, the older
  commit's worktree (``--old-tree``) first and this checkout second (``--rounds`` 2: old,
  new, old, new), each on its own scratch database migrated by its own tree, and returns
  both results; the scripts print them side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness

PING = "/ping"
QUERY_HEADER = "X-Bench-Queries"


def minimal_run(server: harness.Server, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads GET /ping until ``seconds`` pass; the CPU each request cost."""
    import requests

    def arrive(k: int) -> requests.Session:
        return requests.Session()

    def play(k: int, session: requests.Session, deadline: float) -> dict:
        done, errors = 0, []
        while time.monotonic() < deadline:
            answer = session.get(server.base + PING, timeout=harness.REQUEST_TIMEOUT)
            if answer.status_code != 200 or answer.text != "pong\n":
                errors.append(f"GET {PING}: {answer.status_code} {answer.text[:80]!r}")
                break
            done += 1
        return {"requests": done, "errors": errors}

    crowd = harness.run_crowd(clients, arrive=arrive, play=play, seconds=seconds, server=server)
    done = sum(run["requests"] for run in crowd.results)
    errors = crowd.errors + [e for run in crowd.results for e in run["errors"]]
    return {
        "view": f"GET {PING}",
        "clients": clients,
        "seconds": round(crowd.elapsed, 2),
        "requests": done,
        "requests_per_second": round(done / crowd.elapsed, 1) if crowd.elapsed else None,
        "cpu": crowd.cpu,
        "cpu_ms_per_request": harness.cpu_per_request(crowd.cpu, done),
        "load_average_at_start": crowd.load_at_start,
        "load_average_at_end": crowd.load_at_end,
        "error_count": len(errors),
        "errors": errors[:5],
    }


def minimal_ms(minimal: list[dict[str, Any]]) -> float | None:
    """gunicorn CPU ms per minimal request over every minimal run of this gunicorn."""
    requests = sum(run["requests"] for run in minimal)
    cpu = sum(run["cpu"].get("gunicorn_cpu_seconds") or 0 for run in minimal)
    return round(cpu / requests * 1000, 3) if requests else None


def ratios(cpu_ms: dict[str, float | None], minimal: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's gunicorn CPU per request, as a multiple of the minimal request's."""
    base = minimal_ms(minimal)
    mode = cpu_ms.get("gunicorn")
    return {
        "minimal_gunicorn_ms_per_request": base,
        "gunicorn_ms_per_request": mode,
        "ratio_to_minimal": round(mode / base, 2) if mode and base else None,
        # PostgreSQL's CPU beside it: the minimal request has none, so no ratio.
        "postgres_ms_per_request": cpu_ms.get("postgres"),
    }


def record_queries(run: dict[str, Any], kind: str, response) -> None:
    """Keep the counting pass's statement counts of ``response`` under ``kind``."""
    header = response.headers.get(QUERY_HEADER)
    if header:
        counts = tuple(int(value) for value in header.split(","))
        run.setdefault("queries", {}).setdefault(kind, []).append(counts)


def query_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per request kind: requests counted, and the mean statements per request (all, the
    session's, transaction statements, and the rest: the mode's and the services')."""
    kinds: dict[str, list[tuple[int, ...]]] = {}
    for run in results:
        for kind, counts in run.get("queries", {}).items():
            kinds.setdefault(kind, []).extend(counts)
    out = {}
    for kind, counts in sorted(kinds.items()):
        n = len(counts)
        others = [c[0] - c[1] - c[2] for c in counts]
        out[kind] = {
            "requests": n,
            "all": round(sum(c[0] for c in counts) / n, 2),
            "session": round(sum(c[1] for c in counts) / n, 2),
            "transaction": round(sum(c[2] for c in counts) / n, 2),
            "besides_session": round(sum(others) / n, 2),
            "besides_session_max": max(others),
        }
    return out


def count_pass(
    env: dict[str, str],
    *,
    clients: int,
    seconds: float,
    arrive,
    play,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run ``clients`` through ``arrive``/``play`` on a counting gunicorn for ``seconds``.

    ``arrive(base, k)`` and ``play(base, k, arrived, deadline)`` are the timed run's own
    functions (``play`` calls ``record_queries``). Returns the clients' results (what they
    sent goes into the study's integrity check with the timed runs') and the errors.
    """
    with harness.gunicorn(env, workers=1, count_queries=True) as server:
        crowd = harness.run_crowd(
            clients,
            arrive=lambda k: arrive(server.base, k),
            play=lambda k, arrived, deadline: play(server.base, k, arrived, deadline),
            seconds=seconds,
        )
    return crowd.results, crowd.errors


def moved(arrived: dict[str, Any], base: str) -> dict[str, Any]:
    """A client's session (``arrive``'s dict), its next page's address on ``base``'s server:
    the counting pass goes on with the timed run's participants and their sessions."""
    path = "/" + arrived["next"].split("/", 3)[3]
    return {**arrived, "next": base + path}


def without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` without ``options`` and their values (``--x v`` or ``--x=v``)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in options:
            skip = True
            continue
        if arg.split("=", 1)[0] in options:
            continue
        out.append(arg)
    return out


#: What a child run of ``compare_trees`` must not inherit from the parent's command line.
PARENT_ONLY = ("--old-tree", "--new-tree", "--rounds", "--database", "--result-file")


def tree_commit(tree: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--short", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    changed = [line[3:] for line in dirty.stdout.splitlines()]
    return out.stdout.strip() + (f" (+ uncommitted: {', '.join(changed)})" if changed else "")


def compare_trees(
    script: str,
    argv: list[str],
    old_tree: str,
    database: str,
    rounds: int,
    new_tree: str | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Run ``script`` (with ``argv``, without ``PARENT_ONLY``) on the old tree and the new
    one (this checkout unless ``new_tree``: a clean worktree of a commit leaves out others'
    uncommitted work) in turn, ``rounds`` times; returns [(label, result), ...] in run order.
    """
    trees = {"old": Path(old_tree).resolve(), "new": Path(new_tree or harness.REPO).resolve()}
    for label, tree in trees.items():
        if not (tree / "manage.py").is_file():
            raise SystemExit(f"--{label}-tree {tree}: not a checkout of the project")
        urls = (tree / "annotation" / "urls.py").read_text(encoding="utf-8")
        if '"ping"' not in urls:
            raise SystemExit(
                f"{tree} has no GET /ping, the baseline: apply its commit there, e.g. "
                "git show <ping commit> -- annotation/views/health.py annotation/urls.py "
                f"| git -C {tree} apply"
            )
    runs = []
    for round_number in range(rounds):
        for label, tree in trees.items():
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
                out = handle.name
            env = {
                **os.environ,
                "BENCH_TREE": str(tree),
                "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'platform'}",
            }
            command = [
                sys.executable,
                script,
                *argv,
                "--database",
                f"{database}_{label}",
                "--result-file",
                out,
            ]
            print(f"== round {round_number + 1}, {label} code: {tree_commit(tree)}", flush=True)
            # In the tree: Celery's Django fix-up puts the working directory first on
            # sys.path, which would import this checkout's code in the old tree's run.
            done = subprocess.run(command, env=env, cwd=tree, check=False)
            try:
                result = json.loads(Path(out).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                result = {"error": f"exit status {done.returncode}, no result"}
            finally:
                Path(out).unlink(missing_ok=True)
            result["tree"] = str(tree)
            result["commit"] = tree_commit(tree)
            result["exit_status"] = done.returncode
            runs.append((label, result))
    return runs


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
