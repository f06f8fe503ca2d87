"""VICR adaptive stopping at the mode's defaults, on the platform's code path (issue 27).

Run by ``bench/adaptive.py --part vicr`` (which sets Django up on a scratch SQLite file).

Per seed, two live VICR studies of ``--pairs`` game pairs each (default ``PAIRS``), built
by ``study_create`` and ``study_open``: the mode's default settings (``min_ratings`` 3,
``max_ratings`` 7, ``adaptive_risk`` 0.05), one with ``adaptive_stopping`` on (the adaptive
design) and one with it off (the fixed design: every pair takes ``max_ratings``).
Bench-only settings: ``gate_pool_multiple`` 1 (the bench's gate pools are one draw, as
``bench/vicr_game.py``) and per-address crowd limits above the crowd (all players share one
machine). ``PLAYERS`` players start in the game phase past the first-game check (the gates
are not what is measured). Each round, every player takes a lease with ``assignment_next``
and answers it with ``judgment_submit`` (the calls the views make) 5 s (server clock) after
it was served; the stopping rule acts as wired: ``after_submit`` ->
``stopping.adaptive_stop`` with the study's own rater model once it has 30 pairs, the
stated one before.

The simulated crowd: a rater model (``rubrics.adaptive.fit_rater_model``, two classes per
level) fitted to the 249-pair VICR sample (``../shared/datasets/vicr-sample``); per seed,
every pair's 2 primed ratings and its 7 player ratings are drawn from it once
(``RaterModel.simulate``), and the k-th rating a pair receives is its k-th drawn rating in
BOTH designs: the same answers. Compared per seed: game ratings stored (adaptive against
fixed), and the share of pairs whose consensus (``rubrics.vicr.consensus`` of the priming
pool of the stored ratings, as the game scores it) is the same in both designs.
"""

from __future__ import annotations

import csv
import json
import statistics
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
#: Game pairs per study unless ``--pairs`` says otherwise. The study fits its own rater
#: model once 30 pairs have 3 ratings: below about that, it stops on the stated one.
PAIRS = 40
PLAYERS = 12
TUTORIAL_POOL, PROBATION_POOL = 10, 40
SECONDS_PER_RATING = 5


def _panel_saving(mode, study):
    """What the dashboard's VICR panel shows as saved (None: adaptive stopping is off)."""
    panel = mode.dashboard.panel(study)
    return None if panel is None else panel.context["saving"]


def vicr_sample() -> list[list[int]]:
    path = DATASETS / "vicr-sample" / "VICR_Sample250.csv"
    columns = ["ratings"] + [f"rating_{i}" for i in range(2, 8)]
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return [[int(row[c]) for c in columns if row[c].strip()] for row in csv.DictReader(handle)]


def build_study(owner, *, seed: int, adaptive: bool, primes: np.ndarray):
    from annotation.models import Caption, Image, Participant
    from annotation.modes.importing import fileless_image
    from annotation.services.studies import study_create, study_open

    study = study_create(
        owner=owner,
        name=f"bench vicr {seed} {'adaptive' if adaptive else 'fixed'}",
        mode="vicr",
        seed=seed,
        settings={
            "adaptive_stopping": adaptive,
            "gate_pool_multiple": 1,
            "crowd_arrivals_per_address_per_hour": 100_000,
            "crowd_open_leases_per_address": 100_000,
        },
    )
    total = TUTORIAL_POOL + PROBATION_POOL + len(primes)
    images = Image.objects.bulk_create(
        fileless_image(study=study, name=f"img-{seed}-{i}.jpg", alt_text=f"Bench image {i}")
        for i in range(total)
    )
    captions = []
    for i, image in enumerate(images):
        gate = i < TUTORIAL_POOL + PROBATION_POOL
        purpose = "tutorial" if i < TUTORIAL_POOL else "probation" if gate else "study"
        pair = i - TUTORIAL_POOL - PROBATION_POOL
        captions.append(
            Caption(
                study=study,
                image=image,
                system="Bench",
                raw_text=f"caption {i}",
                text=f"caption {i}",
                purpose=purpose,
                line=i + 2,
                spec=(
                    {"truth": 3, "explanation": "Benchmark."}
                    if gate
                    else {"prime_ratings": [int(r) for r in primes[pair]]}
                ),
                metrics={"pair": pair},
            )
        )
    Caption.objects.bulk_create(captions)
    study_open(study=study)
    Participant.objects.bulk_create(
        Participant(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=f"bench-{seed}-{k}",
            status="game",
            state={
                "player": {"probation_attempts": 0, "score": 40, "game_ratings": 20},
                "tutorial_score": 20,
                "block": [],
            },
        )
        for k in range(PLAYERS)
    )
    study.refresh_from_db()
    return study


