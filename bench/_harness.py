"""What the load benchmarks share: a scratch PostgreSQL database, gunicorn, a bounded crowd.

Not a test and not imported by the project. Each benchmark script (``assign.py``,
``vicr_game.py``, ``humanr_load.py``) builds its own study and checks its own invariants;
this module only does the plumbing the same way for all of them:

- ``prepare_database``: drop and recreate the scratch database, migrate it in a subprocess,
  then ``django.setup()`` this process against it (the benchmark builds its study and checks
  the results through the ORM);
- ``gunicorn``: a context manager that serves the project on a free loopback port with
  ``CAPEVAL_DB_CONN_MAX_AGE`` set, and always terminates the server; with
  ``count_queries`` it serves ``_count_wsgi.py``'s wrapper instead, for a counting pass;
- ``TREE``: the code under test, this checkout or the tree named by ``BENCH_TREE`` (a
  ``git worktree`` of an older commit, which ``_baseline.compare_trees`` runs beside this
  one): its ``manage.py`` migrates, its code is imported and served;
- ``run_crowd``: start one thread per simulated participant, let each arrive (not timed),
  start the clock when all have arrived, and stop them at the deadline; every request has a
  timeout, so a run lasts at most ``seconds`` plus one request timeout;
- ``CpuMeter``: CPU seconds of this process (the clients), of gunicorn and of the whole
  machine over the run, because on a 2-core machine the clients compete with the server;
- ``python_speed``: this machine's speed at plain Python, to compare CPU per request
  between machines;
- ``summary``, ``write_result``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
#: The code measured: this checkout unless BENCH_TREE names another (an older commit's
#: worktree); the bench scripts and this module always come from this checkout.
TREE = Path(os.environ.get("BENCH_TREE") or REPO).resolve()
RESULTS = REPO / "bench" / "results"
MAX_SECONDS = 60
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432"
#: Every client request gives up after this long, which bounds a run's overrun.
REQUEST_TIMEOUT = 30


def bounded_seconds(seconds: float) -> float:
    """Traffic never lasts longer than MAX_SECONDS, whatever the command line says."""
    return max(1.0, min(seconds, MAX_SECONDS))


def prepare_database(server: str, name: str) -> dict[str, str]:
    """Recreate database ``name`` on ``server``, migrate it, set Django up against it.

    Returns the environment gunicorn must run with (the same database and settings).
    """
    import psycopg

    server = server.rstrip("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    env = {
        **os.environ,
        "DATABASE_URL": f"{server}/{name}",
        "DJANGO_SETTINGS_MODULE": "capeval.settings",
        "ALLOWED_HOSTS": "127.0.0.1",
        # Persistent connections: a benchmark of the request path, not of PostgreSQL's fork.
        "CAPEVAL_DB_CONN_MAX_AGE": "60",
        "DEBUG": "false",
    }
    env.pop("REDIS_URL", None)  # Celery stays eager: no broker takes part in the run
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=TREE, env=env, check=True
    )
    os.environ.update(env)
    for path in (str(TREE / "platform"), str(TREE)):
        if path not in sys.path:
            sys.path.insert(0, path)
    import django

    django.setup()
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(env: dict[str, str], *, workers: int, count_queries: bool = False) -> Iterator[Server]:
    """Serve ``TREE`` with ``workers`` sync workers on loopback until the block ends.

    ``count_queries``: serve ``bench/_count_wsgi.py``'s wrapper of the same application,
    which adds each request's SQL statement count to the response; only for a counting
    pass, never for a timed run.
    """
    port = free_port()
    app = "_count_wsgi:application" if count_queries else "capeval.wsgi:application"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "gunicorn"),
            app,
            "--pythonpath",
            f"{TREE},{TREE / 'platform'},{BENCH}",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--preload",
            "--log-level",
            "warning",
        ],
        cwd=TREE,
        env=env,
        # Its own process group, so that the workers go with the master (below).
        start_new_session=True,
    )
    server = Server(base=f"http://127.0.0.1:{port}", workers=workers, process=process)
    try:
        wait_until_up(server.base, process)
        yield server
    finally:
        process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        # Workers that outlive their master (seen on a loaded machine: a worker stuck at
        # exit, then orphaned when the master was killed) would hold the port's connections
        # and the callers' output pipes: the whole group goes.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        # The master has reaped its workers, so their CPU time is in its children's total.
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        server.cpu_seconds = round(
            (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2
        )


@dataclass
class Server:
    base: str
    workers: int
    process: subprocess.Popen
    cpu_seconds: float | None = None  # master and workers, start to stop; set on exit

    def cpu_now(self) -> float:
        """CPU seconds used so far by the master and its live workers (from /proc)."""
        total = 0
        pid = self.process.pid
        try:
            with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as children:
                pids = [pid, *map(int, children.read().split())]
        except OSError:
            return float("nan")
        for each in pids:
            try:
                total += _process_cpu(each)
            except OSError:
                continue  # a worker that just exited
        return total


def wait_until_up(base: str, process: subprocess.Popen | None = None, timeout: float = 30) -> None:
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {process.returncode}")
        try:
            requests.get(base + "/accounts/login/", timeout=15)
            return
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.2)
    raise SystemExit(f"gunicorn did not start within {timeout:.0f} s")


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def database_backends_cpu(database: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving ``database`` (same machine)."""
    marker = f" {database} ".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                title = cmdline.read()
            if title.startswith(b"postgres: ") and marker in title:
                found[int(entry)] = _process_cpu(int(entry))
        except OSError:
            continue  # gone, or not ours to read
    return found


