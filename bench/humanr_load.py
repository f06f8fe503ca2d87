"""Benchmark: 200 simulated HUMANr crowd workers answering groups through gunicorn and PostgreSQL.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about a minute:

    .venv/bin/python bench/humanr_load.py [--workers 200] [--images 1500] [--seconds 45] \
        [--gunicorn-workers 4] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_humanr] [--minimal-seconds 10] [--count-seconds 5] \
        [--count-workers 4]

1. (Re)creates the scratch database and migrates it (``manage.py migrate``).
2. Builds a live HUMANr study: ``--images`` images (rows without files), each with three
   human captions and one caption of each of two model systems, so 3 comparisons per
   image in groups of 9 + 1 attention check, 3 workers per group;
   ``min_seconds_per_trial=0`` (benchmark only: the minimum time would measure sleeping);
   the per-address crowd limits lifted (every simulated worker comes from 127.0.0.1). A
   worker may only get groups sharing no image with their earlier ones: about one group per
   25 images, so some 60 here, far more than one worker does in a run.
3. Starts gunicorn (``--gunicorn-workers`` sync workers) on a free loopback port. Each
   simulated worker (a thread with its own ``requests.Session``) arrives through the signed
   Prolific link with its own PROLIFIC_PID, then loops until ``--seconds`` pass (at most
   60) or nothing is left: GET the trial page, read the form (action, part, left caption)
   and the CSRF token from the cookie, POST an answer 1-9 (about 2% of answers are posted
   twice, as a double click would). After the 10th trial it follows the redirect to the
   end-of-group page (the completion code, or why there is none, must be on it) and starts
   another group.
4. Stops gunicorn and checks the stored judgments against what the simulators sent: the
   set of (worker, lease token, part, raw) must be equal (no lost, duplicated or
   misattributed response), no two judgments share (lease, part), every finished group has
   10 judgments, all of them flagged excluded exactly when its attention check failed (the
   answers are uniform random, so about 5 in 9 checks fail), no group is served beyond its
   target, no worker saw a comparison twice, and no worker met an image twice (shown, or
   through a caption of it, in a comparison or an attention check: the exposure rule).

The ratio (issue 48, ``_baseline.py``): as many clients GET ``/ping`` (through the full
middleware, no work) on the same gunicorn for ``--minimal-seconds`` before and after the
run; the run's gunicorn CPU per request is reported as a multiple of it. Then
``--count-workers`` of the workers go on for ``--count-seconds`` through a counting gunicorn
(``_count_wsgi.py``): queries per request kind; their answers are checked with the run's.

Prints responses/s, latency percentiles of the answer POST and of the trial page GET and the
CPU the clients, gunicorn and the machine used, and writes JSON to ``bench/results/``
(git-ignored). Exits 1 if a check fails. The database, gunicorn and the bounded crowd of
threads come from ``bench/_harness.py``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter
from urllib.parse import urljoin

import _baseline as baseline
import _harness as harness

FORM = re.compile(r'<form method="post" action="([^"]+)" class="hr-form"')
PART = re.compile(r'name="part" value="(\d+)"')
LEFT = re.compile(r'name="left" value="(\d+)"')
#: The page's ``shown`` field (issue 48), sent back as a browser sends every hidden field;
#: older code has none.
SHOWN = re.compile(r'name="shown" value="([0-9a-f]+)"')
SYSTEMS = ("GIT", "ClipCap")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--images", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_humanr")
    parser.add_argument("--minimal-seconds", type=float, default=10)
    parser.add_argument("--count-seconds", type=float, default=5)
    parser.add_argument("--count-workers", type=int, default=4)
    parser.add_argument("--result-file", help="write the JSON result here")
    args = parser.parse_args()
    seconds = harness.bounded_seconds(args.seconds)
    env = harness.prepare_database(args.server, args.database)
    study, link = build_study(args.images)
    groups = study.items.count()
    minimal = []
    kept: dict[int, dict] = {}
    with harness.gunicorn(env, workers=args.gunicorn_workers) as server:
        minimal.append(baseline.minimal_run(server, args.workers, args.minimal_seconds))
        print(
            f"gunicorn ({args.gunicorn_workers} workers) on {server.base}; {args.workers} crowd "
            f"workers, {groups} groups, {seconds:.0f} s",
            flush=True,
        )
        crowd = harness.run_crowd(
            args.workers,
            arrive=lambda k: kept.setdefault(k, arrive(server.base, link, k)),
            play=lambda k, arrived, deadline: answer_until_deadline(
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
        play=answer_until_deadline,
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
        sum(
            len(run["get"]) + len(run["post"]) + run["doubles"] + run["ends"]
            for run in crowd.results
        ),
    )
    result = {
        "when": harness.now_iso(),
        "crowd_workers": args.workers,
        "images": args.images,
        "groups": groups,
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
        "responses": timed,
        "responses_per_second": round(timed / crowd.elapsed, 1),
        "groups_finished": sum(run["finished"] for run in crowd.results),
        "double_posts": sum(run["doubles"] for run in crowd.results),
        "answer_post_ms": harness.summary([t for run in crowd.results for t in run["post"]]),
        "trial_page_get_ms": harness.summary([t for run in crowd.results for t in run["get"]]),
        "errors": errors[:20],
        "error_count": len(errors),
        "integrity": check,
    }
    harness.write_result("humanr_load", result, args.result_file)
    if not check["ok"] or errors:
        sys.exit(1)


def build_study(images: int):
    from annotation.models import Caption, Image, User
    from annotation.modes.importing import fileless_image
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="HUMANr benchmark",
        mode="humanr",
        seed=7,
        settings={
            "min_seconds_per_trial": 0,
            "workers_per_comparison": 3,
            # Every simulated worker arrives from 127.0.0.1: lift the per-address crowd
            # limits, which would otherwise turn all but the first few away.
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


def arrive(base: str, link: str, k: int) -> dict:
    """Come in through the signed Prolific link with this worker's own PROLIFIC_PID."""
    import requests

    session = requests.Session()
    entry = session.get(
        f"{base}{link}?PROLIFIC_PID=bench-{k}&STUDY_ID=bench&SESSION_ID=s{k}",
        timeout=harness.REQUEST_TIMEOUT,
    )
    entry.raise_for_status()
    return {"session": session, "next": entry.url.rstrip("/") + "/next/"}