def play(study, ratings: np.ndarray) -> dict:
    """Every player rates in turn until nothing is served; the k-th rating a pair gets is
    ``ratings[pair, k]``."""
    from annotation.errors import ServiceError
    from annotation.models import Caption, Participant
    from annotation.services.assignments import assignment_next
    from annotation.services.judgments import judgment_submit

    pair_of = {
        caption_id: metrics["pair"]
        for caption_id, metrics in Caption.objects.filter(study=study, purpose="study").values_list(
            "id", "metrics"
        )
    }
    given = [0] * len(ratings)
    players = list(Participant.objects.filter(study=study).order_by("id"))
    refused = 0
    started = time.perf_counter()
    while players:
        still = []
        for player in players:
            lease = assignment_next(participant=player)
            if lease is None:
                continue
            pair = pair_of[lease.item.spec["caption_id"]]
            try:
                judgment_submit(
                    participant=player,
                    token=lease.token,
                    data={"rating": str(int(ratings[pair, given[pair]]))},
                    part=0,
                    now=lease.served_at + timedelta(seconds=SECONDS_PER_RATING),
                )
            except ServiceError:
                refused += 1
                continue
            given[pair] += 1
            still.append(player)
        players = still
    return {"given": given, "refused": refused, "seconds": time.perf_counter() - started}


def consensus_labels(study) -> dict[int, int]:
    """Each game pair's consensus as the game scores it: the priming pool of its stored
    kept ratings (``rubrics.vicr.consensus_pool``), by pair number."""
    from annotation.models import Caption, Judgment
    from rubrics import vicr as rules

    ratings: dict[int, list[int]] = {}
    for caption_id, rating in (
        Judgment.objects.filter(study=study, item__kind="game", excluded=False)
        .order_by("id")
        .values_list("item__spec__caption_id", "payload__rating")
    ):
        ratings.setdefault(caption_id, []).append(int(rating))
    out = {}
    for caption_id, metrics, spec in Caption.objects.filter(
        study=study, purpose="study"
    ).values_list("id", "metrics", "spec"):
        pool = rules.consensus_pool(ratings.get(caption_id, []), spec.get("prime_ratings", []))
        out[metrics["pair"]] = rules.consensus(pool)
    return out


