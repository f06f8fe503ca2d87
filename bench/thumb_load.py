"""Benchmark: crowd workers scoring THumB caption sets through gunicorn and PostgreSQL.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about a minute:

    .venv/bin/python bench/thumb_load.py [--workers 20] [--images 1500] [--seconds 20] \
        [--gunicorn-workers 2] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_thumb_load] [--minimal-seconds 10] [--count-seconds 5] \
        [--count-workers 4]

Follows ``bench/humanr_load.py`` (issue 48: THumB had no load bench, so no ratio):

1. (Re)creates the scratch database and migrates it (``manage.py migrate``).
2. Builds a live THumB study with the mode's defaults (both stages, the third annotator's
   check of 100 captions, the native-speaker fluency round, no catch trials) but
   ``seconds_per_caption=0`` (the minimum time would measure sleeping) and the
   per-address crowd limits lifted: ``--images`` images (rows without files), each with
   a human caption and one of each of four systems, so five caption groups per page, as
   in THumB 1.0. Each image is a stage-1 item and a stage-2 review item; storing stage 2
   makes its fluency round (crowd workers are not native speakers, so never served) and,
   for an image in the check sample, a check item.
3. Starts gunicorn (``--gunicorn-workers`` sync workers) on a free loopback port with
   ``CAPEVAL_TRUSTED_PROXIES=1``; every simulated worker (a thread with its own
   ``requests.Session``) sends an address of its own in ``X-Forwarded-For``. On 127.0.0.1
   alone every worker would share one network, which THumB links into one person
   (``annotation.identities``): no stage 2 or check would ever be served. Each worker
   arrives through the signed Prolific link with its own PROLIFIC_PID, then loops until
   ``--seconds`` pass (at most 60) or nothing is left: GET the item page, read the form
   (action, kind, caption groups), POST a precision and recall 1-5, the conciseness and
   inclusive-language penalties (mostly 0), sometimes a fixed fluency error, and on a
   review page each caption's "I checked this caption" box; about 2% of answers are
   posted twice, as a double click would. The POST redirects to the next item, which the
   loop GETs.
4. Stops gunicorn and checks the stored judgments against what the simulators sent: the
   set of (worker, lease token, kind, scores per caption group) must be equal, no lease
   holds two judgments, no item is over its target, each item's ``judgment_count`` and
   ``open_lease_count`` equal its stored judgments and open leases, no worker scored two
   stages of one image (stage 1 and its review, or either and the check), every review
   was stored after the stage it reviews, and every image with a stored stage 2 got
   exactly one fluency round and, when sampled, exactly one check item.

The ratio (issue 48, ``_baseline.py``): as many clients GET ``/ping`` on the same gunicorn
for ``--minimal-seconds`` before and after the run; the run's gunicorn CPU per request (GET
item page, POST, double POSTs) is reported as a multiple of it. Then ``--count-workers`` of
the workers go on for ``--count-seconds`` through a counting gunicorn (``_count_wsgi.py``):
queries per request kind; their answers are checked with the run's.
``bench/arena_load.py`` runs this script beside the arena (``--no-thumb`` leaves it out),
and through it, old code against new (``--old-tree``).

Writes JSON to ``bench/results/`` (git-ignored). Exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter

import _baseline as baseline
import _harness as harness

FORM = re.compile(
    r'<form method="post" action="([^"]+)" id="thumb-form" data-kind="([^"]*)" '
    r'data-reviewed="([^"]*)"'
)
PART = re.compile(r'name="part" value="(\d+)"')
GROUP = re.compile(r'name="(c\d+)-precision"')
# Fluency errors with a fixed penalty (the others need an amount): a checkbox per group.
FIXED_FLUENCY = re.compile(r'name="(c\d+)-fluency" value="([a-z_]+)" data-penalty=')
SYSTEMS = ("Up-Down", "Unified-VLP", "VinVL-base", "VinVL-large")
REVIEWS = ("stage2", "check")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--images", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_thumb_load")
    parser.add_argument("--minimal-seconds", type=float, default=10)
    parser.add_argument("--count-seconds", type=float, default=5)
    parser.add_argument("--count-workers", type=int, default=4)
    parser.add_argument("--result-file", help="write the JSON result here")
    args = parser.parse_args()
    if not (1 <= args.workers <= 200 and 10 <= args.images <= 20_000):
        parser.error("--workers 1..200, --images 10..20,000")
    seconds = harness.bounded_seconds(args.seconds)
    env = harness.prepare_database(args.server, args.database)
    # Each worker's own address in X-Forwarded-For (see the docstring), believed from one
    # proxy as behind the compose file's.
    env["CAPEVAL_TRUSTED_PROXIES"] = "1"
    study, link = build_study(args.images)
    minimal = []
    kept: dict[int, dict] = {}
    with harness.gunicorn(env, workers=args.gunicorn_workers) as server:
        minimal.append(baseline.minimal_run(server, args.workers, args.minimal_seconds))
        print(
            f"thumb: gunicorn ({args.gunicorn_workers} workers) on {server.base}; "
            f"{args.workers} crowd workers, {args.images} images, {seconds:.0f} s",
            flush=True,
        )
        crowd = harness.run_crowd(
            args.workers,
            arrive=lambda k: kept.setdefault(k, arrive(server.base, link, k)),
            play=lambda k, arrived, deadline: score_until_deadline(
                server.base, k, arrived, deadline
            ),
            seconds=seconds,
            server=server,
        )
        minimal.append(baseline.minimal_run(server, args.workers, args.minimal_seconds))
    counted, count_errors = baseline.count_pass(
        env,
        clients=min(args.count_workers, len(kept)),
        seconds=harness.bounded_seconds(args.count_seconds),
        arrive=lambda base, k: baseline.moved(kept[k], base),
        play=score_until_deadline,
    )
    sent = [row for run in [*crowd.results, *counted] for row in run["sent"]]
    errors = (
        crowd.errors
        + count_errors
        + [error for run in [*crowd.results, *counted] for error in run["errors"]]
    )
    check = integrity_check(study, sent)
    timed = sum(len(run["sent"]) for run in crowd.results)
    cpu_ms = harness.cpu_per_request(
        crowd.cpu,
        sum(len(run["get"]) + len(run["post"]) + run["doubles"] for run in crowd.results),
    )
    result = {
        "when": harness.now_iso(),
        "crowd_workers": args.workers,
        "images": args.images,
        "gunicorn_workers": args.gunicorn_workers,
        "database": "postgresql",
        "seconds": round(crowd.elapsed, 2),
        "load_average_at_start": crowd.load_at_start,
        "load_average_at_end": crowd.load_at_end,
        "cpu": crowd.cpu,
        "cpu_ms_per_request": cpu_ms,
        "cpu_per_request_vs_minimal": baseline.ratios(cpu_ms, minimal),
        "queries_per_request": baseline.query_summary(counted),
        "minimal": minimal,
        "judgments": timed,
        "judgments_per_second": round(timed / crowd.elapsed, 1),
        "judgments_by_kind": dict(
            Counter(kind for run in crowd.results for _pid, _token, kind, _a in run["sent"])
        ),
        "double_posts": sum(run["doubles"] for run in crowd.results),
        "workers_told_nothing_left": sum(
            bool(run.get("told_nothing_left")) for run in crowd.results
        ),
        "answer_post_ms": harness.summary([t for run in crowd.results for t in run["post"]]),
        "item_page_get_ms": harness.summary([t for run in crowd.results for t in run["get"]]),
        "errors": errors[:20],
        "error_count": len(errors),
        "integrity": check,
    }
    harness.write_result("thumb_load", result, args.result_file)
    if not check["ok"] or errors:
        sys.exit(1)


def build_study(images: int):
    from annotation.models import Caption, Image, User
    from annotation.modes.importing import fileless_image
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open
    from rubrics import thumb as rubric

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="THumB benchmark",
        mode="thumb",
        seed=7,
        settings={
            "seconds_per_caption": 0,
            "crowd_arrivals_per_address_per_hour": 100_000,
            "crowd_open_leases_per_address": 100_000,
        },
    )
    rows = Image.objects.bulk_create(
        fileless_image(study=study, name=f"img-{i}.jpg", alt_text=f"Benchmark image {i}")
        for i in range(images)
    )
    captions = []
    for i, image in enumerate(rows):
        # Distinct texts: one caption group per caption, five groups per page.
        texts = [(Caption.HUMAN, f"a person walking a dog past shop {i}")]
        texts += [(system, f"{system} sees a dog on street {i}") for system in SYSTEMS]
        for k, (system, raw) in enumerate(texts):
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=raw,
                    text=rubric.normalise(raw),
                    line=i * 10 + k,
                )
            )
    Caption.objects.bulk_create(captions, batch_size=2000)
    study_open(study=study)
    return study, f"/p/{crowd_link_token(study)}/"


def arrive(base: str, link: str, k: int) -> dict:
    """Come in through the signed Prolific link with this worker's own PROLIFIC_PID and
    address (10.x.y.z, sent in X-Forwarded-For with every request of the session)."""
    import requests

    session = requests.Session()
    session.headers["X-Forwarded-For"] = f"10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}"
    entry = session.get(
        f"{base}{link}?PROLIFIC_PID=bench-{k}&STUDY_ID=bench&SESSION_ID=s{k}",
        timeout=harness.REQUEST_TIMEOUT,
    )
    entry.raise_for_status()
    return {"session": session, "next": entry.url.rstrip("/") + "/next/"}


def answers_for(page: str, kind: str, review: bool, rng: random.Random) -> dict[str, str]:
    """Form fields for every caption group of the page: P and R 1-5, the penalties, a fixed
    fluency error now and then, and the review's confirmation box."""
    data: dict[str, str] = {}
    fixed: dict[str, list[str]] = {}
    for key, error in FIXED_FLUENCY.findall(page):
        fixed.setdefault(key, []).append(error)
    for key in dict.fromkeys(GROUP.findall(page)):
        data[f"{key}-precision"] = str(rng.randint(1, 5))
        data[f"{key}-recall"] = str(rng.randint(1, 5))
        data[f"{key}-conciseness"] = "0.5" if rng.random() < 0.1 else "0"
        data[f"{key}-inclusive"] = "0.5" if rng.random() < 0.05 else "0"
        if fixed.get(key) and rng.random() < 0.15:
            data[f"{key}-fluency"] = rng.choice(fixed[key])
        if review:
            data[f"{key}-confirm"] = "yes"
    return data


