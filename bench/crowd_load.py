"""Benchmark: hundreds of crowd annotators at once on two web nodes, one worker, PostgreSQL
and an object store, driven by Locust (issue 41; not a test).

    make bench   # once: installs Locust (pyproject's bench extra)
    .venv/bin/python bench/crowd_load.py [--modes vicr,humanr,arena] \
        [--users 200,350,500,650] [--seconds 30] [--spawn-rate 50] [--nodes 2] \
        [--node-workers 3] [--display-url] [--saturate-users 24] [--saturate-seconds 15] \
        [--server postgres://postgres@127.0.0.1:5432] [--database capeval_bench_crowd]

What runs, all on the loopback and private to the run:

- an S3-compatible store (s3rver, ``bench/_store.py``) holding every file;
- ``--nodes`` web nodes, each its own gunicorn (``--node-workers`` sync workers, 3 as
  ``docker-compose.yml`` runs a replica) with its
  own ``MEDIA_ROOT``, ``VAR_DIR`` and export folder, so a hidden shared-disk assumption
  fails; sessions, caches and rate limits in PostgreSQL and Redis (``REDIS_URL`` on a
  database number of the machine's Redis of the bench's own, flushed first);
- one Celery worker (``--pool solo``) on that Redis;
- the scratch PostgreSQL database ``--database`` (dropped and recreated!).

Per mode (VICR, HUMANr, the arena; their studies built as ``bench/vicr_game.py``,
``bench/humanr_load.py`` and ``bench/arena_load.py`` build them, with the modes' defaults
but the minimum times and per-address crowd limits, since every client is 127.0.0.1), the
images get real files: a few photos go through the import service into the store, and every
image of the study shows one of them. Each Locust user (``FastHttpUser``) is one annotator:
it arrives through the study's signed Prolific link, then loops: GET the next item, GET the
item's image as a browser would (the node's ``/media/`` answer, a redirect to a presigned
link, then the store), think, POST the answer, follow the redirect to a feedback or
end-of-group page (and its image), and read the completion code when a page shows one. Every
request goes to the next node in turn, as a round-robin proxy would send it, so one
annotator's session is served by every node, and carries the annotator's own address in
``X-Forwarded-For`` (the nodes believe one proxy, as behind the compose file's nginx).
With ``--display-url`` the pages name the renditions at the store instead
(``CAPEVAL_DISPLAY_URL``; s3rver serves objects unsigned, as a public bucket or a CDN
would), so an image is one request to the store and none to a node.

Think times are drawn from a log-normal with the mean the papers give (sigma 0.5): VICR 11 s
per rating (``../shared/papers/vicr-*.txt``: "about 11 seconds on average to rate an
image-caption pair"); HUMANr 6 s per comparison ($0.25 per 10 comparisons at over $15 an
hour: at most 60 s for 10); the arena, whose detailed captions take longer to read, the same
6 s, so its load is an upper bound of the real one.

For each crowd size of ``--users``: PostgreSQL's statistics are refreshed (``ANALYZE``, as
autovacuum would; this machine's server runs without it), the users arrive (``--spawn-rate``
a second), the clock starts once all are in and one mean think time has passed, and
``--seconds`` (at most 60) are measured: the 95th percentile of GET next, judgments
acknowledged per second, CPU seconds per request of the web nodes and of PostgreSQL's
backends of the database (from /proc), and the machine's busy cores. Then the users stop at
their next step (an annotator thinking abandons the item: its lease lapses) and the next
size starts with new ones. A size passes when its p95 of GET next is under 300 ms with no
failed request; the largest that passes is reported. Then the throughput: ``--saturate-
users`` annotators with no think time for ``--saturate-seconds`` on one node, all nodes,
all nodes again and one node again (so that the study filling up favours neither), in the
same run; the ratio of their mean judgments/s. At the end every answer acknowledged
is checked against the stored judgments (the modes' own checks from the load benches:
nothing lost, nothing duplicated, counters equal to rows).

Writes ``bench/results/crowd_load-<time>.json``; exits 1 if an answer was lost or duplicated.
"""

# Locust patches the standard library for gevent on import: before anything else imports it.
from locust import FastHttpUser, constant, task  # isort: skip
from locust.env import Environment  # isort: skip

