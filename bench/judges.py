"""Benchmark a judge run through the platform and the judge client against a bare httpx
loop (not a test; prints numbers).

    PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/judges.py [--items 10000]
        [--concurrency 16 64] [--rounds 3] [--load 0] [--old-tree DIR] [--port 8681]
        [--database capeval_h25_bench] [--server postgres://postgres@127.0.0.1:5432]
        [--no-platform]

Clients, all against one local OpenAI-compatible server that answers instantly, at each
``--concurrency`` level (one to three levels) in the same invocation:

- **bare_httpx** (the baseline the target names): N workers sharing one
  ``httpx.AsyncClient`` (one pool of N connections), posting prebuilt chat-completions
  bodies (the image as a data URL) and reading the JSON reply;
- **bare_workers**: the same loop, each worker with its own client holding one connection:
  what the same bare loop does without httpx's shared pool;
- **client**: ``annotation.judges.client.run_batch`` called directly;
- **job_wall** / **job_batch** (the platform path, issue 25, "Speed"): a THumB study of
  ``--items`` captions (10 per image, a distinct 20 kB image file each) in a scratch
  PostgreSQL database (``--database`` on ``--server``, dropped and recreated), the
  endpoint saved with ``judge_endpoint_save`` at the level's concurrency, and per round a
  new prompt version (so the cache answers nothing) run by ``judge_run_request`` +
  ``tasks.enqueue``: the job the page's "Run the judge" button starts (Celery eager: no
  broker, the same ``runner.job_run``), which reads the units and images, calls
  ``run_batch`` in a thread while its own thread writes the progress, checks every reply
  with THumB's own validation and stores the ``JudgeAnswer`` and cache rows in one
  transaction. Its requests/s over its whole wall time (setup and the write included) and
  over its batch phase alone; the statements its thread sent are counted;
- with ``--old-tree DIR`` (a ``git worktree`` of an older commit) also **client_old** and
  **job_old_***: that tree's ``annotation/judges/client.py`` in the same rounds (the rest
  of the code is this checkout's).

Per level and client: the requests/s of every round, the ratio of the mean rates to the
bare loop's (the verdict; target >= 0.90 for the job, or for the client with
``--no-platform``, at every level, else exit 1) and per round, the CPU milliseconds per
request of this process (all its threads) and of the server process, and this process's
CPU over the wall time ("cores": the event loop's share of one core). On a shared machine
rates swing by 2-4x between rounds; the order of the clients rotates per round so that
drifting load does not always fall on the same one, and the CPU per request is the
steadier figure.

``--load N`` (at most 8) runs N busy processes (pure Python loops) for the rounds'
duration only, to measure on a busy machine on purpose; they are terminated when the
rounds end and exit by themselves after ``MAX_SECONDS``. /proc/loadavg is read before the
rounds, every 2 s during them (the 1-minute average and the tasks runnable at that moment)
and after.

The server is a minimal HTTP/1.1 keep-alive responder on asyncio in its own process (so
it does not share the clients' interpreter lock), bound to 127.0.0.1 only, answering every
POST with one fixed chat-completions JSON body. It exits by itself after ``MAX_SECONDS``
even if this script is killed.

Bounded: at most 100,000 items, three levels of at most 64 concurrent requests, 5 rounds,
8 busy processes; every request has a 10 s timeout.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from annotation.judges.client import Endpoint, JudgeItem, chat_payload, run_batch  # noqa: E402
from annotation.judges.network import AddressPolicy  # noqa: E402

# The server and the busy processes exit by themselves after this long: a 10,000-item run
# of every client at two levels and 3 rounds takes 10-20 minutes on a loaded 2-core machine.
MAX_SECONDS = 1800
RESULTS = ROOT / "bench" / "results"
REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [
            {
                "index": 0,
                # THumB's reply form (the platform path's study), JSON for every client.
                "message": {"role": "assistant", "content": '{"precision": 4, "recall": 3}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 1, "total_tokens": 121},
    }
).encode()
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    + str(len(REPLY)).encode()
    + b"\r\n\r\n"
    + REPLY
)
# A small JPEG-sized payload: a real judge request carries an image of tens of kilobytes.
IMAGE = os.urandom(20_000)


def serve(port: int, ready) -> None:
    """The instant server: read each request (headers and body), answer the fixed reply."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                writer.write(RESPONSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=256)
        ready.set()
        async with server:
            await asyncio.sleep(MAX_SECONDS)  # never outlive a killed benchmark

    asyncio.run(main())


