"""Benchmark: 100 VICR players on 2,000 game pairs through gunicorn and PostgreSQL.

Not a test. Needs a local PostgreSQL server (loopback, trust auth); takes about a minute:

    .venv/bin/python bench/vicr_game.py [--players 100] [--pairs 2000] [--seconds 45] \
        [--workers 3] [--server postgres://postgres@127.0.0.1:5432] \
        [--database capeval_bench_vicr]

1. (Re)creates the scratch database and migrates it (``manage.py migrate``).
2. Builds a live VICR study: 10 tutorial, 40 probation (the 20-pair block of each of the 2
   attempts, drawn per player without repeats) and ``--pairs`` game pairs (image rows without
   files; two primed ratings per game pair), settings ``seconds_before_submit=0`` (benchmark
   only: the 3-second wait would measure sleeping) and per-address crowd limits far above
   the crowd (every player arrives from the same loopback address).
   The players skip the tutorial: their participants are created in the database already
   in the game phase (as ``after_submit`` leaves a player who passed the tutorial), under
   the Prolific ids they then arrive with.
3. Starts gunicorn (``--workers`` sync workers) on a free loopback port and lets each
   player (a thread with its own ``requests.Session``) arrive through the signed crowd
   link, then loop: GET the next pair, parse the form, POST a rating (a noisy view of a
   hidden per-pair quality) and read the feedback page, until ``--seconds`` pass (at most
   60) or nothing is left.
4. Stops gunicorn and replays every game pair's ratings in commit order (Judgment id)
   through ``rubrics.vicr`` (priming rule + Algorithm 1): each stored pool size, consensus
   and points must equal the replay's. Also checks that no pair exceeds ``max_ratings``
   and that no player rated a pair twice, in the game or in probation (players who fail the
   first-game check go back to probation, and a retry must bring no pair they have seen).

Prints ratings/s, latency percentiles of submit+feedback (the POST and the GET of the
feedback page it redirects to) and of the next-pair GET, the CPU the clients, gunicorn and
the machine used, and the replay check, and writes JSON to ``bench/results/``
(git-ignored). The database, gunicorn and the bounded crowd of threads come from
``bench/_harness.py``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter, defaultdict

import _harness as harness

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
CAPTION_NUMBER = re.compile(r"“caption (\d+)”")
# The smallest pools the default settings open with: a 10-pair tutorial, and 20 probation
# pairs for each of the 2 attempts.
TUTORIAL_POOL, PROBATION_POOL = 10, 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--server", default=harness.DEFAULT_SERVER)
    parser.add_argument("--database", default="capeval_bench_vicr")
    args = parser.parse_args()
    seconds = harness.bounded_seconds(args.seconds)
    env = harness.prepare_database(args.server, args.database)
    study, link = build_study(args.players, args.pairs)
    qualities = caption_qualities()
    with harness.gunicorn(env, workers=args.workers) as server:
        print(
            f"gunicorn ({args.workers} workers) on {server.base}; {args.players} players, "
            f"{args.pairs} pairs, {seconds:.0f} s",
            flush=True,
        )
        crowd = harness.run_crowd(
            args.players,
            arrive=lambda k: arrive(server.base, link, k),
            play=lambda k, arrived, deadline: play(server.base, qualities, k, arrived, deadline),
            seconds=seconds,
            server=server,
        )
    check = replay_check(study)
    latencies = [took for played in crowd.results for took in played["latencies"]]
    errors = crowd.errors + [error for played in crowd.results for error in played["errors"]]
    result = {
        "when": harness.now_iso(),
        "players": args.players,
        "pairs": args.pairs,
        "workers": args.workers,
        "seconds": round(crowd.elapsed, 2),
        "load_average_at_start": crowd.load_at_start,
        "load_average_at_end": crowd.load_at_end,
        "cpu": crowd.cpu,
        "cpu_ms_per_request": harness.cpu_per_request(
            crowd.cpu, sum(len(p["latencies"]) + len(p["next_latencies"]) for p in crowd.results)
        ),
        "ratings": len(latencies),
        "ratings_per_second": round(len(latencies) / crowd.elapsed, 1),
        "submit_feedback_ms": harness.summary(latencies),
        "next_page_ms": harness.summary(
            [took for played in crowd.results for took in played["next_latencies"]]
        ),
        "errors": errors[:20],
        "error_count": len(errors),
        "replay": check,
    }
    harness.write_result("vicr_game", result)
    if not check["ok"] or errors:
        sys.exit(1)


def build_study(
    players: int,
    pairs: int,
    *,
    name: str = "VICR benchmark",
    settings: dict | None = None,
    game_ratings: int = 0,
):
    """A live VICR study with ``players`` Prolific participants already in the game phase.

    ``game_ratings`` is how many game ratings they already made: from ``first_game_ratings``
    (20) on, the first-game check is behind them and they stay in the game whatever they
    score. Returns the study and the path of its crowd link.
    """
    from annotation.models import Caption, Image, Participant, User
    from annotation.modes.importing import fileless_image
    from annotation.services.participants import crowd_link_token
    from annotation.services.studies import study_create, study_open

    owner, _ = User.objects.get_or_create(username="bench", defaults={"is_researcher": True})
    study = study_create(
        owner=owner,
        name=name,
        mode="vicr",
        seed=7,
        settings={
            "seconds_before_submit": 0,
            # the bench's pools are one draw (10, 2 x 20), below the crowd default of 3
            "gate_pool_multiple": 1,
            "crowd_arrivals_per_address_per_hour": 100_000,
            "crowd_open_leases_per_address": 100_000,
            **(settings or {}),
        },
    )
    rng = random.Random(7)
    tutorial, probation = TUTORIAL_POOL, PROBATION_POOL
    total = tutorial + probation + pairs
    images = Image.objects.bulk_create(
        fileless_image(study=study, name=f"img-{i}.jpg", alt_text=f"Benchmark image {i}")
        for i in range(total)
    )
    captions = []
    for i, image in enumerate(images):
        purpose = (
            "tutorial" if i < tutorial else "probation" if i < tutorial + probation else "study"
        )
        quality = rng.randint(1, 5)
        captions.append(
            Caption(
                study=study,
                image=image,
                system="Bench",
                raw_text=f"caption {i}",
                text=f"caption {i}",
                purpose=purpose,
                line=i + 2,
                spec={"truth": quality, "explanation": "Benchmark."}
                if purpose != "study"
                else {
                    "prime_ratings": [
                        min(5, max(1, quality + rng.choice((-1, 0, 0, 1)))) for _ in range(2)
                    ]
                },
                metrics={"quality": quality},
            )
        )
    Caption.objects.bulk_create(captions, batch_size=1000)
    study_open(study=study)
    Participant.objects.bulk_create(
        Participant(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=f"bench-{k}",
            status="game",
            state={
                "player": {
                    "probation_attempts": 0,
                    "score": 2 * game_ratings,
                    "game_ratings": game_ratings,
                },
                "tutorial_score": 20,
                "block": [],
            },
        )
        for k in range(players)
    )
    return study, f"/p/{crowd_link_token(study)}/"


def arrive(base: str, link: str, k: int) -> dict:
    """Come in through the crowd link and load a first pair (warms the workers; untimed)."""
    import requests

    session = requests.Session()
    response = session.get(f"{base}{link}?PROLIFIC_PID=bench-{k}", timeout=harness.REQUEST_TIMEOUT)
    study_next = response.url.rstrip("/") + "/next/"
    page = session.get(study_next, timeout=60)
    return {"session": session, "next": study_next, "page": page}


def play(base: str, qualities: dict[int, int], k: int, arrived: dict, deadline: float) -> dict:
    """Rate pairs until the deadline: POST a noisy rating, read the feedback, GET the next."""
    rng = random.Random(k)
    session, study_next, page = arrived["session"], arrived["next"], arrived["page"]
    latencies: list[float] = []
    next_latencies: list[float] = []
    errors: list[str] = []
    while time.monotonic() < deadline:
        action = FORM_ACTION.search(page.text)
        if action is None:
            if "Thank you" not in page.text:
                errors.append(f"player {k}: no pair form: {page.status_code} {page.text[:300]!r}")
            break  # nothing left for this player
        token = CSRF_INPUT.search(page.text).group(1)
        caption = CAPTION_NUMBER.search(page.text)
        quality = qualities.get(int(caption.group(1)), 3) if caption else 3
        rating = min(5, max(1, quality + rng.choice((-1, 0, 0, 0, 1))))
        sent = time.perf_counter()
        answer = session.post(
            base + action.group(1),
            data={"csrfmiddlewaretoken": token, "rating": str(rating), "part": "0"},
            headers={"Referer": page.url},
            timeout=harness.REQUEST_TIMEOUT,
        )
        took = time.perf_counter() - sent
        if answer.status_code != 200 or 'id="vicr-next"' not in answer.text:
            errors.append(f"player {k}: {answer.status_code} {answer.text[:120]!r}")
        else:
            latencies.append(took)
        sent = time.perf_counter()
        page = session.get(study_next, timeout=harness.REQUEST_TIMEOUT)
        next_latencies.append(time.perf_counter() - sent)
    return {"latencies": latencies, "next_latencies": next_latencies, "errors": errors}


def caption_qualities() -> dict[int, int]:
    from annotation.models import Caption

    return {
        int(text.split()[-1]): metrics["quality"]
        for text, metrics in Caption.objects.filter(purpose="study").values_list("text", "metrics")
    }


def replay_check(study) -> dict:
    """Replay each pair's ratings in commit (id) order through rubrics.vicr."""
    from annotation.models import Caption, Item, Judgment
    from rubrics import vicr as rules

    primes = {
        pk: spec.get("prime_ratings", [])
        for pk, spec in Caption.objects.filter(study=study).values_list("id", "spec")
    }
    caption_of = {
        pk: spec["caption_id"]
        for pk, spec in Item.objects.filter(study=study, kind="game").values_list("id", "spec")
    }
    rows = (
        Judgment.objects.filter(study=study, item__kind="game")
        .order_by("id")
        .values_list("item_id", "participant_id", "payload", "result")
    )
    humans: dict[int, list[int]] = defaultdict(list)
    mismatches = []
    # No (player, pair) twice in any phase: the game by the assignment rules, probation by
    # the per-player draws (a retry brings only pairs the player has not seen).
    pairs_rated = Judgment.objects.filter(study=study).values_list("participant_id", "item_id")
    repeats = sum(n - 1 for n in Counter(pairs_rated).values() if n > 1)
    for item_id, _participant_id, payload, result in rows:
        pool = rules.consensus_pool(humans[item_id], primes[caption_of[item_id]])
        scored = rules.score_rating(payload["rating"], pool)
        expected = (len(pool), scored.consensus, scored.points)
        got = (result["pool_size"], result["consensus"], result["points"])
        if expected != got:
            mismatches.append({"item": item_id, "expected": expected, "stored": got})
        humans[item_id].append(payload["rating"])
    max_ratings = study.settings["max_ratings"]
    over = sum(1 for ratings in humans.values() if len(ratings) > max_ratings)
    per_pair = [len(humans.get(pk, [])) for pk in caption_of]
    return {
        "ok": not mismatches and not repeats and not over,
        "ratings_replayed": sum(per_pair),
        "mismatches": len(mismatches),
        "first_mismatches": mismatches[:5],
        "repeated_pairs": repeats,
        "probation_ratings": Judgment.objects.filter(study=study, item__kind="probation").count(),
        "pairs_over_max": over,
        "pairs_with_3_or_more": sum(1 for n in per_pair if n >= 3),
        "most_ratings_on_a_pair": max(per_pair, default=0),
    }


if __name__ == "__main__":
    main()