import argparse
import itertools
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import _harness as harness
import _store
import gevent
from gevent.event import Event
from gevent.threadpool import ThreadPool

MODES = ("vicr", "humanr", "arena")
#: Mean seconds an annotator takes per answer (the module docstring gives the sources).
THINK_MEAN_S = {"vicr": 11.0, "humanr": 6.0, "arena": 6.0}
THINK_SIGMA = 0.5
P95_TARGET_MS = 300
REDIS_DB = 11
IMAGE = re.compile(r'<img src="([^"]+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
PART = re.compile(r'name="part" value="(\d+)"')
LEFT = re.compile(r'name="left" value="(\d+)"')
FORM = {
    "vicr": re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"'),
    "humanr": re.compile(r'<form method="post" action="([^"]+)" class="hr-form"'),
    "arena": re.compile(r'<form method="post" action="([^"]+)" class="arena-form"'),
}
PHOTOS = 8


class Crowd:
    """What the annotators of one mode share: where to go, and what they sent."""

    def __init__(self, mode: str, link: str, next_path: str, nodes: list[str]):
        self.mode, self.link, self.next_path, self.nodes = mode, link, next_path, nodes
        self.identities = itertools.count()
        self.stop = Event()
        self.think = True
        self.busy = 0
        self.sent: list[tuple] = []  # acknowledged answers, as the mode's check counts them
        self.unanswered: list[tuple] = []  # answers sent without an acknowledgment
        self.acknowledged_at: list[float] = []
        self.completions: set[str] = set()
        self.told_nothing_left = 0
        # The arena's gold battles are answered as an attentive worker would, read from the
        # database in two real threads (one connection each), not in the users' greenlets.
        self.lookups = ThreadPool(2)


CROWD: Crowd | None = None


class Annotator(FastHttpUser):
    """One crowd annotator of ``CROWD``'s study (module docstring)."""

    host = "http://127.0.0.1"  # every request below names its node
    wait_time = constant(0)
    network_timeout = connection_timeout = float(harness.REQUEST_TIMEOUT)

    def on_start(self) -> None:
        k = next(CROWD.identities)
        self.pid, self.rng, self.turn = f"bench-{k}", random.Random(k), k
        self.answered = 0
        self.done = False
        # Each annotator's own address, as the compose file's proxy appends it (the nodes
        # believe one proxy): on 127.0.0.1 alone every annotator would be one network, whose
        # identities the lapse rule and the network limit link (a campus NAT at worst).
        self.headers = {"X-Forwarded-For": f"10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}"}
        query = f"?PROLIFIC_PID={self.pid}&STUDY_ID=bench&SESSION_ID=s{k}"
        self.client.get(self.url(CROWD.link + query), name="arrive", headers=self.headers)

    def url(self, path: str) -> str:
        self.turn += 1
        return CROWD.nodes[self.turn % len(CROWD.nodes)] + path

    @task
    def one_item(self) -> None:
        if CROWD.stop.is_set() or self.done:
            gevent.sleep(0.5)
            return
        CROWD.busy += 1
        try:
            self._one_item()
        finally:
            CROWD.busy -= 1

    def _one_item(self) -> None:
        with self.client.get(
            self.url(CROWD.next_path), name="next", headers=self.headers, catch_response=True
        ) as page:
            if page.status_code != 200:
                page.failure(f"GET next answered {page.status_code}")
                return
            text = page.text or ""
        self._page_extras(text)
        form = FORM[CROWD.mode].search(text)
        if form is None:
            self.done = True  # nothing left for this annotator
            CROWD.told_nothing_left += 1
            return
        action = form.group(1)
        token = action.rstrip("/").rsplit("/", 1)[-1]
        data, sent = self._answer(text, token)
        if CROWD.think:
            mean = THINK_MEAN_S[CROWD.mode]
            think = self.rng.lognormvariate(math.log(mean) - THINK_SIGMA**2 / 2, THINK_SIGMA)
            if CROWD.stop.wait(think):
                return  # the run ended while thinking: the item is abandoned, not answered
        with self.client.post(
            self.url(action), data=data, name="answer", allow_redirects=False,
            headers={**self.headers, "Referer": CROWD.nodes[0] + CROWD.next_path},
            catch_response=True,
        ) as answer:  # fmt: skip
            if answer.status_code != 302:
                # Unacknowledged (an error, or no answer in time): it may still be stored.
                CROWD.unanswered.append(sent)
                answer.failure(f"POST answered {answer.status_code}: {said(answer.text)}")
                return
            where = answer.headers.get("Location", "")
        CROWD.sent.append(sent)
        CROWD.acknowledged_at.append(time.monotonic())
        self.answered += 1
        if "/feedback/" in where:
            with self.client.get(
                self.url(where), name="feedback", headers=self.headers, catch_response=True
            ) as end:
                if end.status_code != 200:
                    end.failure(f"GET feedback answered {end.status_code}")
                    return
                text = end.text or ""
            self._page_extras(text)

    def _answer(self, text: str, token: str) -> tuple[dict, tuple]:
        """The form's fields and what the mode's integrity check counts as sent."""
        data = {"csrfmiddlewaretoken": CSRF.search(text).group(1)}
        if CROWD.mode == "vicr":
            rating = self.rng.randint(1, 5)
            data.update(rating=str(rating), part="0")
            return data, (self.pid, token, rating)
        part = int(PART.search(text).group(1))
        if CROWD.mode == "humanr":
            raw = self.rng.randint(1, 9)
            data.update(part=str(part), raw=str(raw), left=LEFT.search(text).group(1))
            return data, (self.pid, token, part, raw)
        import arena_load

        gold = CROWD.lookups.apply(arena_load.gold_side, (token,))
        data.update(part=str(part), outcome=gold or self.rng.choice(["a", "b", "tie", "bothbad"]))
        return data, (self.pid, token)

    def _page_extras(self, text: str) -> None:
        """What a browser does with a page: fetch its images; read a completion code."""
        if 'id="completion-code"' in text:
            CROWD.completions.add(self.pid)
        for src in IMAGE.findall(text):
            if not src.startswith("/media/"):  # CAPEVAL_DISPLAY_URL: straight to the store
                self.client.get(src, name="image: store")
                continue
            with self.client.get(
                self.url(src), name="image: node", headers=self.headers,
                allow_redirects=False, catch_response=True,
            ) as hop:  # fmt: skip
                if hop.status_code != 302:
                    hop.failure(f"image answered {hop.status_code}")
                    continue
                link = hop.headers["Location"]
            self.client.get(link, name="image: store")


def said(html: str | None) -> str:
    """A refusal page's message, for the failure's record: its text around "saved"."""
    text = " ".join(re.sub(r"<[^>]+>", " ", html or "").split())
    at = text.find("saved")
    return text[max(0, at - 120) : at + 20] if at >= 0 else text[:140]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--users", default="200,350,500,650")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--spawn-rate", type=float, default=50)
    parser.add_argument("--nodes", type=int, default=2)
    # As docker-compose.yml runs each web replica: gunicorn with 3 sync workers.
    parser.add_argument("--node-workers", type=int, default=3)
    parser.add_argument("--saturate-users", type=int, default=24)
    parser.add_argument("--saturate-seconds", type=float, default=15)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_crowd")
    parser.add_argument(
        "--display-url",
        action="store_true",
        help="pages name renditions at the store (CAPEVAL_DISPLAY_URL), not the nodes' /media/",
    )
    parser.add_argument("--output")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    sizes = sorted({int(n) for n in args.users.split(",")})
    seconds = harness.bounded_seconds(args.seconds)
    saturate = harness.bounded_seconds(args.saturate_seconds)

    with tempfile.TemporaryDirectory(prefix="capeval-crowd-") as scratch, ExitStack() as stack:
        root = Path(scratch)
        store = stack.enter_context(_store.running_store(root / "store"))
        os.environ.update(store)
        redis = f"redis://127.0.0.1:6379/{REDIS_DB}"
        subprocess.run(
            ["redis-cli", "-n", str(REDIS_DB), "flushdb"], check=True, capture_output=True
        )
        env = harness.prepare_database(args.server, args.database)
        # As behind the compose file's proxy, which appends each client's address.
        env = {**env, **store, "REDIS_URL": redis, "CAPEVAL_TRUSTED_PROXIES": "1"}
        if args.display_url:  # s3rver serves objects unsigned, as a public bucket or a CDN
            bucket = f"{store['CAPEVAL_S3_ENDPOINT_URL']}/{store['CAPEVAL_S3_BUCKET']}/"
            env["CAPEVAL_DISPLAY_URL"] = bucket
        photos = import_photos(root / "photos")
        stack.enter_context(celery_worker(env, root / "worker"))
        nodes = [
            stack.enter_context(web_node(env, root / f"node-{i}", args.node_workers))
            for i in range(args.nodes)
        ]
        result: dict[str, Any] = {
            "started": harness.now_iso(),
            "python_speed": harness.python_speed(),
            "load_average_at_start": harness.load_average(),
            "nodes": args.nodes,
            "display_url": env.get("CAPEVAL_DISPLAY_URL", ""),
            "node_workers": args.node_workers,
            "seconds": seconds,
            "think_mean_s": THINK_MEAN_S,
            "modes": {},
        }
        failed = False
        for mode in modes:
            measured = run_mode(mode, sizes, seconds, saturate, args, nodes, photos)
            result["modes"][mode] = measured
            failed |= not measured["integrity"]["ok"]
            report(mode, measured)
        result["load_average_at_end"] = harness.load_average()
    harness.write_result("crowd_load", result, args.output)
    sys.exit(1 if failed else 0)