def fingerprint(kind: str, data: dict[str, str]) -> tuple:
    """What the integrity check compares: per group, P, R and the fluency error ticked."""
    keys = sorted({name.split("-", 1)[0] for name in data if name.endswith("-precision")})
    if kind == "fluency":  # P and R are not stored for a fluency round
        return tuple((key, None, None, data.get(f"{key}-fluency", "")) for key in keys)
    return tuple(
        (
            key,
            int(data[f"{key}-precision"]),
            int(data[f"{key}-recall"]),
            data.get(f"{key}-fluency", ""),
        )
        for key in keys
    )


def score_until_deadline(base: str, k: int, arrived: dict, deadline: float) -> dict:
    """GET the item page, POST its scores (2% twice), until the deadline or nothing left."""
    import requests

    pid = f"bench-{k}"
    rng = random.Random(k)
    session, next_url = arrived["session"], arrived["next"]
    run = {"sent": [], "post": [], "get": [], "errors": [], "doubles": 0}
    try:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
            run["get"].append(time.perf_counter() - began)
            baseline.record_queries(run, "get", page)
            form = FORM.search(page.text)
            if form is None:
                if page.status_code != 200:
                    run["errors"].append(f"{pid}: GET {page.status_code} {page.text[:100]!r}")
                run["told_nothing_left"] = True
                break
            action, kind, reviewed = form.groups()
            # Per stage as well: a review page reads the stage it reviews.
            baseline.record_queries(run, f"get {kind}", page)
            token = action.rstrip("/").rsplit("/", 1)[-1]
            answers = answers_for(page.text, kind, bool(reviewed), rng)
            data = {
                "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
                "part": PART.search(page.text).group(1),
                **answers,
            }
            began = time.perf_counter()
            answer = session.post(
                base + action, data=data, allow_redirects=False, timeout=harness.REQUEST_TIMEOUT
            )
            run["post"].append(time.perf_counter() - began)
            baseline.record_queries(run, "post", answer)
            baseline.record_queries(run, f"post {kind}", answer)
            if answer.status_code != 302:
                run["errors"].append(f"{pid}: POST {answer.status_code} {answer.text[:100]!r}")
                continue
            run["sent"].append((pid, token, kind, fingerprint(kind, answers)))
            if rng.random() < 0.02:  # a double click: the stored answer stands
                again = session.post(
                    base + action,
                    data={**data, **answers_for(page.text, kind, bool(reviewed), rng)},
                    allow_redirects=False,
                    timeout=harness.REQUEST_TIMEOUT,
                )
                run["doubles"] += 1
                if again.status_code != 302:
                    run["errors"].append(f"{pid}: double POST {again.status_code}")
    except requests.RequestException as exc:
        # A request that timed out may or may not be stored: the check reports it.
        run["errors"].append(f"{pid}: {type(exc).__name__}: {exc}")
    return run