def vicr_part(args, partial: Path | None = None) -> dict:
    import os

    from django.contrib.auth import get_user_model

    import annotation
    from annotation.models import Judgment
    from annotation.modes import get_mode
    from rubrics.adaptive import fit_rater_model

    if not DATASETS.is_dir():
        raise SystemExit(f"needs {DATASETS} (the VICR sample): not found")
    owner = get_user_model().objects.create_user("bench-vicr", is_researcher=True)
    model = fit_rater_model(vicr_sample(), levels=5)
    runs = []
    pairs = args.pairs
    for seed in range(1, args.seeds + 1):
        drawn = model.simulate(pairs, 9, seed=seed)
        primes, ratings = drawn[:, :2], drawn[:, 2:]
        result = {}
        for adaptive in (True, False):
            study = build_study(owner, seed=seed, adaptive=adaptive, primes=primes)
            played = play(study, ratings)
            game = Judgment.objects.filter(study=study, item__kind="game").count()
            result["adaptive" if adaptive else "fixed"] = {
                "ratings": game,
                "labels": consensus_labels(study),
                "refused": played["refused"],
                "ms_per_rating": round(1000 * played["seconds"] / max(game, 1), 2),
                "saving_on_page": _panel_saving(get_mode("vicr"), study),
            }
        a, f = result["adaptive"], result["fixed"]
        same = sum(a["labels"][p] == f["labels"][p] for p in range(pairs)) / pairs
        run = {
            "seed": seed,
            "ratings_adaptive": a["ratings"],
            "ratings_fixed": f["ratings"],
            "saving": 1 - a["ratings"] / f["ratings"],
            "same_consensus": same,
            "refused": a["refused"] + f["refused"],
            "saving_on_page": a["saving_on_page"],
            "ms_per_rating": a["ms_per_rating"],
        }
        runs.append(run)
        print(
            f"vicr seed {seed}: {a['ratings']} ratings vs {f['ratings']}, saving "
            f"{run['saving']:.3f}, same consensus {same:.3f}",
            flush=True,
        )
        if partial is not None:  # what is done so far, should the run be cut short
            partial.write_text(json.dumps({"runs": runs}, indent=2))
    adaptive_total = sum(r["ratings_adaptive"] for r in runs)
    fixed_total = sum(r["ratings_fixed"] for r in runs)
    summary = {
        "code_path": (
            "study_create + study_open (VICR defaults, adaptive_stopping on / off) -> "
            "assignment_next -> judgment_submit -> VicrProtocol.after_submit -> "
            "stopping.adaptive_stop (study's own rater model from 30 pairs); consensus: "
            "rubrics.vicr.consensus of the stored ratings' priming pool"
        ),
        "code_imported_from": str(Path(annotation.__file__).resolve().parent),
        "seeds": len(runs),
        "pairs_per_study": pairs,
        "players": PLAYERS,
        "crowd_model": "fit_rater_model on the 249-pair VICR sample (two classes per level)",
        "saving_pooled": 1 - adaptive_total / fixed_total,
        "saving_median": statistics.median(r["saving"] for r in runs),
        "saving_min": min(r["saving"] for r in runs),
        "same_consensus_mean": statistics.mean(r["same_consensus"] for r in runs),
        "same_consensus_min": min(r["same_consensus"] for r in runs),
        "refused": sum(r["refused"] for r in runs),
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    return {"summary": summary, "runs": runs}


def vicr_fixed_baselines(seeds: int, pairs: int) -> dict:
    """The fixed designs beside VICR's adaptive run (issue 48), on the same drawn ratings.

    A fixed design of k ratings per pair gives every pair its first k drawn ratings (the
    k-th rating a pair receives is its k-th draw in every design, ``play``), so its
    consensus is ``rubrics.vicr.consensus`` of those (k >= 2: no primed rating enters the
    pool). Per k from 3 to ``max_ratings`` 7: ratings per study and the share of pairs whose
    consensus is the 7-rating one (what ``same_consensus`` of the adaptive run measures).
    The planner-sized design is the planner form's default for VICR (3 ratings per pair,
    ``VicrPlanner.default_judgments``: the planner sizes the number of pairs, the ratings
    per pair are the researcher's); the hindsight-cheapest is the smallest k whose share
    reaches the adaptive run's, read after seeing the ratings. No Django: pure pricing.
    """
    from rubrics import vicr as rules
    from rubrics.adaptive import fit_rater_model

    model = fit_rater_model(vicr_sample(), levels=5)
    shares: dict[int, list[float]] = {k: [] for k in range(3, 8)}
    for seed in range(1, seeds + 1):
        ratings = model.simulate(pairs, 9, seed=seed)[:, 2:]
        full = [rules.consensus(row[:7].tolist()) for row in ratings]
        for k in shares:
            kept = (rules.consensus(row[:k].tolist()) for row in ratings)
            same = sum(a == b for a, b in zip(kept, full, strict=True))
            shares[k].append(same / pairs)
    return {
        "seeds": seeds,
        "pairs": pairs,
        "fixed": {
            k: {"ratings": k * pairs, "same_consensus_mean": statistics.mean(v), "min": min(v)}
            for k, v in shares.items()
        },
    }
