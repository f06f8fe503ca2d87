"""Write a checked import all or nothing, and the refusal that says why nothing was written.

All or nothing
--------------
Every image and row is checked and every problem collected before anything is written;
processed files wait in a staging folder of this node. Only when there are no errors are
the files written to the media storage (``annotation/storage.py``: MEDIA_ROOT or an object
store) and the rows created in one transaction; if the transaction fails the files this
import wrote are removed.
Progress is reported before that transaction, so other connections see it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from annotation import storage
from annotation.errors import ServiceError
from annotation.models import Caption, Image, Study
from annotation.services.imports.captions import CaptionRow
from annotation.services.imports.images import StagedImage
from rubrics.thumb import normalise

MAX_REPORTED_ERRORS = 1000


def import_refused(errors: Sequence[str], *, headline: str = "") -> ServiceError:
    """The error saying the import stored nothing; ``details["errors"]`` lists the problems.

    File-level problems come first, then row problems in line order, wherever they were
    found; past ``MAX_REPORTED_ERRORS`` the rest are counted, not listed. ``headline``: the
    one problem the message itself names (a limit of the whole import), else the count.
    """
    ordered = sorted(errors, key=_line_of)
    shown = ordered[:MAX_REPORTED_ERRORS]
    if len(ordered) > len(shown):
        shown.append(f"... and {len(ordered) - len(shown)} more errors")
    count = len(ordered)
    summary = headline or f"{count} problem{'s' if count != 1 else ''} found."
    return ServiceError(f"Nothing was imported: {summary}", details={"errors": shown})


def _line_of(error: str) -> int:
    match = re.match(r"line (\d+):", error)
    return int(match.group(1)) if match else 0


@dataclass
class ImportSummary:
    """What an import stored; ``as_dict`` is the import job's result."""

    images_new: int = 0
    images_existing: int = 0
    files_written: int = 0
    captions: int = 0
    systems: list[str] = field(default_factory=list)
    purpose: str = Caption.Purpose.STUDY
    #: The mode's sentences on captions it will not ask about (``Mode.caption_notes``).
    notes: list[str] = field(default_factory=list)

    def as_text(self) -> str:
        systems = ", ".join(self.systems) or "none"
        return " ".join(
            [
                # Images, not files: each image is stored with a display copy, and "16
                # files" for 8 images read as a double import (issue 26, row 17).
                f"Imported {self.images_new} new image(s) ({self.images_existing} already in "
                f"the study) and {self.captions} {self.purpose} caption(s) from system(s): "
                f"{systems}.",
                *self.notes,
            ]
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": self.as_text(),
            "images_new": self.images_new,
            "images_existing": self.images_existing,
            "files_written": self.files_written,
            "captions": self.captions,
            "systems": self.systems,
            "purpose": self.purpose,
            "notes": self.notes,
        }


def store(
    study: Study,
    staged: dict[str, StagedImage],
    existing: dict[str, Image],
    rows: list[CaptionRow],
    resolved: list[str],
    purpose: str,
    staging: Path,
) -> ImportSummary:
    """Move the staged files into place and create the rows, or leave no trace.

    ``resolved`` is the image name of each row (parallel to ``rows``); ``existing`` are the
    study's images by name, which are not created again.
    """
    placed: list[str] = []
    summary = ImportSummary(purpose=purpose)
    try:
        for name in sorted({p for s in staged.values() for p in (s.file, s.display)}):
            # Content-hashed names: a file already stored holds these bytes.
            if storage.exists(name):
                continue
            storage.write_file(name, staging / name)
            placed.append(name)
        summary.files_written = len(placed)
        metadata = _image_metadata(rows, resolved)
        new_images = [
            Image(
                study=study,
                **s.row_fields(),
                alt_text=metadata[s.name][0],
                source=metadata[s.name][1],
            )
            for name, s in staged.items()
            if name not in existing
        ]
        summary.images_new = len(new_images)
        summary.images_existing = len(staged) - len(new_images)
        with transaction.atomic():
            # Opening the study locks this row too: captions never land in a live study.
            locked = Study.objects.select_for_update().get(pk=study.pk)
            if locked.status != Study.Status.DRAFT:
                raise import_refused(["the study was opened during the import; nothing stored"])
            Image.objects.bulk_create(new_images)
            images = {image.name: image for image in Image.objects.filter(study=study)}
            captions = [
                Caption(
                    study=study,
                    image=images[name],
                    system=row.system,
                    raw_text=row.raw_text,
                    text=normalise(row.raw_text),
                    purpose=purpose,
                    metrics=row.metrics,
                    spec=row.spec,
                    line=row.line,
                )
                for row, name in zip(rows, resolved, strict=True)
            ]
            Caption.objects.bulk_create(captions, batch_size=1000)
    except BaseException:
        for name in placed:
            storage.delete(name)
        raise
    summary.captions = len(captions)
    summary.systems = sorted({row.system for row in rows})
    return summary


def _image_metadata(rows: list[CaptionRow], resolved: list[str]) -> dict[str, tuple[str, str]]:
    """(alt text, source) per image: the first non-empty cell of each among its rows."""
    found: dict[str, tuple[str, str]] = defaultdict(lambda: ("", ""))
    for row, name in zip(rows, resolved, strict=True):
        alt, source = found[name]
        found[name] = (alt or row.description, source or row.source)
    return found