class CpuMeter:
    """CPU used over an interval by this process (the clients), gunicorn, PostgreSQL's
    backends of the scratch database and the whole machine."""

    def __init__(self, server: Server | None = None):
        self.server = server
        self.database = os.environ.get("DATABASE_URL", "").rsplit("/", 1)[-1]

    def start(self) -> None:
        self._process = time.process_time()
        self._server = self.server.cpu_now() if self.server else None
        self._backends = database_backends_cpu(self.database) if self.database else {}
        self._ticks = _cpu_ticks()
        self._wall = time.monotonic()

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self._wall
        clients = time.process_time() - self._process
        busy, total = _cpu_ticks()
        busy_share = (busy - self._ticks[0]) / max(1, total - self._ticks[1])
        cpus = os.cpu_count() or 1
        measured: dict[str, Any] = {
            "cpus": cpus,
            "client_cpu_seconds": round(clients, 2),
            "client_cores": round(clients / wall, 2) if wall else None,
            "machine_busy_cores": round(busy_share * cpus, 2),
        }
        if self.server is not None:
            served = self.server.cpu_now() - self._server
            measured["gunicorn_cpu_seconds"] = round(served, 2)
            measured["gunicorn_cores"] = round(served / wall, 2) if wall else None
        if self.database:
            # Backends that closed during the run (CONN_MAX_AGE) are missed: a lower bound.
            now = database_backends_cpu(self.database)
            used = sum(cpu - self._backends.get(pid, 0.0) for pid, cpu in now.items())
            measured["postgres_cpu_seconds"] = round(used, 2)
            measured["postgres_cores"] = round(used / wall, 2) if wall else None
        return measured


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def python_speed() -> float:
    """CPU seconds this process takes for 10**7 additions in a plain loop (best of three).

    CPU per request is a machine's figure: ``bench/results-requests.md`` has the same code
    at 9-12 ms per request on one machine and 19-25 ms on another, twice as slow at plain
    Python. Printed beside it, a reader on another machine can tell a slower machine from
    slower code. The loop is the planner test's too (``tests/factories/machine.py``).
    """
    from tests.factories.machine import python_speed as measured

    return round(measured(), 3)


