"""Builders of error-span studies and an annotator's moves, for the spans tests.

Captions are written here (not imported); one of them holds an emoji, a character that
JavaScript counts as two UTF-16 units and Python as one code point, so offset mistakes show.
``judge`` leases the next caption and answers it a few seconds later on the server's clock.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import count

from django.utils import timezone

from annotation.models import Caption, Image, Participant, Study
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_create, study_open

_numbers = count(7000)
TEXTS = {
    "alpha": "A brown dog 🐕 sits on a red sofa next to two cats.",
    "beta": "Three cats sleep on a blue sofa under a window.",
}
MODE = get_mode("spans")


def spans_study(owner, *, images=2, systems=("alpha", "beta"), live=True, **settings) -> Study:
    settings.setdefault("min_seconds", 0)
    study = study_create(owner=owner, name="Spans test", mode="spans", settings=settings, seed=3)
    line = count(2)
    for _ in range(images):
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
        for system in systems:
            text = TEXTS[system]
            Caption.objects.create(
                study=study, image=image, system=system, raw_text=text, text=text, line=next(line)
            )
    if live:
        study_open(study=study)
        study.refresh_from_db()
    return study


def worker(study: Study, name: str | None = None) -> Participant:
    return Participant.objects.create(
        study=study, source=Participant.Source.PROLIFIC, external_id=name or f"w{next(_numbers)}"
    )


def judge(participant: Participant, answer, *, seconds=30):
    """Lease the next caption and submit ``answer(lease, text)`` (form-like data)."""
    lease = assignment_next(participant=participant)
    if lease is None:
        return None, None
    text = Caption.objects.get(pk=lease.item.spec["caption"]).text
    data = answer(lease, text)
    result = judgment_submit(
        participant=participant,
        token=lease.token,
        data=data,
        part=0,
        now=timezone.now() + timedelta(seconds=seconds),
    )
    return lease, result