def run_mode(mode, sizes, seconds, saturate, args, nodes, photos) -> dict:
    """Build the mode's study, run each crowd size and the saturation runs, check it all."""
    global CROWD
    study, link = build_study(mode, players=sum(sizes) + 4 * args.saturate_users)
    attach_photos(study, photos)
    bases = [node.base for node in nodes]
    CROWD = Crowd(mode, link, f"/s/{study.public_id}/next/", bases)
    measured: dict[str, Any] = {"steps": [], "saturation": {}}
    for users in sizes:
        analyze()
        step = run_step(users, seconds, args.spawn_rate, nodes, args.database, think=True)
        step["passes"] = step["next_p95_ms"] < P95_TARGET_MS and step["failures"] == 0
        measured["steps"].append(step)
        print(f"  {mode} {users:4d} annotators: p95 next {step['next_p95_ms']} ms, "
              f"{step['judgments_per_second']} judgments/s, {step['failures']} failed")  # fmt: skip
    passing = [s["users"] for s in measured["steps"] if s["passes"]]
    measured["most_annotators_under_target"] = max(passing, default=None)
    # One node, all nodes, all nodes, one node (ABBA): the study fills as the runs go, so
    # a fixed order would give the later count a fuller study; this order cancels a steady
    # drift. The ratio is of the judgments each count stored in its two runs.
    many = len(nodes)
    done = {1: [], many: []}
    for turn, count in enumerate((1, many, many, 1)):
        analyze()
        CROWD.nodes = bases[:count]
        run = run_step(
            args.saturate_users, saturate, args.spawn_rate, nodes[:count], args.database,
            think=False,
        )  # fmt: skip
        measured["saturation"][f"{count}_nodes_{turn}"] = run
        done[count].append(run["judgments"] / run["seconds"])
    CROWD.nodes = bases
    one, all_nodes = sum(done[1]) / 2, sum(done[many]) / 2
    rates = {"1": round(one, 1), str(many): round(all_nodes, 1)}
    measured["saturation_judgments_per_second"] = rates
    measured["throughput_ratio"] = round(all_nodes / one, 2) if one else None
    measured["integrity"] = integrity(mode, study)
    measured["completion_codes_shown"] = len(CROWD.completions)
    CROWD.lookups.kill()
    return measured


