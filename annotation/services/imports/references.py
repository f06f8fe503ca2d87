"""Read a reference-caption file for the metric lab into rows, listing every bad row.

Three formats, told apart by their content (``reference_format``):

- ``csv``: a header ``image,reference`` then one reference per row; ``image`` is the
  study's image name (the file name the captions cite).
- ``coco``: COCO captions JSON, ``{"images": [{"id", "file_name"}], "annotations":
  [{"image_id", "caption"}]}``; the image is found by its file name.
- ``thumb``: THumB 1.0's ``mscoco_references.json``, JSON Lines ``{"seg_id", "refs":
  [...]}``; the image is the one ``import_thumb`` stored with that ``seg_id`` as its source.

The reader only reads: ``references_import`` (below) matches the rows to the
study's images and writes them, all or nothing, like the caption importers.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation import storage
from annotation.errors import ServiceError
from annotation.filelimits import REFERENCE_MAX, csv_problem, json_depth_problem, loads
from annotation.models import Image, Job, Reference, Study
from annotation.services.imports.coco_captions import _UNREADABLE, _coco_id_map, _read_json
from annotation.services.imports.sources import ImportTooLarge, save_upload, staged_uploads
from annotation.services.jobs import job_create
from annotation.text import text_problem

FORMATS = ("csv", "coco", "thumb")
#: How a row names its image: the image's ``name`` or its ``source`` (THumB's seg_id).
BY_NAME, BY_SOURCE = "name", "source"

REFERENCES_FILE = "the references file"


@dataclass(frozen=True)
class ReferenceRow:
    """One reference of the file: its line, how it names the image, and the text."""

    line: int
    image_ref: str
    text: str
    by: str = BY_NAME


def reference_format(filename: str, text: str) -> str:
    """The file's format: ``csv`` by its extension, else ``thumb`` for JSON Lines whose first
    object has ``refs``, else ``coco``."""
    if filename.lower().endswith(".csv"):
        return "csv"
    first = text.lstrip().split("\n", 1)[0]
    if json_depth_problem(first):
        return "coco"  # whose reader reports the nesting with its line
    try:
        head = json.loads(first)
    except ValueError:
        return "coco"
    return "thumb" if isinstance(head, dict) and "refs" in head else "coco"


def _too_many(count: int) -> None:
    limit = settings.CAPEVAL_MAX_IMPORT_ROWS
    if count > limit:
        raise ImportTooLarge(
            f"the references file has {count} references; the limit per import is {limit} "
            "(CAPEVAL_MAX_IMPORT_ROWS). Import it in several parts."
        )


def read_references(text: str, fmt: str, errors: list[str]) -> list[ReferenceRow]:
    """The good rows of ``text`` in format ``fmt``; every problem is added to ``errors``."""
    if fmt == "csv":
        return _read_csv(text, errors)
    if fmt == "coco":
        return _read_coco(text, errors)
    if fmt == "thumb":
        return _read_thumb(text, errors)
    errors.append(f"unknown references format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return []


def _read_csv(text: str, errors: list[str]) -> list[ReferenceRow]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in reader.fieldnames or []]
    except csv.Error as exc:
        errors.append(csv_problem(exc, reader.line_num or 1))
        return []
    missing = {"image", "reference"} - set(header)
    if missing:
        errors.append(
            "line 1: the header must name image and reference "
            f"(missing: {', '.join(sorted(missing))})"
        )
        return []
    reader.fieldnames = header
    rows: list[ReferenceRow] = []
    while True:
        # An error stops the reader inside the line after the last one it finished.
        start = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(csv_problem(exc, start) + "; rows after it were not read")
            break
        _too_many(len(rows) + 1)
        # The line where the record ends; a quoted reference may span lines.
        line = reader.line_num
        rows.append(
            ReferenceRow(line, (record.get("image") or "").strip(), record.get("reference") or "")
        )
    return rows


def _read_coco(text: str, errors: list[str]) -> list[ReferenceRow]:
    document = _read_json(text, REFERENCES_FILE, errors)
    if document is _UNREADABLE:
        return []
    if not isinstance(document, dict) or not isinstance(document.get("annotations"), list):
        errors.append(
            'line 1: COCO captions JSON is an object with "images" and "annotations" '
            '([{"image_id", "caption"}])'
        )
        return []
    id_to_name = _coco_id_map(document.get("images"), REFERENCES_FILE, "images", errors)
    if id_to_name is None:
        return []
    _too_many(len(document["annotations"]))
    rows: list[ReferenceRow] = []
    for index, located in enumerate(document["annotations"]):
        entry: Any = located.value
        where = f"line {located.line}: annotations[{index}]"
        if not isinstance(entry, dict) or "image_id" not in entry or "caption" not in entry:
            errors.append(f"{where} needs an image_id and a caption")
            continue
        name = id_to_name.get(entry["image_id"])
        if name is None:
            errors.append(f"{where}: image_id {entry['image_id']!r} is not in the images list")
            continue
        rows.append(ReferenceRow(located.line, name, entry["caption"]))
    return rows


def _read_thumb(text: str, errors: list[str]) -> list[ReferenceRow]:
    rows: list[ReferenceRow] = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            # Deep nesting, bad syntax and a number too long to read, each with the line.
            entry = loads(line, first_line=line_number)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        refs = entry.get("refs") if isinstance(entry, dict) else None
        if not isinstance(refs, list) or "seg_id" not in entry:
            errors.append(f'line {line_number}: needs "seg_id" and a "refs" list')
            continue
        _too_many(len(rows) + len(refs))
        rows.extend(ReferenceRow(line_number, str(entry["seg_id"]), ref, BY_SOURCE) for ref in refs)
    return rows


def image_label(row: ReferenceRow) -> str:
    """How an error names the row's image."""
    if row.by == BY_SOURCE:
        return f"seg_id {row.image_ref!r}"
    return f"image {PurePosixPath(row.image_ref).name!r}"