def items(n: int) -> list[JudgeItem]:
    prompt = "Rate how well the caption describes the image, 1-5. Caption: {}"
    return [
        JudgeItem(key=f"c{i}", prompt=prompt.format(f"a dog runs on the beach #{i}"), image=IMAGE)
        for i in range(n)
    ]


async def bare(url: str, batch: list[JudgeItem], concurrency: int, shared: bool = True) -> float:
    """The simplest client: N workers posting prebuilt bodies, reading the JSON reply.
    ``shared``: the workers share one ``httpx.AsyncClient`` (one pool of N connections: the
    baseline the target names); otherwise each has its own client holding one connection."""
    endpoint = Endpoint(url, "bench", "sk-bench")
    bodies = [chat_payload(endpoint, item, 0.0, None) for item in batch]
    queue = iter(range(len(bodies)))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    started = time.perf_counter()
    tls = None if shared else httpx.create_ssl_context(trust_env=False)  # one for all

    async def worker(client: httpx.AsyncClient) -> None:
        for i in queue:
            response = await client.post(endpoint.url, json=bodies[i])
            response.raise_for_status()
            json.loads(response.json()["choices"][0]["message"]["content"])

    async def own_worker() -> None:
        transport = httpx.AsyncHTTPTransport(verify=tls, limits=one, trust_env=False)
        async with httpx.AsyncClient(
            headers=endpoint.headers(), timeout=10.0, transport=transport
        ) as client:
            await worker(client)

    if shared:
        async with httpx.AsyncClient(
            headers=endpoint.headers(), timeout=10.0, limits=limits
        ) as client:
            await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    else:
        await asyncio.gather(*(own_worker() for _ in range(concurrency)))
    return len(bodies) / (time.perf_counter() - started)


def ours(url: str, batch: list[JudgeItem], concurrency: int, run=run_batch) -> float:
    """``run_batch`` (or an older tree's, ``run``) called directly, as the job calls it."""
    done = []
    out = run(
        batch,
        endpoint=Endpoint(url, "bench", "sk-bench"),
        parse=json.loads,
        prompt_version="bench-v1",
        concurrency=concurrency,
        timeout=10.0,
        max_retries=0,
        progress=lambda d, t: done.append(d),
        cache={},
        price_prompt_per_1k=0.001,
        allowed=AddressPolicy.parse(["127.0.0.1"]),  # the bench's server, on the loopback
    )
    if out.failed or len(out.answers) != len(batch):
        raise SystemExit(f"the client failed {out.failed} items: {out.results[0].error}")
    return len(batch) / out.seconds