def run_step(users, seconds, spawn_rate, nodes, database, *, think) -> dict:
    """One crowd size: arrive, settle, measure ``seconds``, stop the users cleanly."""
    CROWD.stop.clear()
    CROWD.think = think
    environment = Environment(user_classes=[Annotator])
    runner = environment.create_local_runner()
    runner.start(users, spawn_rate=spawn_rate)
    while runner.user_count < users:
        gevent.sleep(0.2)
    gevent.sleep(THINK_MEAN_S[CROWD.mode] if think else 1.0)  # past the arrivals' burst
    environment.stats.reset_all()
    before = cpu_snapshot(nodes, database)
    acknowledged = len(CROWD.acknowledged_at)
    started = time.monotonic()
    gevent.sleep(seconds)
    elapsed = time.monotonic() - started
    after = cpu_snapshot(nodes, database)
    stats = environment.stats
    judgments = len(CROWD.acknowledged_at) - acknowledged
    CROWD.stop.set()
    deadline = time.monotonic() + harness.REQUEST_TIMEOUT + 5
    while CROWD.busy and time.monotonic() < deadline:
        gevent.sleep(0.2)
    runner.quit()
    node_requests = sum(
        stats.get(name, method).num_requests
        for name, method in (("next", "GET"), ("answer", "POST"), ("feedback", "GET"),
                             ("image: node", "GET"))
    )  # fmt: skip
    nxt = stats.get("next", "GET")
    cpu = {key: after[key] - before[key] for key in ("nodes", "client")}
    # Per backend: one that started during the run counts whole, one that closed during it
    # (a connection past CAPEVAL_DB_CONN_MAX_AGE) is missed, so this is a lower bound.
    cpu["postgres"] = sum(
        used - before["backends"].get(pid, 0.0) for pid, used in after["backends"].items()
    )
    busy = (after["busy"] - before["busy"]) / max(1, after["ticks"] - before["ticks"])
    return {
        "users": users,
        "seconds": round(elapsed, 1),
        "next_requests": nxt.num_requests,
        "next_p50_ms": nxt.get_response_time_percentile(0.5),
        "next_p95_ms": nxt.get_response_time_percentile(0.95),
        "next_p99_ms": nxt.get_response_time_percentile(0.99),
        "answer_p95_ms": stats.get("answer", "POST").get_response_time_percentile(0.95),
        "image_store_p95_ms": stats.get("image: store", "GET").get_response_time_percentile(0.95),
        "failures": stats.total.num_failures,
        "failure_examples": [str(e.error)[:200] for e in list(stats.errors.values())[:5]],
        "node_requests": node_requests,
        "judgments": judgments,
        "judgments_per_second": round(judgments / elapsed, 1),
        "cpu_ms_per_node_request": {
            part: round(1000 * cpu[part] / node_requests, 2) if node_requests else None
            for part in ("nodes", "postgres", "client")
        },
        # What one answer costs, with the pages, images and redirects that go with it.
        "node_requests_per_judgment": round(node_requests / judgments, 2) if judgments else None,
        "cpu_ms_per_judgment": {
            part: round(1000 * cpu[part] / judgments, 1) if judgments else None
            for part in ("nodes", "postgres")
        },
        "machine_busy_cores": round(busy * (os.cpu_count() or 1), 2),
        "load_average": harness.load_average(),
    }