def references_import(*, study: Study, path: Path | str, fmt: str = "") -> dict[str, int]:
    """Store the reference captions of ``path`` for the study's images, all or nothing.

    ``fmt`` is ``csv``, ``coco`` or ``thumb`` (see ``services/imports/references.py``);
    empty: told from the file. Every bad row (unknown image, empty or overlong text,
    control characters) is listed with its line in ``ServiceError.details["errors"]``, and
    then nothing is written. A reference the image already has is not stored twice.
    Returns ``{"imported": n, "already_there": m}``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceError(
            f"{path.name}: not a readable UTF-8 file ({exc})", field="file"
        ) from None
    errors: list[str] = []
    try:
        rows = read_references(text, fmt or reference_format(path.name, text), errors)
    except ImportTooLarge as exc:
        raise ServiceError(str(exc), field="file") from None
    by_name = dict(Image.objects.filter(study=study).values_list("name", "id"))
    by_source = dict(Image.objects.filter(study=study).values_list("source", "id"))
    existing = set(Reference.objects.filter(study=study).values_list("image_id", "text"))
    new: list[Reference] = []
    already = 0
    for row in rows:
        image_id = (by_source if row.by == BY_SOURCE else by_name).get(row.image_ref)
        value = row.text.strip() if isinstance(row.text, str) else row.text
        problem = text_problem(value, max_length=REFERENCE_MAX)
        if image_id is None:
            errors.append(f"line {row.line}: {image_label(row)} is not an image of this study")
        elif problem or not value:
            errors.append(f"line {row.line}: the reference {problem or 'is empty'}")
        elif (image_id, value) in existing:
            already += 1
        else:
            existing.add((image_id, value))
            new.append(
                Reference(
                    study=study, image_id=image_id, text=value, source=path.name, line=row.line
                )
            )
    if errors:
        raise ServiceError(
            f"{len(errors)} bad row(s) in {path.name}; nothing imported.",
            field="file",
            details={"errors": errors[:200]},
        )
    if not new and not already:
        raise ServiceError(f"{path.name} holds no references; nothing imported.", field="file")
    with transaction.atomic():
        Reference.objects.bulk_create(new, batch_size=2000)
    return {"imported": len(new), "already_there": already}


def references_request(*, study: Study, user, upload, fmt: str = "") -> Job:
    """Save an uploaded references file and queue an import job reading it (the metrics page
    and the API); the job runs ``references_import``, so a bad file fails the job with every
    bad line in its ``result["errors"]``.

    An import job rather than a new kind: the job table's kinds are a database choice, and
    the import runner already removes the staging folder either way.
    """
    if fmt and fmt not in FORMATS:
        raise ServiceError(f"Format must be one of {', '.join(FORMATS)}.", field="format")
    staging = storage.new_upload_folder()
    with staged_uploads(staging):
        name = save_upload(upload, f"{staging}/references")
        params = {"staging": staging, "references": name, "reference_format": fmt}
        job = job_create(kind=Job.Kind.IMPORT, study=study, created_by=user, params=params)
    return job


def references_run(*, study: Study, params: dict[str, Any]) -> dict[str, Any]:
    """The import job's part for a references file: import it, say how many were stored."""
    counts = references_import(
        study=study, path=params["references"], fmt=params.get("reference_format", "")
    )
    message = f"{counts['imported']} reference(s) imported"
    if counts["already_there"]:
        message += f", {counts['already_there']} already there"
    return {"result": {**counts, "summary": message}, "message": message}