def answer_until_deadline(base: str, k: int, arrived: dict, deadline: float) -> dict:
    """GET the trial page, POST an answer 1-9 (2% twice), until the deadline or nothing left."""
    import requests

    pid = f"bench-{k}"
    rng = random.Random(k)
    session, next_url = arrived["session"], arrived["next"]
    run = {"sent": [], "post": [], "get": [], "errors": [], "finished": 0, "doubles": 0, "ends": 0}
    try:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            page = session.get(next_url, timeout=harness.REQUEST_TIMEOUT)
            run["get"].append(time.perf_counter() - began)
            baseline.record_queries(run, "get", page)
            form = FORM.search(page.text)
            if form is None:
                if page.status_code != 200:
                    run["errors"].append(f"{pid}: GET {page.status_code}")
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
            shown = SHOWN.search(page.text)
            if shown:
                data["shown"] = shown.group(1)
            began = time.perf_counter()
            answer = session.post(
                base + action, data=data, allow_redirects=False, timeout=harness.REQUEST_TIMEOUT
            )
            run["post"].append(time.perf_counter() - began)
            baseline.record_queries(run, "post", answer)
            if rng.random() < 0.02:  # a double click: the stored answer comes back
                again = session.post(
                    base + action,
                    data={**data, "raw": str(10 - raw)},
                    allow_redirects=False,
                    timeout=harness.REQUEST_TIMEOUT,
                )
                run["doubles"] += 1
                if again.status_code not in (200, 302):
                    run["errors"].append(f"{pid}: double POST {again.status_code}")
            where = answer.headers.get("Location", "")
            if answer.status_code == 302 and "/feedback/" in where:
                # The group's end is a page of its own after the redirect (issue 42).
                run["sent"].append((pid, token, part, raw))
                end = session.get(urljoin(answer.url, where), timeout=harness.REQUEST_TIMEOUT)
                run["ends"] += 1
                baseline.record_queries(run, "end_of_group", end)
                if end.status_code == 200 and "Group complete" in end.text:
                    run["finished"] += 1
                    # Random answers fail most attention checks, and a group whose check
                    # failed earns no code since issue 45: the page then says why.
                    told = ('id="completion-code"', 'id="checks-failed"', 'id="held-for-review"')
                    if not any(mark in end.text for mark in told):
                        run["errors"].append(f"{pid}: end of group without a completion code")
                else:
                    run["errors"].append(f"{pid}: end page {end.status_code} {end.text[:100]!r}")
            elif answer.status_code == 302:
                run["sent"].append((pid, token, part, raw))
            else:
                run["errors"].append(f"{pid}: POST {answer.status_code} {answer.text[:100]!r}")
    except requests.RequestException as exc:
        # A request that timed out may or may not be stored: the check reports it.
        run["errors"].append(f"{pid}: {type(exc).__name__}: {exc}")
    return run


def integrity_check(study, sent: list[tuple[str, str, int, int]]) -> dict:
    from annotation.models import Assignment, Caption, Item, Judgment

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
    # Exposure: the images each worker met per lease (the trial's image and the images of the
    # two captions shown); no image may belong to two leases of one worker.
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    met: dict[tuple[int, int], set[str]] = {}
    for _pid, token, _part, _raw, participant, result in stored:
        images = {result["image_id"]}
        images.update(
            caption_images[result[key]] for key in ("left_caption_id", "right_caption_id")
        )
        for image in images:
            met.setdefault((participant, image), set()).add(token)
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
        "images_met_in_two_groups_by_a_worker": sum(1 for t in met.values() if len(t) > 1),
        # Informative: how far the exposure rule is from limiting this run.
        "most_groups_of_one_worker": max(
            Counter(
                Assignment.objects.filter(item__study=study).values_list(
                    "participant_id", flat=True
                )
            ).values(),
            default=0,
        ),
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
            "images_met_in_two_groups_by_a_worker",
        )
    ) and len(stored) == len(sent)
    return check


if __name__ == "__main__":
    main()