def cpu_snapshot(nodes, database) -> dict[str, Any]:
    busy, ticks = harness._cpu_ticks()
    return {
        "nodes": sum(node.cpu_now() for node in nodes),
        "backends": harness.database_backends_cpu(database),
        "client": time.process_time(),
        "busy": busy,
        "ticks": ticks,
    }


def build_study(mode: str, players: int):
    """The mode's study as its load bench builds it; returns it and its crowd link."""
    from annotation.models import User

    # The load benches each name their owner "bench"; one database holds all three here.
    User.objects.filter(username="bench").update(username=f"bench-before-{mode}")
    if mode == "vicr":
        import vicr_game
        from assign import VETERAN_RATINGS

        return vicr_game.build_study(players, 20_000, game_ratings=VETERAN_RATINGS)
    if mode == "humanr":
        import humanr_load

        return humanr_load.build_study(3_000)
    import arena_load

    return arena_load.build_study(3_000)


def import_photos(folder: Path) -> list[dict]:
    """A few photos through the import service into the store; their files' fields."""
    from PIL import Image as PILImage

    from annotation.models import Image, User
    from annotation.services.imports import study_import
    from annotation.services.studies import study_create

    folder.mkdir(parents=True)
    rng = random.Random(7)
    for i in range(PHOTOS):
        noise = PILImage.effect_noise((800, 600), 40 + 5 * i).convert("RGB")
        tint = PILImage.new("RGB", (800, 600), tuple(rng.randrange(256) for _ in range(3)))
        PILImage.blend(noise, tint, 0.5).save(folder / f"photo-{i}.jpg", quality=85)
    owner = User.objects.create_user("bench-photos", is_researcher=True)
    draft = study_create(owner=owner, name="Photos", mode="vicr", seed=1, settings={})
    study_import(study=draft, image_sources=[folder])
    fields = ("file", "display", "sha256", "width", "height", "format")
    return list(Image.objects.filter(study=draft).order_by("name").values(*fields))