@dataclass
class Crowd:
    """What ``run_crowd`` measured: per-player results, errors and the timing of the run."""

    results: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: float = 0.0  # time.monotonic() when the clock started
    elapsed: float = 0.0
    load_at_start: list[float] = field(default_factory=list)
    load_at_end: list[float] = field(default_factory=list)
    cpu: dict[str, Any] = field(default_factory=dict)
    stuck: int = 0


def run_crowd(
    players: int,
    *,
    arrive: Callable[[int], Any],
    play: Callable[[int, Any, float], Any],
    seconds: float,
    server: Server | None = None,
    arrival_timeout: float = 300,
) -> Crowd:
    """Run ``players`` threads: ``arrive(k)`` untimed, then ``play(k, arrived, deadline)``.

    The clock starts once every player has arrived (or failed to); ``play`` must stop
    starting requests at ``deadline`` (a ``time.monotonic()`` value) and return its results.
    An exception in either is recorded as that player's error, never raised. With ``server``,
    the CPU gunicorn used while the clock ran is measured too.
    """
    crowd = Crowd()
    lock = threading.Lock()
    arrived_all = threading.Barrier(players + 1)
    go = threading.Event()  # set once the deadline is known
    deadline_box = [float("inf")]

    def player(k: int) -> None:
        try:
            arrived = arrive(k)
        except Exception as exc:  # a player who cannot arrive still releases the barrier
            with lock:
                crowd.errors.append(f"player {k} arriving: {exc!r}")
            _wait(arrived_all)
            return
        _wait(arrived_all)
        go.wait()
        try:
            outcome = play(k, arrived, deadline_box[0])
        except Exception as exc:
            with lock:
                crowd.errors.append(f"player {k}: {exc!r}")
            return
        with lock:
            crowd.results.append(outcome)

    threads = [threading.Thread(target=player, args=(k,), daemon=True) for k in range(players)]
    for thread in threads:
        thread.start()
    try:
        arrived_all.wait(timeout=arrival_timeout)
    except threading.BrokenBarrierError:
        crowd.errors.append(f"not every player arrived within {arrival_timeout:.0f} s")
    crowd.started = began = time.monotonic()
    deadline_box[0] = began + seconds
    go.set()
    meter = CpuMeter(server)
    meter.start()
    crowd.load_at_start = load_average()
    limit = deadline_box[0] + REQUEST_TIMEOUT + 5
    for thread in threads:
        thread.join(timeout=max(0.0, limit - time.monotonic()))
    crowd.elapsed = time.monotonic() - began
    crowd.cpu = meter.stop()
    crowd.load_at_end = load_average()
    crowd.stuck = sum(1 for thread in threads if thread.is_alive())
    if crowd.stuck:
        crowd.errors.append(f"{crowd.stuck} players still running after the deadline")
    return crowd


def _wait(barrier: threading.Barrier) -> None:
    with suppress(threading.BrokenBarrierError):
        barrier.wait()


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(pct / 100 * len(values) + 0.5) - 1))
    return values[index]


def cpu_per_request(cpu: dict[str, Any], requests: int) -> dict[str, float | None]:
    """CPU milliseconds per request of gunicorn and of PostgreSQL: the cost, load aside."""
    return {
        side: round(cpu[f"{side}_cpu_seconds"] / requests * 1000, 1)
        if requests and cpu.get(f"{side}_cpu_seconds") is not None
        else None
        for side in ("gunicorn", "postgres")
    }


def summary(seconds: list[float]) -> dict[str, Any]:
    """Count and p50/p95/p99/mean/max in milliseconds of latencies given in seconds."""
    values = sorted(seconds)
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50) * 1000, 1),
        "p95": round(percentile(values, 95) * 1000, 1),
        "p99": round(percentile(values, 99) * 1000, 1),
        "mean": round(sum(values) / len(values) * 1000, 1),
        "max": round(values[-1] * 1000, 1),
    }


def write_result(name: str, result: dict[str, Any], path: str | None = None) -> Path:
    """Print the result and write it to ``path``, by default
    ``bench/results/<name>-<UTC time>.json``."""
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = Path(path) if path else RESULTS / f"{name}-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return out


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
