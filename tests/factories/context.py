"""Builders of context studies and raters' moves, for the context mode's tests.

Unlike the other modes' factories, the study is built through the real import service
(``study_import``): images from a folder of small PNGs, descriptions from a captions CSV
(purpose ``study``) and contexts from a second CSV (purpose ``context``, with the mode's
``domain`` and ``title`` columns), so the tests cover what a researcher's import makes.
Raters are crowd workers who declare their vision through the real service.
"""

from __future__ import annotations

import csv
import tempfile
from datetime import timedelta
from itertools import count
from pathlib import Path

from django.utils import timezone
from PIL import Image as PILImage

from annotation.models import Caption, Participant, Study
from annotation.services.assignments import assignment_next
from annotation.services.imports import study_import
from annotation.services.judgments import judgment_submit
from annotation.services.participants import (
    participant_declare_vision,
    participant_for_crowd_worker,
)
from annotation.services.studies import study_create, study_open

_numbers = count(1)

#: Each image's descriptions by system: a detailed one and a short one.
DESCRIPTIONS = {
    "good-detail": "A woman in a red raincoat holds a black umbrella on a wet city street at dusk.",
    "bad-short": "A person outside.",
}
#: Each image's contexts: (system, domain, title, passage).
CONTEXTS = (
    (
        "news",
        "News",
        "Storm brings flooding to the city centre",
        "Heavy rain closed three streets on Tuesday. Commuters waited for hours as buses "
        "were turned back.",
    ),
    (
        "shop",
        "Shopping",
        "Waterproof raincoat, red",
        "Our lightest raincoat keeps you dry in a downpour. Machine washable, sizes XS to XL.",
    ),
)
BEFORE_ANSWER = {"overall": "4", "imaginability": "3", "relevance": "5", "irrelevance": "2"}
AFTER_ANSWER = {"overall": "3", "accuracy": "4", "missing": "The umbrella's colour."}


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def context_study(
    owner,
    *,
    images: int = 2,
    descriptions: dict[str, str] = DESCRIPTIONS,
    contexts=CONTEXTS,
    live: bool = True,
    name: str = "Context test",
    seed: int = 5,
    **settings,
) -> Study:
    """A context study of ``images`` images, each with ``descriptions`` (one per system)
    and ``contexts``, imported through ``study_import``; opened unless ``live`` is False."""
    study = study_create(owner=owner, name=name, mode="context", settings=settings, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "images").mkdir()
        names = []
        for _ in range(images):
            number = next(_numbers)
            image_name = f"photo-{number}.png"
            # A colour of its own per image: the store keeps one file per content hash.
            colour = (number * 37 % 256, number * 91 % 256, number * 53 % 256)
            PILImage.new("RGB", (32, 24), colour).save(root / "images" / image_name)
            names.append(image_name)
        described = _write_csv(
            root / "descriptions.csv",
            ["image", "system", "caption"],
            [[image, system, text] for image in names for system, text in descriptions.items()],
        )
        placed = _write_csv(
            root / "contexts.csv",
            ["image", "system", "domain", "title", "caption"],
            [
                [image, f"{system}-{n}", domain, title, passage]
                for n, image in enumerate(names)
                for system, domain, title, passage in contexts
            ],
        )
        study_import(study=study, image_sources=[root / "images"], captions=described)
        study_import(study=study, captions=placed, purpose="context")
    if live:
        study_open(study=study)
        study.refresh_from_db()
    return study


def rater(study: Study, vision: str = "sighted", *, name: str = "", screen_reader=None):
    """A Prolific worker of ``study`` who declared ``vision`` (with consent)."""
    external_id = name or f"w{next(_numbers)}"
    participant, _ = participant_for_crowd_worker(
        study=study, source=Participant.Source.PROLIFIC, external_id=external_id, meta={}
    )
    if screen_reader is None:
        screen_reader = vision == "blind"
    return participant_declare_vision(
        participant, vision=vision, screen_reader=screen_reader, consent=True
    )


def description_of(item) -> Caption:
    return Caption.objects.get(pk=item.spec["caption"])


def context_of(item) -> Caption:
    return Caption.objects.get(pk=item.spec["context"])


def rate(participant: Participant, *, seconds: float = 120, after: bool = True):
    """Lease the next item and answer its parts ``seconds`` apart on the server's clock
    (part 1 only for a sighted item, and only when ``after``); return the lease."""
    lease = assignment_next(participant=participant)
    if lease is None:
        return None
    at = timezone.now()
    parts = [(0, BEFORE_ANSWER)] + ([(1, AFTER_ANSWER)] if lease.item.spec["parts"] > 1 else [])
    for part, data in parts if after else parts[:1]:
        at += timedelta(seconds=seconds)
        judgment_submit(participant=participant, token=lease.token, data=data, part=part, now=at)
    return lease