def attach_photos(study, photos: list[dict]) -> None:
    """Every image of the study shows one of the imported photos (its files in the store)."""
    from annotation.models import Image

    images = list(Image.objects.filter(study=study).order_by("pk"))
    for i, image in enumerate(images):
        for key, value in photos[i % len(photos)].items():
            setattr(image, key, value)
    Image.objects.bulk_update(images, list(photos[0]), batch_size=2000)


def integrity(mode: str, study) -> dict:
    """The mode's own check from its load bench: every acknowledged answer stored once, and
    nothing stored that was not sent. An answer sent without an acknowledgment (an error
    answer, or none in time) may have been stored all the same (the commit happened, the
    answer did not arrive): those stored count as sent, the others are reported."""
    from annotation.models import Judgment

    if mode == "vicr":
        from assign import integrity_check
    elif mode == "humanr":
        from humanr_load import integrity_check
    else:
        from arena_load import integrity_check

    # The stored answers in the shape the mode's check compares (as ``Annotator._answer``).
    fields = {
        "vicr": ("payload__rating",),
        "humanr": ("part", "payload__raw"),
        "arena": (),
    }[mode]
    rows = Judgment.objects.filter(study=study).values_list(
        "participant__external_id", "assignment__token", *fields
    )
    stored = {(pid, str(token), *rest) for pid, token, *rest in rows}
    extra = [sent for sent in CROWD.unanswered if (sent[0], str(sent[1]), *sent[2:]) in stored]
    check = integrity_check(study, CROWD.sent + extra)
    check["stored_though_unacknowledged"] = len(extra)
    check["unacknowledged_and_not_stored"] = len(CROWD.unanswered) - len(extra)
    return check


def analyze() -> None:
    """Refresh PostgreSQL's statistics, as autovacuum does about once a minute on a
    database that changes this fast. This machine's server runs with autovacuum off, and
    the planner would keep the tables' sizes from before the load: nested loops over what
    it believes are empty tables (seen: 300 ms per GET next at 200 annotators)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


@contextmanager
def web_node(env: dict, folder: Path, workers: int):
    """A gunicorn of its own with folders of its own (the files are in the store)."""
    own = {
        "CAPEVAL_MEDIA_ROOT": str(folder / "media"),
        "CAPEVAL_VAR_DIR": str(folder / "var"),
        "CAPEVAL_EXPORT_DIR": str(folder / "exports"),
    }
    with harness.gunicorn({**env, **own}, workers=workers) as server:
        yield server
    left = [p for p in folder.rglob("*") if p.is_file() and "media" in p.parts]
    if left:
        raise SystemExit(f"a web node wrote files of its own: {left[:5]}")


@contextmanager
def celery_worker(env: dict, folder: Path):
    folder.mkdir(parents=True)
    own = {"CAPEVAL_VAR_DIR": str(folder / "var"), "CAPEVAL_MEDIA_ROOT": str(folder / "media")}
    process = subprocess.Popen(
        [str(harness.REPO / ".venv" / "bin" / "celery"), "-A", "capeval.celery_app", "worker",
         "--pool", "solo", "--loglevel", "warning"],
        cwd=harness.TREE, env={**env, **own}, start_new_session=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def report(mode: str, measured: dict) -> None:
    print(f"{mode}: most annotators with p95 next < {P95_TARGET_MS} ms: "
          f"{measured['most_annotators_under_target']}")  # fmt: skip
    for count, rate in measured["saturation_judgments_per_second"].items():
        print(f"  saturated, {count} node(s), mean of two runs: {rate} judgments/s")
    print(f"  throughput ratio (all nodes / one): {measured['throughput_ratio']}")
    print(f"  integrity: {measured['integrity']}")


if __name__ == "__main__":
    main()
