"""Benchmark a judge run through the platform and the judge client against a bare httpx
loop (not a test; prints numbers).

    PYTHONPATH=$PWD:$PWD/platform .venv/bin/python bench/judges.py [--items 10000]
        [--concurrency 16] [--rounds 3] [--port 8681] [--database capeval_h25_bench]
        [--server postgres://postgres@127.0.0.1:5432] [--no-platform]

The platform path (issue 25, "Speed", the figure that counts): a THumB study of
``--items`` captions (10 per image, a distinct 20 kB image file each) in a scratch
PostgreSQL database (``--database`` on ``--server``, dropped and recreated), the endpoint
saved with ``judge_endpoint_save`` at ``--concurrency``, and per round a new prompt
version (so the cache answers nothing) run by ``judge_run_request`` + ``tasks.enqueue``:
the job the page's "Run the judge" button starts (Celery eager: no broker, the same
``runner.job_run``), which reads the units and images, calls ``run_batch``, checks every
reply with THumB's own validation and stores 10,000 ``JudgeAnswer`` and cache rows in one
transaction. Reported: the job's requests/s over its whole wall time (setup and the
write included) and over its batch phase alone, each against the bare loop's.

What it measures (issue 25, "Speed"): ``annotation.judges.client.run_batch`` over
``--items`` items at ``--concurrency`` concurrent requests against a local
OpenAI-compatible server that answers instantly, and, in the same run against the same
server, a bare ``httpx.AsyncClient`` loop at the same concurrency posting the same
chat-completions body (the image as a data URL) and reading the JSON reply. Target: the
client's requests/s within 10% of the bare loop's (``ratio`` >= 0.90, else exit 1), i.e.
the client's bookkeeping (payload building, base64 of the image, retries, parsing, cache,
progress) keeps the server as busy as the simplest possible client would.

The server is a minimal HTTP/1.1 keep-alive responder on asyncio in its own process (so
it does not share the clients' interpreter lock), bound to 127.0.0.1 only, answering every
POST with one fixed chat-completions JSON body. It exits by itself after ``MAX_SECONDS``
even if this script is killed. The two clients alternate for ``--rounds`` rounds (bare,
client, bare, client...) so that a change of machine load hits both; the result reports
every round; the verdict is the ratio of the mean rates (the best rates' ratio is printed
too, but one lucky round decides it), and the CPU time this process spent per request
for each client is printed as well (much steadier than rates on a shared machine).

Bounded: at most 100,000 items, 64 concurrent requests, 5 rounds; every request has a
10 s timeout.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from annotation.judges.client import Endpoint, JudgeItem, chat_payload, run_batch  # noqa: E402
from annotation.judges.network import AddressPolicy  # noqa: E402

# A 10,000-item round of the three clients takes ~5 minutes on a loaded 2-core machine.
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


async def bare(url: str, batch: list[JudgeItem], concurrency: int) -> float:
    """The simplest client: N workers posting prebuilt bodies, reading the JSON reply."""
    endpoint = Endpoint(url, "bench", "sk-bench")
    bodies = [chat_payload(endpoint, item, 0.0, None) for item in batch]
    queue = iter(range(len(bodies)))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    started = time.perf_counter()
    async with httpx.AsyncClient(headers=endpoint.headers(), timeout=10.0, limits=limits) as client:

        async def worker() -> None:
            for i in queue:
                response = await client.post(endpoint.url, json=bodies[i])
                response.raise_for_status()
                json.loads(response.json()["choices"][0]["message"]["content"])

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(bodies) / (time.perf_counter() - started)


def ours(url: str, batch: list[JudgeItem], concurrency: int) -> float:
    done = []
    out = run_batch(
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
        from annotation.services.judge_endpoints import judge_endpoint_save
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
        judge_endpoint_save(
            study=self.study, name="bench", base_url=url, model="bench", api_key="sk-bench",
            concurrency=concurrency, timeout=10.0, max_retries=0, by=self.owner,
        )  # fmt: skip
        self.round = 0

    def run(self) -> tuple[float, float, dict]:
        """One judge run with a new prompt version: (requests/s over the job's wall time,
        requests/s over its batch phase, the job's result)."""
        from annotation.models import Job
        from annotation.services.judge_runs import judge_prompt_save, judge_run_request
        from annotation.tasks import enqueue

        self.round += 1
        judge_prompt_save(
            study=self.study, by=self.owner,
            text=f"Round {self.round}. Score the caption: {{caption}}. Reply in JSON.",
        )  # fmt: skip
        started = time.perf_counter()
        job = enqueue(judge_run_request(study=self.study, by=self.owner))
        job.refresh_from_db()
        wall = time.perf_counter() - started
        result = job.result
        if job.status != Job.Status.DONE or result.get("failed") or result.get("cached"):
            raise SystemExit(f"the judge job did not run cleanly: {job.error or result}")
        sent = result["requests_sent"]
        return sent / wall, sent / result["seconds"], result

    def close(self) -> None:
        self.media.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=8681)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="capeval_h25_bench")
    parser.add_argument("--no-platform", action="store_true", help="the client only")
    args = parser.parse_args()
    n = max(1, min(args.items, 100_000))
    concurrency = max(1, min(args.concurrency, 64))
    rounds = max(1, min(args.rounds, 5))
    url = f"http://127.0.0.1:{args.port}/v1"

    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(args.port, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(10):
            raise SystemExit("the bench server did not start")
        batch = items(n)
        asyncio.run(bare(url, batch[:200], concurrency))  # warm-up: connections, imports
        rates: dict[str, list[float]] = {"bare_httpx": [], "client": []}
        cpu: dict[str, list[float]] = {"bare_httpx": [], "client": []}
        platform = None
        if not args.no_platform:
            set_up = time.perf_counter()
            platform = Platform(args.server, args.database, n, concurrency, url)
            setup_seconds = round(time.perf_counter() - set_up, 1)
            rates.update(job_wall=[], job_batch=[])
            cpu["job_wall"] = []
        calls = [
            ("bare_httpx", lambda: asyncio.run(bare(url, batch, concurrency))),
            ("client", lambda: ours(url, batch, concurrency)),
        ]
        job_results = []

        def job() -> float:
            wall, phase, result = platform.run()
            rates["job_batch"].append(phase)
            job_results.append(result)
            return wall

        if platform is not None:
            calls.append(("job_wall", job))
        for r in range(rounds):
            # Each round starts with another client, so that drifting load on a shared
            # machine does not always fall on the same one.
            for name, call in calls[r % len(calls) :] + calls[: r % len(calls)]:
                before = time.process_time()
                rates[name].append(call())
                cpu[name].append((time.process_time() - before) / n * 1000)
    finally:
        server.terminate()
        server.join(5)
        if platform is not None:
            platform.close()
    best_bare, best_ours = max(rates["bare_httpx"]), max(rates["client"])
    result = {
        "benchmark": "judges",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "items": n,
        "concurrency": concurrency,
        "image_bytes": len(IMAGE),
        "requests_per_s": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
        "best_bare_httpx": round(best_bare, 1),
        "best_client": round(best_ours, 1),
        # The verdict: mean rates over alternating rounds, so drifting load hits both alike.
        "ratio": round(sum(rates["client"]) / sum(rates["bare_httpx"]), 3),
        "ratio_of_best": round(best_ours / best_bare, 3),
        # CPU milliseconds of this process per request: on a busy shared machine the rates
        # swing with other load, the CPU each client spends per request much less.
        "cpu_ms_per_request": {k: [round(v, 3) for v in vs] for k, vs in cpu.items()},
        "target_ratio": 0.90,
        **(
            {
                # The platform path: the job over its wall time and over its batch phase.
                "job_ratio": round(sum(rates["job_wall"]) / sum(rates["bare_httpx"]), 3),
                "job_batch_ratio": round(sum(rates["job_batch"]) / sum(rates["bare_httpx"]), 3),
                "job_seconds": [round(n / r, 2) for r in rates["job_wall"]],
                "job_batch_seconds": [r["seconds"] for r in job_results],
                "job_requests_sent": [r["requests_sent"] for r in job_results],
                "job_answered": [r["answered"] for r in job_results],
                "platform_setup_seconds": setup_seconds,
                "database": "PostgreSQL (scratch database, Celery eager)",
            }
            if platform is not None
            else {}
        ),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"judges-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {out}")
    verdict = result.get("job_ratio", result["ratio"])
    return 0 if verdict >= 0.90 else 1


if __name__ == "__main__":
    raise SystemExit(main())
