"""Builders of VICR studies and players, and a player's moves, for the tests of every part.

Studies are built from Image/Caption rows made here (not through the import service) so
the tests do not depend on the importer. ``play`` leases the next pair and rates it a few
seconds later on the server's clock. The answer helpers (``exact``, ``one_off``, ``far``)
choose a rating from an item's expert truth.
"""

from __future__ import annotations

import io
from datetime import timedelta
from itertools import count

from django.core.management import call_command
from django.utils import timezone

from annotation.models import Caption, Image, Item, Judgment, Participant, Study
from annotation.modes.vicr.captions import EXPLANATION, PRIME_RATINGS, TRUTH
from annotation.modes.vicr.captions import truth as caption_truth
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_create, study_open

# The pools: twice the tutorial block of 10, and probation's 20 pairs for each of the 2
# attempts (the smallest pool a study opens with).
TUTORIAL_TRUTHS = [5, 4, 3, 2, 1, 1, 2, 3, 4, 5] * 2
PROBATION_TRUTHS = [3, 4, 2, 5, 1] * 8
_names = count()


def vicr_study(
    owner,
    *,
    game=6,
    primes=(3, 4),
    tutorial=TUTORIAL_TRUTHS,
    probation=PROBATION_TRUTHS,
    seed=0,
    **settings,
) -> Study:
    """A live VICR study: tutorial and probation pairs with truths, game pairs with primes.

    The pools are the smallest a study opens with at ``gate_pool_multiple`` 1, which is set
    unless the caller sets it (the issue 29 default, 3, would need 120 probation pairs;
    tests/annotation/test_integrity2_vicr.py tests the default).
    """
    settings.setdefault("gate_pool_multiple", 1)
    study = study_create(owner=owner, name="VICR test", mode="vicr", settings=settings, seed=seed)
    line = count(2)

    def caption(purpose, text, **fields):
        number = next(_names)
        image = Image.objects.create(
            study=study,
            name=f"img-{number}.jpg",
            sha256=f"{number:064d}",
            file=f"images/{number}.jpg",
            display=f"display/{number}.webp",
            width=640,
            height=480,
            format="JPEG",
            alt_text=f"Photo {number}",
        )
        return Caption.objects.create(
            study=study,
            image=image,
            system="S",
            raw_text=text,
            text=text,
            purpose=purpose,
            line=next(line),
            **fields,
        )

    for i, truth in enumerate(tutorial):
        caption(
            "tutorial",
            f"tutorial caption {i}",
            spec={TRUTH: truth, EXPLANATION: f"Because {i}."},
        )
    for i, truth in enumerate(probation):
        caption("probation", f"probation caption {i}", spec={TRUTH: truth})
    for i in range(game):
        caption("study", f"game caption {i}", spec={PRIME_RATINGS: list(primes)} if primes else {})
    study_open(study=study)
    study.refresh_from_db()
    return study


def player(study, name=None) -> Participant:
    return Participant.objects.create(
        study=study, source=Participant.Source.PROLIFIC, external_id=name or f"w{next(_names)}"
    )


def in_game(study, name=None) -> Participant:
    """A player who already passed the tutorial (state as after_submit would leave it)."""
    participant = player(study, name)
    participant.state = {
        "player": {"probation_attempts": 0, "score": 0, "game_ratings": 0},
        "tutorial_score": 20,
        "block": [],
    }
    participant.status = "game"
    participant.save()
    return participant


def truth_of(item: Item) -> int:
    return caption_truth(Caption.objects.get(pk=item.spec["caption_id"]))


def play(participant, rating=None, *, wait=3.0, answer=None) -> Judgment:
    """Lease the next pair and rate it ``wait`` seconds later; return the judgment."""
    now = timezone.now()
    lease = assignment_next(participant=participant, now=now)
    assert lease is not None, "nothing left to play"
    if answer is not None:
        rating = answer(lease.item)
    outcome = judgment_submit(
        participant=participant,
        token=lease.token,
        data={"rating": str(rating)},
        now=lease.served_at + timedelta(seconds=wait),
    )
    participant.refresh_from_db()
    return outcome.judgment


def play_block(participant, pairs, answer) -> list[Judgment]:
    return [play(participant, answer=answer) for _ in range(pairs)]


def exact(item):
    return truth_of(item)


def one_off(item):
    """One level away from the truth: 1 point a pair."""
    truth = truth_of(item)
    return truth - 1 if truth > 1 else 2


def far(item):
    """Two or more levels away: at most 0 points a pair."""
    truth = truth_of(item)
    return 5 if truth <= 2 else 1


def vicr_release(owner, tmp_path, ratings) -> Study:
    """A closed VICR study imported through ``import_ratings`` from a release CSV whose
    caption ``i`` is "caption number i" with ``ratings[i]`` (three ratings each) on image
    ``img{i}.jpg``; the release names no systems."""
    path = tmp_path / "vicr.csv"
    lines = ["image,caption,ratings,rating_2,rating_3"]
    lines += [f"img{i}.jpg,caption number {i},{a},{b},{c}" for i, (a, b, c) in enumerate(ratings)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    call_command(
        "import_ratings", str(path), "--format", "vicr-csv", "--owner", owner.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    return Study.objects.get(owner=owner)