def stored_fingerprint(kind: str, payload: dict) -> tuple:
    rows = []
    for key, scores in sorted(payload.get("captions", {}).items()):
        ticked = ",".join(sorted(scores.get("fluency_errors") or {}))
        if kind == "fluency":
            rows.append((key, None, None, ticked))
        else:
            rows.append((key, int(scores["precision"]), int(scores["recall"]), ticked))
    return tuple(rows)


def integrity_check(study, sent: list[tuple]) -> dict:
    from django.db.models import Count, Q

    from annotation.models import Assignment, Item, Judgment

    stored = [
        (pid, str(token), kind, stored_fingerprint(kind, payload))
        for pid, token, kind, payload in Judgment.objects.filter(study=study).values_list(
            "participant__external_id", "assignment__token", "item__kind", "payload"
        )
    ]
    stored_counts = Counter(stored)
    sent_counts = Counter((pid, str(token), kind, answer) for pid, token, kind, answer in sent)
    per_lease = Counter(token for _pid, token, _kind, _answer in stored)
    items = list(
        Item.objects.filter(study=study)
        .annotate(
            stored=Count("judgments", distinct=True),
            open_leases=Count(
                "assignments",
                filter=Q(assignments__status=Assignment.Status.OPEN),
                distinct=True,
            ),
        )
        .values_list(
            "kind",
            "image_id",
            "spec",
            "target",
            "judgment_count",
            "open_lease_count",
            "stored",
            "open_leases",
        )
    )
    # Per image and stage: who scored it and when (the judgment's id is its insert order).
    stages: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for image, kind, participant, judgment in Judgment.objects.filter(study=study).values_list(
        "item__image_id", "item__kind", "participant_id", "id"
    ):
        stages.setdefault(image, {}).setdefault(kind, []).append((participant, judgment))

    def who(image: int, kind: str) -> set[int]:
        return {participant for participant, _id in stages.get(image, {}).get(kind, [])}

    two_stages = sum(
        1
        for image in stages
        if who(image, "stage1") & who(image, "stage2")
        or who(image, "check") & (who(image, "stage1") | who(image, "stage2"))
    )
    review_first = sum(
        1
        for image, kinds in stages.items()
        for kind, reviewed in (("stage2", "stage1"), ("check", "stage2"))
        for _p, judgment in kinds.get(kind, [])
        if not any(earlier < judgment for _q, earlier in kinds.get(reviewed, []))
    )
    made = Counter((kind, image) for kind, image, *_rest in items)
    sampled = {
        image for kind, image, spec, *_rest in items if kind == "stage2" and spec.get("check_keys")
    }
    reviewed_images = [image for image in stages if who(image, "stage2")]
    check = {
        "sent": len(sent),
        "stored": len(stored),
        "judgments_by_kind": dict(Counter(kind for _pid, _token, kind, _a in stored)),
        "lost": sum((sent_counts - stored_counts).values()),
        "unexpected_or_misattributed": sum((stored_counts - sent_counts).values()),
        "leases_with_two_judgments": sum(1 for n in per_lease.values() if n > 1),
        "items_over_target": sum(1 for row in items if row[6] > row[3]),
        "items_with_wrong_judgment_count": sum(1 for row in items if row[4] != row[6]),
        "items_with_wrong_open_lease_count": sum(1 for row in items if row[5] != row[7]),
        "images_with_two_stages_by_one_worker": two_stages,
        "reviews_stored_before_their_stage": review_first,
        "reviewed_images_without_one_fluency_round": sum(
            1 for image in reviewed_images if made[("fluency", image)] != 1
        ),
        "sampled_reviewed_images_without_one_check": sum(
            1 for image in reviewed_images if image in sampled and made[("check", image)] != 1
        ),
        "check_items_of_unsampled_images": sum(
            n for (kind, image), n in made.items() if kind == "check" and image not in sampled
        ),
    }
    check["ok"] = not any(
        value for key, value in check.items() if key not in ("sent", "stored", "judgments_by_kind")
    )
    return check


if __name__ == "__main__":
    main()
