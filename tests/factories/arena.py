"""Builders of arena studies and a worker's moves, for the arena tests.

Studies are built from Image/Caption rows made here (not through the importer). Each image
gets one caption per system; a caption's text is ``words`` words long so length control
has something to measure. ``judge`` leases the next battle and answers it a few seconds
later on the server's clock (``min_seconds`` is measured from ``served_at``).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import timedelta
from itertools import count

from django.utils import timezone

from annotation.models import Assignment, Caption, Image, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.modes.arena.protocol import left_is_a
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_create, study_open

_numbers = count(5000)
WORDS = [
    *[
        "a",
        "dog",
        "runs",
        "across",
        "green",
        "grass",
        "near",
        "a",
        "red",
        "barn",
        "while",
        "two",
        "children",
        "watch",
        "from",
    ],
    *[
        "the",
        "wooden",
        "fence",
        "and",
        "clouds",
        "drift",
        "over",
        "the",
        "hills",
        "behind",
        "them",
        "in",
        "the",
        "late",
        "light",
    ],
]


def detailed_text(system: str, image: int, words: int) -> str:
    body = [WORDS[(image + i) % len(WORDS)] for i in range(words)]
    return f"{system} says: " + " ".join(body) + "."


def arena_study(
    owner,
    *,
    systems=("alpha", "beta", "gamma"),
    images=6,
    words=None,
    live=True,
    seed=0,
    **settings,
) -> Study:
    """A live arena study: ``images`` images, each captioned by every system.

    ``words(system, image index)`` gives a caption's length in words (default: 100 to
    160, varying by image and system, so length control is estimable).
    """
    settings.setdefault("min_seconds", 0)
    study = study_create(owner=owner, name="Arena test", mode="arena", settings=settings, seed=seed)
    line = count(2)
    for index in range(images):
        number = next(_numbers)
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
        for k, system in enumerate(systems):
            length = words(system, index) if words else 100 + 10 * ((index + 3 * k) % 7)
            text = detailed_text(system, number, length)
            Caption.objects.create(
                study=study,
                image=image,
                system=system,
                raw_text=text,
                text=text,
                line=next(line),
            )
    if live:
        study_open(study=study)
        study.refresh_from_db()
    return study


def worker(study: Study, name: str | None = None) -> Participant:
    return Participant.objects.create(
        study=study,
        source=Participant.Source.PROLIFIC,
        external_id=name or f"w{next(_numbers)}",
    )


def shown_left(lease: Assignment) -> str:
    """``a`` or ``b``: which canonical caption the page shows on the left for ``lease``."""
    return "a" if left_is_a(lease.participant.study, lease) else "b"


def judge(participant: Participant, outcome="a", *, seconds=30, **extra):
    """Lease the next battle and answer ``outcome`` (or ``outcome(lease)``) later."""
    lease = assignment_next(participant=participant)
    if lease is None:
        return None, None
    value = outcome(lease) if callable(outcome) else outcome
    return lease, answer(participant, lease, value, seconds=seconds, **extra)


def answer(participant: Participant, lease: Assignment, outcome="a", *, seconds=30, **extra):
    """Answer the battle of ``lease`` with ``outcome``, ``seconds`` after now."""
    return judgment_submit(
        participant=participant,
        token=lease.token,
        data={"outcome": outcome, **extra},
        part=0,
        now=timezone.now() + timedelta(seconds=seconds),
    )


def serve_gold(participant: Participant, outcome="tie") -> Assignment:
    """Answer ``outcome`` to every battle served until a gold battle is: its lease."""
    lease = None
    while lease is None or lease.item.kind != "catch":
        if lease is not None:
            answer(participant, lease, outcome)
        lease = assignment_next(participant=participant)
        assert lease is not None, "no gold battle was served"
    return lease


MODE = get_mode("arena")


def kept_battles(study: Study, names: list[str], pairs: list[tuple[int, int]]) -> list[float]:
    """The study's kept battle judgments of each pair (indices into ``names``), counted
    from the stored judgments: what a report holds, counted apart from the mode."""
    held = Counter(
        frozenset((spec["system_a"], spec["system_b"]))
        for spec in Judgment.objects.filter(
            study=study, item__kind="battle", excluded=False
        ).values_list("item__spec", flat=True)
    )
    return [float(held[frozenset((names[i], names[j]))]) for i, j in pairs]


#: The strengths (log-odds) of ``bradley_terry_study``'s systems.
BT_STRENGTH = {"alpha": 1.5, "beta": 0.5, "gamma": 0.0, "delta": -1.0}


def bradley_terry_study(owner, **settings) -> Study:
    """A live study of ``BT_STRENGTH``'s four systems for a Bradley-Terry crowd
    (``answer_battles``'): 40 images, no gold battles, a pair of one worker capped far away."""
    return arena_study(
        owner,
        systems=tuple(BT_STRENGTH),
        images=40,
        catch_rate=0,
        battle_target=5,
        bootstrap_rounds=20,
        cap_per_pair=1000,
        **settings,
    )


def answer_battles(study: Study, how_many: int, name: str) -> None:
    """``how_many`` battles answered by fresh workers named ``name-k``, each taking what
    they may, with Bradley-Terry choices by ``BT_STRENGTH`` (every system loses sometimes,
    or no fit exists). Seeded by ``name``: the same answers whatever ran before."""
    rng = random.Random(name)

    def choice(lease: Assignment) -> str:
        spec = lease.item.spec
        gap = BT_STRENGTH[spec["system_a"]] - BT_STRENGTH[spec["system_b"]]
        a_wins = rng.random() < 1 / (1 + math.exp(-gap))
        return "a" if a_wins == (shown_left(lease) == "a") else "b"

    answered = 0
    for k in range(100):
        person = worker(study, f"{name}-{k}")
        while answered < how_many and judge(person, choice)[0] is not None:
            answered += 1
        if answered == how_many:
            return
    raise AssertionError(f"only {answered} battles could be served")
