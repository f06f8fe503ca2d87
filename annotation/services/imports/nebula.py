"""Nebula (Polaris, Wada et al. CVPR 2024; ``nebula_test.json`` of github.com/hjkim811/EXPERT)
as a closed study for the metric lab.

The file is a JSON list of ``{"imgid", "mt" (the caption), "refs": [5-10 references],
"score" (the human score in [0, 1])}``. The score is the mean over the caption's raters and
the ratings are not released, so it is stored as a ``DatasetScore`` named ``human score``
(not as judgments of a mode: no rater answered in this study). Each entry's references
become its image's ``Reference`` rows, so the metric lab scores the caption against them.
The study's mode is HUMANr, as Pascal-50S's import: a study of imported human data whose
mode collects nothing. Images are not in the file: each ``Image`` keeps the id only.

A file with any bad entry writes nothing; every bad entry is listed with its position.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.errors import Forbidden, ServiceError
from annotation.models import Caption, DatasetScore, Image, Reference, Study, User
from annotation.services.datasets import fileless_image
from annotation.services.imports import limits
from annotation.services.imports.references import REFERENCE_MAX
from annotation.services.studies import study_create
from annotation.text import text_problem

NEBULA = "nebula"
SCORE_NAME = "human score"
SYSTEM = "Nebula"


def _problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "not an object"
    imgid, caption, refs, score = (entry.get(k) for k in ("imgid", "mt", "refs", "score"))
    if not isinstance(imgid, str) or not imgid.strip() or len(imgid) > 255:
        return "imgid must be a non-empty id of at most 255 characters"
    if text_problem(imgid, max_length=None):
        return f"imgid {text_problem(imgid, max_length=None)}"
    if not isinstance(caption, str) or not caption.strip():
        return "mt (the caption) must be a non-empty text"
    if text_problem(caption, max_length=REFERENCE_MAX):
        return f"mt {text_problem(caption, max_length=REFERENCE_MAX)}"
    if not isinstance(refs, list) or not refs:
        return "refs must be a non-empty list of reference captions"
    for ref in refs:
        if not isinstance(ref, str) or not ref.strip():
            return "every reference must be a non-empty text"
        # Some Nebula references hold a line break; metrics tokenize it as a space.
        problem = text_problem(ref, max_length=REFERENCE_MAX, multiline=True)
        if problem:
            return f"a reference {problem}"
    if isinstance(score, bool) or not isinstance(score, int | float):
        return "score must be a number"
    if not (math.isfinite(score) and 0 <= score <= 1):
        return f"score {score!r} is not in [0, 1]"
    return None


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = limits.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ServiceError(f"{path.name}: not a readable JSON file ({exc})", field="file") from None
    if not isinstance(data, list) or not data:
        raise ServiceError(f"{path.name}: expected a non-empty JSON list of captions", field="file")
    if len(data) > settings.CAPEVAL_MAX_IMPORT_ROWS:
        raise ServiceError(
            f"{path.name}: {len(data)} entries; the limit per import is "
            f"{settings.CAPEVAL_MAX_IMPORT_ROWS} (CAPEVAL_MAX_IMPORT_ROWS).",
            field="file",
        )
    errors = []
    refs_of: dict[str, list[str]] = {}
    for index, entry in enumerate(data):
        problem = _problem(entry)
        if problem is None:
            refs = [r.strip() for r in entry["refs"]]
            # References belong to the image: one image's entries must agree on them.
            if refs_of.setdefault(entry["imgid"].strip(), refs) != refs:
                problem = f"imgid {entry['imgid']!r} appears before with other refs"
        if problem:
            errors.append(f"entry {index}: {problem}")
    if errors:
        raise ServiceError(
            f"{path.name}: nothing was imported: {len(errors)} bad entr"
            f"{'y' if len(errors) == 1 else 'ies'}.",
            field="file",
            details={"errors": errors[:200]},
        )
    return data


def dataset_import_nebula(*, owner: User, path: Path | str, name: str = "") -> Study:
    """Load Nebula's file as a new CLOSED study: captions, references, human scores.

    Forbidden for an owner who is not a researcher; ServiceError (nothing written) for an
    unreadable file or any bad entry.
    """
    path = Path(path)
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden(f"{owner.username} is not a researcher")
    entries = _read(path)
    source = path.name[:200]
    with transaction.atomic():
        study = study_create(
            owner=owner,
            name=name or f"Nebula ({path.name})",
            mode="humanr",
            settings={},
            description="Imported Nebula captions, references and human scores (Polaris).",
        )
        images: dict[str, Image] = {}
        for entry in entries:
            imgid = entry["imgid"].strip()
            if imgid not in images:
                images[imgid] = fileless_image(study=study, name=imgid, source=imgid)
        Image.objects.bulk_create(images.values(), batch_size=2000)
        captions = Caption.objects.bulk_create(
            [
                Caption(
                    study=study,
                    image=images[e["imgid"].strip()],
                    system=SYSTEM,
                    raw_text=e["mt"].strip(),
                    text=e["mt"].strip(),
                    line=index + 1,
                )
                for index, e in enumerate(entries)
            ],
            batch_size=2000,
        )
        seen: set[str] = set()
        references = []
        for index, entry in enumerate(entries):
            imgid = entry["imgid"].strip()
            if imgid in seen:
                continue
            seen.add(imgid)
            references += [
                Reference(
                    study=study, image=images[imgid], text=r.strip(), source=source, line=index + 1
                )
                for r in entry["refs"]
            ]
        Reference.objects.bulk_create(references, batch_size=2000)
        DatasetScore.objects.bulk_create(
            [
                DatasetScore(
                    study=study,
                    caption=caption,
                    name=SCORE_NAME,
                    value=float(entry["score"]),
                    source=source,
                    line=index + 1,
                )
                for index, (caption, entry) in enumerate(zip(captions, entries, strict=True))
            ],
            batch_size=2000,
        )
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status", "updated_at"])
    return study
