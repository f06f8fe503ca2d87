"""Benchmark: crowd workers marking error spans in captions through gunicorn and PostgreSQL.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about a minute:

    .venv/bin/python bench/spans_load.py [--workers 20] [--images 500] [--seconds 20] \
        [--gunicorn-workers 2] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_spans_load] [--minimal-seconds 10] [--count-seconds 5] \
        [--count-workers 4]

Follows ``bench/humanr_load.py`` (issue 48: the error-span mode had no load bench, so no
ratio):

1. (Re)creates the scratch database and migrates it (``manage.py migrate``).
2. Builds a live error-span study with the mode's defaults (3 annotators per caption, at
   most 5 marks, the default categories, no suggestions) but ``min_seconds=0`` (the
   minimum time would measure sleeping) and the per-address crowd limits lifted (every
   simulated worker comes from 127.0.0.1): ``--images`` images (rows without files), each
   with a caption of each of four systems, one item per caption. One system's captions
   hold an emoji, one code point in Python and two UTF-16 units in JavaScript, so an
   offset counted the wrong way would show.
3. Starts gunicorn (``--gunicorn-workers`` sync workers) on a free loopback port. Each
   simulated worker (a thread with its own ``requests.Session``) arrives through the
   signed Prolific link with its own PROLIFIC_PID, then loops until ``--seconds`` pass (at
   most 60) or nothing is left: GET the caption page, read the form (action, the caption's
   text, its words' code-point offsets, the categories), POST a set of marks as the page's
   script posts them (``spans``: a JSON list of start, end, text, severity, category,
   note; none to three words or two-word runs, no overlap), now and then an omission
   (the page's "something left out" fields) or the whole caption unusable, and a score
   0-100; about 2% of answers are posted twice, as a double click would. The POST
   redirects to the next caption, which the loop GETs.
4. Stops gunicorn and checks the stored judgments against what the simulators sent: the
   set of (worker, lease token, score, marks, omissions, unusable) must be equal, no lease
   holds two judgments, no worker marked a caption twice, no item is over its target,
   each item's ``judgment_count`` and ``open_lease_count`` equal its stored judgments and
   open leases, each worker's caption count (``state["captions"]``, the completion code's
   counter) equals their stored judgments, and every stored mark's text is the caption's
   text between its offsets.

The ratio (issue 48, ``_baseline.py``): as many clients GET ``/ping`` on the same gunicorn
for ``--minimal-seconds`` before and after the run; the run's gunicorn CPU per request (GET
caption page, POST, double POSTs) is reported as a multiple of it. Then ``--count-workers``
of the workers go on for ``--count-seconds`` through a counting gunicorn
(``_count_wsgi.py``): queries per request kind; their answers are checked with the run's.
``bench/arena_load.py`` runs this script beside the arena (``--no-spans`` leaves it out),
and through it, old code against new (``--old-tree``).

Writes JSON to ``bench/results/`` (git-ignored). Exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import html
import json
import random
import re
import sys
import time
from collections import Counter

import _baseline as baseline
import _harness as harness

FORM = re.compile(r'<form method="post" action="([^"]+)" class="spans-form"')
PART = re.compile(r'name="part" value="(\d+)"')
CAPTION = re.compile(r'id="spans-caption" class="spans-caption" data-text="([^"]*)"')
WORD = re.compile(r'<span class="w" data-start="(\d+)" data-end="(\d+)">')
CATEGORIES = re.compile(r'<select id="mark-category" name="mark-category">(.*?)</select>', re.S)
OPTION = re.compile(r'<option value="([^"]*)"')
SYSTEMS = ("alpha", "beta", "gamma", "delta")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_spans_load")
    parser.add_argument("--minimal-seconds", type=float, default=10)
    parser.add_argument("--count-seconds", type=float, default=5)
    parser.add_argument("--count-workers", type=int, default=4)
    parser.add_argument("--result-file", help="write the JSON result here")
    args = parser.parse_args()
    if not (1 <= args.workers <= 200 and 10 <= args.images <= 20_000):
        parser.error("--workers 1..200, --images 10..20,000")
    seconds = harness.bounded_seconds(args.seconds)
    env = harness.prepare_database(args.server, args.database)
    study, link = build_study(args.images)
    minimal = []
    kept: dict[int, dict] = {}
    with harness.gunicorn(env, workers=args.gunicorn_workers) as server:
        minimal.append(baseline.minimal_run(server, args.workers, args.minimal_seconds))
        print(
            f"spans: gunicorn ({args.gunicorn_workers} workers) on {server.base}; "
            f"{args.workers} crowd workers, {args.images * len(SYSTEMS)} captions, "
            f"{seconds:.0f} s",
            flush=True,
        )
        crowd = harness.run_crowd(
            args.workers,
            arrive=lambda k: kept.setdefault(k, arrive(server.base, link, k)),
            play=lambda k, arrived, deadline: mark_until_deadline(
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
        play=mark_until_deadline,
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
        "captions": args.images * len(SYSTEMS),
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
        "marks_sent": sum(len(answer[3]) for run in crowd.results for answer in run["sent"]),
        "double_posts": sum(run["doubles"] for run in crowd.results),
        "workers_told_nothing_left": sum(
            bool(run.get("told_nothing_left")) for run in crowd.results
        ),
        "answer_post_ms": harness.summary([t for run in crowd.results for t in run["post"]]),
        "caption_page_get_ms": harness.summary([t for run in crowd.results for t in run["get"]]),
        "errors": errors[:20],
        "error_count": len(errors),
        "integrity": check,
    }
    harness.write_result("spans_load", result, args.result_file)
    if not check["ok"] or errors:
        sys.exit(1)


def caption_text(system: str, i: int) -> str:
    """A caption of 12-16 words; alpha's hold an emoji (see the docstring)."""
    dog = "A brown dog 🐕" if system == "alpha" else f"A {system} dog"
    return f"{dog} sits on a red sofa next to {2 + i % 3} cats near window {i} of the house."