class Platform:
    """A THumB study in a scratch database, and a judge run of it through the job path."""

    def __init__(self, server: str, database: str, n: int, concurrency: int, url: str):
        import tempfile

        sys.path.insert(0, str(ROOT / "bench"))
        from _harness import prepare_database

        prepare_database(server, database)
        from django.conf import settings

        # The bench's server listens on the loopback, which a deployment must list.
        settings.CAPEVAL_JUDGE_ALLOWED_HOSTS = ["127.0.0.1"]
        # Images go to a scratch folder, removed at the end.
        self.media = tempfile.TemporaryDirectory(prefix="capeval-bench-judges-")
        settings.MEDIA_ROOT = Path(self.media.name)
        from annotation.models import Caption, Image, User
        from annotation.services.studies import study_create

        owner = User.objects.create_user("bench", is_researcher=True)
        self.owner = owner
        self.study = study_create(
            owner=owner, name="Judge bench", mode="thumb", settings={}, seed=1
        )
        per_image = 10
        images = []
        for i in range((n + per_image - 1) // per_image):
            display = f"display/{i}.jpg"
            path = Path(self.media.name) / display
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(len(IMAGE)))
            images.append(
                Image(
                    study=self.study,
                    name=f"img{i}.jpg",
                    sha256=f"{i:064x}",
                    file=display,
                    display=display,
                    width=640,
                    height=480,
                    format="JPEG",
                )  # fmt: skip
            )
        Image.objects.bulk_create(images, batch_size=2000)
        images = list(Image.objects.filter(study=self.study).order_by("id"))
        Caption.objects.bulk_create(
            [
                Caption(
                    study=self.study,
                    image=images[k // per_image],
                    system=f"s{k % per_image}",
                    raw_text=f"a dog runs on the beach {k}",
                    text=f"A dog runs on the beach {k}.",
                    line=k + 2,
                )  # fmt: skip
                for k in range(n)
            ],
            batch_size=2000,
        )
        self.url = url
        self.set_concurrency(concurrency)
        self.round = 0

    def set_concurrency(self, concurrency: int) -> None:
        """Save the endpoint's concurrency as the settings page does."""
        from annotation.services.judge_endpoints import judge_endpoint_save

        judge_endpoint_save(
            study=self.study, name="bench", base_url=self.url, model="bench",
            api_key="sk-bench", concurrency=concurrency, timeout=10.0, max_retries=0,
            by=self.owner,
        )  # fmt: skip

    def run(self, run_batch_of=None) -> tuple[float, float, dict]:
        """One judge run with a new prompt version: (requests/s over the job's wall time,
        requests/s over its batch phase, the job's result). ``run_batch_of``: an older
        tree's ``run_batch``, which the job calls instead of this checkout's (the rest of
        the job is this checkout's)."""
        from django.db import connection

        from annotation.models import Job
        from annotation.services import judge_runs
        from annotation.services.judge_runs import judge_prompt_save, judge_run_request
        from annotation.tasks import enqueue

        self.round += 1
        judge_prompt_save(
            study=self.study, by=self.owner,
            text=f"Round {self.round}. Score the caption: {{caption}}. Reply in JSON.",
        )  # fmt: skip
        current = judge_runs.run_batch
        judge_runs.run_batch = run_batch_of or current
        queries = []

        def count(execute, sql, params, many, context):
            queries.append(sql[:6])
            return execute(sql, params, many, context)

        try:
            # The statements of the job's thread (the batch's thread cannot use the ORM:
            # Django refuses it inside a running event loop), to show none is per request.
            with connection.execute_wrapper(count):
                started = time.perf_counter()
                job = enqueue(judge_run_request(study=self.study, by=self.owner))
                job.refresh_from_db()
                wall = time.perf_counter() - started
        finally:
            judge_runs.run_batch = current
        result = job.result
        if job.status != Job.Status.DONE or result.get("failed") or result.get("cached"):
            raise SystemExit(f"the judge job did not run cleanly: {job.error or result}")
        sent = result["requests_sent"]
        return sent / wall, sent / result["seconds"], {**result, "queries": len(queries)}

    def close(self) -> None:
        self.media.cleanup()


def busy(deadline: float, parent: int) -> None:
    """One process of the background load: spin until the deadline or the parent is gone."""
    while time.monotonic() < deadline and os.getppid() == parent:
        sum(range(10_000))


class Load:
    """``n`` busy processes (``--load``) while the rounds run, and what the machine's load
    was: /proc/loadavg read before, every 2 s during and after the rounds."""

    def __init__(self, n: int):
        self.n = n
        self.processes: list[multiprocessing.Process] = []
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stopped.wait(2.0):
            self.samples.append(loadavg()[:2])

    def __enter__(self) -> "Load":
        self.before = loadavg()
        deadline = time.monotonic() + MAX_SECONDS  # never outlive a killed benchmark
        for _ in range(self.n):
            process = multiprocessing.Process(target=busy, args=(deadline, os.getpid()),
                                              daemon=True)  # fmt: skip
            process.start()
            self.processes.append(process)
        self.sampler.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join(5)
        self.sampler.join(5)
        self.after = loadavg()

    def summary(self) -> dict:
        def spread(values: list) -> list:
            return [min(values), round(sum(values) / len(values), 2), max(values)]

        return {
            "busy_processes": self.n,
            "before": self.before[2],
            "after": self.after[2],
            # The 1-minute average lags a change of load by about a minute; the number of
            # runnable tasks at each sample is the contention the clients met at that time.
            "one_minute_during": spread([one for one, _ in self.samples] or [self.after[0]]),
            "runnable_during": spread([r for _, r in self.samples] or [self.after[1]]),
        }


def loadavg() -> tuple[float, int, str]:
    """(1-minute load average, tasks runnable now, the whole /proc/loadavg line)."""
    line = Path("/proc/loadavg").read_text().strip()
    fields = line.split()
    return float(fields[0]), int(fields[3].split("/")[0]), line


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of another process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def older_client(tree: Path):
    """``annotation/judges/client.py`` of an older checkout (``--old-tree``, a ``git
    worktree``), imported under another name beside this checkout's. Its own imports
    (network, scrub, json_text) are this checkout's: only client.py is compared."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("old_judge_client",
                                                  tree / "annotation/judges/client.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def level_summary(runs: dict[str, list[dict]]) -> dict:
    """Per client at one concurrency: rates, CPU, and ratios to the bare loop's rates of
    the same rounds (the verdict: the ratio of the mean rates)."""
    bare = runs["bare_httpx"]
    out = {}
    for name, rows in runs.items():
        rates = [r["rate"] for r in rows]
        out[name] = {
            "requests_per_s": [round(r, 1) for r in rates],
            "ratio": round(sum(rates) / sum(b["rate"] for b in bare), 3),
            "ratio_per_round": [
                round(r["rate"] / b["rate"], 3) for r, b in zip(rows, bare, strict=True)
            ],
            # CPU of this process per request (every thread of it: the job's include the
            # database work before and after the batch), and of the server process.
            "cpu_ms_per_request": [round(r["cpu_ms"], 3) for r in rows],
            "server_cpu_ms_per_request": [round(r["server_cpu_ms"], 3) for r in rows],
            # This process's CPU over its wall time: the event loop's share of one core.
            "cores": [round(r["cores"], 2) for r in rows],
            "load_1min": [r["load"] for r in rows],
        }
    return out


def print_table(levels: dict[int, dict], n: int, load: dict) -> None:
    print(f"\n{n} requests per call; load average {load['before']} before, "
          f"{load['after']} after, 1-min {load['one_minute_during']} (min/mean/max) "
          f"during, runnable {load['runnable_during']}")  # fmt: skip
    print(f"{'conc':>4} {'client':<12} {'req/s (mean)':>12} {'ratio':>6} {'per round':<24} "
          f"{'CPU ms/req':>10} {'server ms':>9} {'cores':>5}")  # fmt: skip
    for concurrency, clients in levels.items():
        for name, s in clients.items():
            mean = sum(s["requests_per_s"]) / len(s["requests_per_s"])
            cpu = sum(s["cpu_ms_per_request"]) / len(s["cpu_ms_per_request"])
            server = sum(s["server_cpu_ms_per_request"]) / len(s["server_cpu_ms_per_request"])
            cores = sum(s["cores"]) / len(s["cores"])
            rounds = ", ".join(f"{r:.2f}" for r in s["ratio_per_round"])
            print(f"{concurrency:>4} {name:<12} {mean:>12.1f} {s['ratio']:>6.3f} {rounds:<24} "
                  f"{cpu:>10.3f} {server:>9.3f} {cores:>5.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=0, help="busy processes while measuring")
    parser.add_argument("--old-tree", type=Path, help="also run this tree's client.py")
    parser.add_argument("--port", type=int, default=8681)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="capeval_h25_bench")
    parser.add_argument("--no-platform", action="store_true", help="the client only")
    args = parser.parse_args()
    n = max(1, min(args.items, 100_000))
    levels = sorted({max(1, min(c, 64)) for c in args.concurrency})[:3]
    rounds = max(1, min(args.rounds, 5))
    busy_processes = max(0, min(args.load, 8))
    url = f"http://127.0.0.1:{args.port}/v1"
    old = older_client(args.old_tree.resolve()) if args.old_tree else None

    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(args.port, ready), daemon=True)
    server.start()
    platform = None
    try:
        if not ready.wait(10):
            raise SystemExit("the bench server did not start")
        batch = items(n)
        asyncio.run(bare(url, batch[:200], max(levels)))  # warm-up: connections, imports
        setup_seconds = None
        if not args.no_platform:
            set_up = time.perf_counter()
            platform = Platform(args.server, args.database, n, levels[0], url)
            setup_seconds = round(time.perf_counter() - set_up, 1)
        levels_out, jobs = {}, []
        with Load(busy_processes) as load:
            for concurrency in levels:
                runs = run_level(url, batch, concurrency, rounds, platform, old, server.pid, jobs)
                levels_out[concurrency] = level_summary(runs)
    finally:
        server.terminate()
        server.join(5)
        if platform is not None:
            platform.close()
    result = {
        "benchmark": "judges",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "items": n,
        "rounds": rounds,
        "image_bytes": len(IMAGE),
        "old_tree": str(args.old_tree) if args.old_tree else None,
        "levels": levels_out,
        "target_ratio": 0.90,
        "jobs": jobs,
        "platform_setup_seconds": setup_seconds,
        "database": None if platform is None else "PostgreSQL (scratch database, Celery eager)",
        "cpus": os.cpu_count(),
        "load": load.summary(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    print_table(levels_out, n, result["load"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"judges-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {out}")
    verdict = "client" if platform is None else "job_wall"
    return 0 if all(level[verdict]["ratio"] >= 0.90 for level in levels_out.values()) else 1


def run_level(url, batch, concurrency, rounds, platform, old, server_pid, jobs) -> dict:
    """Every client at one concurrency, ``rounds`` times, the order rotated per round so
    that drifting load on a shared machine does not always fall on the same client."""
    n = len(batch)
    runs: dict[str, list[dict]] = {"bare_httpx": [], "bare_workers": [], "client": []}
    calls = [
        ("bare_httpx", lambda: asyncio.run(bare(url, batch, concurrency))),
        ("bare_workers", lambda: asyncio.run(bare(url, batch, concurrency, shared=False))),
        ("client", lambda: ours(url, batch, concurrency)),
    ]
    if old is not None:
        runs["client_old"] = []
        calls.append(("client_old", lambda: ours(url, batch, concurrency, old.run_batch)))
    if platform is not None:
        platform.set_concurrency(concurrency)
        runs.update(job_wall=[], job_batch=[])
        calls.append(("job_wall", lambda: job(platform, jobs, concurrency, None)))
        if old is not None:
            runs.update(job_old_wall=[], job_old_batch=[])
            calls.append(("job_old_wall", lambda: job(platform, jobs, concurrency, old.run_batch)))
    for r in range(rounds):
        for name, call in calls[r % len(calls) :] + calls[: r % len(calls)]:
            cpu, server, wall = time.process_time(), cpu_seconds(server_pid), time.perf_counter()
            rate = call()
            wall = time.perf_counter() - wall
            cpu = time.process_time() - cpu
            runs[name].append({
                "rate": rate,
                "cpu_ms": cpu / n * 1000,
                "server_cpu_ms": (cpu_seconds(server_pid) - server) / n * 1000,
                "cores": cpu / wall,
                "load": loadavg()[0],
            })  # fmt: skip
            if name.startswith("job"):
                # The batch phase of the same job: the same CPU, its own rate.
                runs[name.replace("wall", "batch")].append(
                    {**runs[name][-1], "rate": jobs[-1]["rate"]}
                )
    return runs


def job(platform, jobs, concurrency, run_batch_of) -> float:
    """One job through the platform path; its requests/s over its wall time. Its batch
    phase's rate and the job's own figures go to ``jobs``."""
    rate, phase, result = platform.run(run_batch_of)
    jobs.append({"concurrency": concurrency, "old": run_batch_of is not None, "rate": phase,
                 **{k: result[k] for k in ("requests_sent", "answered", "seconds", "queries")},
                 "wall_seconds": round(result["requests_sent"] / rate, 2)})  # fmt: skip
    return rate


if __name__ == "__main__":
    raise SystemExit(main())