def build_study(images: int):
    from annotation.models import Caption, Image, User
    from annotation.modes.importing import fileless_image
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner = User.objects.create_user("bench", password="bench", is_researcher=True)
    study = study_create(
        owner=owner,
        name="Error spans benchmark",
        mode="spans",
        seed=7,
        settings={
            "min_seconds": 0,
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
        for k, system in enumerate(SYSTEMS):
            text = caption_text(system, i)
            captions.append(
                Caption(
                    study=study,
                    image=image,
                    system=system,
                    raw_text=text,
                    text=text,
                    line=i * 10 + k + 2,
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


def answer_for(page: str, rng: random.Random) -> tuple[dict[str, str], tuple]:
    """The form fields of one answer, and what the integrity check compares of it."""
    text = html.unescape(CAPTION.search(page).group(1))
    words = [(int(start), int(end)) for start, end in WORD.findall(page)]
    categories = [
        html.unescape(value) for value in OPTION.findall(CATEGORIES.search(page).group(1))
    ]
    score = rng.randint(0, 100)
    fields = {"score": str(score)}
    if rng.random() < 0.05:  # the whole caption unusable: no other marks
        fields["unusable"] = "on"
        fields["spans"] = "[]"
        return fields, (float(score), (), 0, True)
    chosen = sorted(rng.sample(range(len(words)), rng.choice((0, 0, 1, 1, 2, 3))))
    marks = []
    for index in chosen:
        start, end = words[index]
        # Now and then a run of two words, into a word no other mark takes.
        if index + 1 < len(words) and index + 1 not in chosen and rng.random() < 0.3:
            end = words[index + 1][1]
        marks.append(
            {
                "start": start,
                "end": end,
                "text": text[start:end],
                "severity": rng.choice(("minor", "major")),
                "category": rng.choice(categories),
                "note": "",
            }
        )
    fields["spans"] = json.dumps(marks)
    omissions = 0
    if rng.random() < 0.1:
        omissions = 1
        fields["omission-note"] = "the second dog is not mentioned"
        fields["omission-severity"] = rng.choice(("minor", "major"))
        fields["omission-category"] = rng.choice(categories)
    shown = tuple((m["start"], m["end"], m["severity"], m["category"]) for m in marks)
    return fields, (float(score), shown, omissions, False)


def mark_until_deadline(base: str, k: int, arrived: dict, deadline: float) -> dict:
    """GET the caption page, POST marks and a score (2% twice), until the deadline or
    nothing left."""
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
            action = form.group(1)
            token = action.rstrip("/").rsplit("/", 1)[-1]
            fields, answer = answer_for(page.text, rng)
            data = {
                "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
                "part": PART.search(page.text).group(1),
                **fields,
            }
            began = time.perf_counter()
            reply = session.post(
                base + action, data=data, allow_redirects=False, timeout=harness.REQUEST_TIMEOUT
            )
            run["post"].append(time.perf_counter() - began)
            baseline.record_queries(run, "post", reply)
            if reply.status_code != 302:
                run["errors"].append(f"{pid}: POST {reply.status_code} {reply.text[:100]!r}")
                continue
            run["sent"].append((pid, token, *answer))
            if rng.random() < 0.02:  # a double click: the stored answer stands
                again = session.post(
                    base + action,
                    data={**data, **answer_for(page.text, rng)[0]},
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


def integrity_check(study, sent: list[tuple]) -> dict:
    from django.db.models import Count, Q

    from annotation.models import Assignment, Caption, Item, Judgment, Participant

    texts = dict(Caption.objects.filter(study=study).values_list("pk", "text"))
    rows = list(
        Judgment.objects.filter(study=study).values_list(
            "participant__external_id",
            "assignment__token",
            "payload",
            "participant_id",
            "item_id",
            "item__spec",
        )
    )
    stored = []
    wrong_text = 0
    for pid, token, payload, _participant, _item, spec in rows:
        text = texts[spec["caption"]]
        marks = [m for m in payload["spans"] if not m.get("omission")]
        wrong_text += sum(1 for m in marks if m["text"] != text[m["start"] : m["end"]])
        stored.append(
            (
                pid,
                str(token),
                float(payload["score"]),
                tuple((m["start"], m["end"], m["severity"], m["category"]) for m in marks),
                sum(1 for m in payload["spans"] if m.get("omission")),
                bool(payload.get("unusable")),
            )
        )
    stored_counts = Counter(stored)
    sent_counts = Counter((pid, str(token), *rest) for pid, token, *rest in sent)
    per_lease = Counter(token for _pid, token, *_rest in stored)
    pairs = Counter((participant, item) for _p, _t, _pl, participant, item, _s in rows)
    per_worker = Counter(participant for _p, _t, _pl, participant, _i, _s in rows)
    states = Participant.objects.filter(study=study).values_list("pk", "state")
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
        .values_list("target", "judgment_count", "open_lease_count", "stored", "open_leases")
    )
    check = {
        "sent": len(sent),
        "stored": len(stored),
        "lost": sum((sent_counts - stored_counts).values()),
        "unexpected_or_misattributed": sum((stored_counts - sent_counts).values()),
        "leases_with_two_judgments": sum(1 for n in per_lease.values() if n > 1),
        "captions_marked_twice_by_a_worker": sum(1 for n in pairs.values() if n > 1),
        "items_over_target": sum(1 for target, _c, _o, real, _l in items if real > target),
        "items_with_wrong_judgment_count": sum(
            1 for _t, count, _o, real, _l in items if count != real
        ),
        "items_with_wrong_open_lease_count": sum(
            1 for _t, _c, leases, _r, real in items if leases != real
        ),
        "workers_with_wrong_caption_count": sum(
            1 for pk, state in states if (state or {}).get("captions", 0) != per_worker[pk]
        ),
        "marks_not_the_captions_text": wrong_text,
    }
    check["ok"] = not any(value for key, value in check.items() if key not in ("sent", "stored"))
    return check


if __name__ == "__main__":
    main()
