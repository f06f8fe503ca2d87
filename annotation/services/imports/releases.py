"""Load a published release or log file as a closed study, through its mode's importer.

Every registered mode lists its importers (``annotation/modes/importing.py``); each reads
the formats it names (``--format`` of ``manage.py import_ratings``, ``import_thumb``) into
unsaved rows. This service looks the importer up by the format the user chose, lets it read
and check the whole file, and writes what it returned in one transaction: the study (of the
importer's mode), each step's rows in order, the answers as submitted assignments with
their judgments, and the closed status. A file with any bad row writes nothing; so does an
owner who is not a researcher.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.errors import Forbidden, InvalidInput
from annotation.models import Assignment, Judgment, Study, User
from annotation.modes import get_mode
from annotation.modes.importing import Answer, Importer, ImportRows, importers
from annotation.registry import mode_names
from annotation.services.studies import study_create

_BATCH = 2000


@dataclass(frozen=True)
class ReleaseImport:
    """A stored import: the closed study and what the importer said of the file."""

    study: Study
    summary: tuple[str, ...]
    details: dict[str, Any]


def release_importers() -> dict[str, Importer]:
    """Every registered mode's importers by the format each reads."""
    found: dict[str, Importer] = {}
    for mode_name in mode_names():
        for importer in importers(get_mode(mode_name)):
            for fmt in importer.formats:
                found[fmt] = importer
    return found


def release_formats() -> list[str]:
    """The formats an import may choose, sorted."""
    return sorted(release_importers())


def release_import(
    *,
    owner: User,
    path: Path | str,
    fmt: str,
    name: str = "",
    settings: dict[str, Any] | None = None,
    **options: Any,
) -> ReleaseImport:
    """Read ``path`` in the format ``fmt`` with its mode's importer and store it as a new
    CLOSED study named ``name`` (default: the importer's). ``settings``: report settings
    of the mode to store over the importer's (an arena log's anchor system, a spans
    campaign's error weights); any other setting describes how judgments were collected,
    which the file decides. ``options`` go to the importer (``batches`` for ``esa-csv``).
    Forbidden for an owner who is not a researcher; ServiceError (nothing written) for an
    unknown format, a setting that is not the report's or a bad value, or a bad file."""
    path = Path(path)
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden(f"{owner.username} is not a researcher")
    importer = release_importers().get(fmt)
    if importer is None:
        raise InvalidInput(
            f"unknown format {fmt!r}; choose one of {', '.join(release_formats())}",
            field="format",
        )
    settings = settings or {}
    _refuse_unless_report(importer, settings)  # before the file is read: a typo fails fast
    rows = importer.read(path, fmt, **options)
    with transaction.atomic():
        study = _write(
            owner=owner, mode=importer.mode.name, name=name, rows=rows, settings=settings
        )
    return ReleaseImport(study, rows.summary, rows.details)


def settings_from_pairs(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs (a command's ``--setting``) as settings: the value read as JSON
    (``1200``, ``true``), else as text (``gpt-4``). InvalidInput for a pair with no name."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, equals, text = pair.partition("=")
        if not equals or not name.strip():
            raise InvalidInput(
                f"--setting {pair!r}: give NAME=VALUE, e.g. anchor_score=1200.", field="settings"
            )
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        out[name.strip()] = value
    return out


def _refuse_unless_report(importer: Importer, settings: dict[str, Any]) -> None:
    """Only the report's settings of the importer's mode may be given (``report=True``)."""
    declared = {spec.name: spec for spec in dataclasses.fields(importer.mode.settings_class)}
    report = sorted(name for name, spec in declared.items() if spec.metadata.get("report"))
    for given in sorted(settings):
        if given not in declared:
            raise InvalidInput(
                f"{given!r} is not a setting of the {importer.mode.label} mode; an import "
                f"takes its report's settings: {', '.join(report)}.",
                field=given,
            )
        if given not in report:
            raise InvalidInput(
                f"{given} describes how the judgments were collected, which the file decides; "
                f"an import takes only the report's settings: {', '.join(report)}.",
                field=given,
            )


def _write(
    *, owner: User, mode: str, name: str, rows: ImportRows, settings: dict[str, Any]
) -> Study:
    study = study_create(
        owner=owner,
        name=name or rows.study.name,
        mode=mode,
        settings={**rows.study.settings, **settings},
        description=rows.study.description,
    )
    for step in rows.steps:
        objects = list(step(study))
        if objects:
            _bulk_create(study, objects)
    if rows.answers is not None:
        _submitted(study, rows.answers(study))
    study.status = Study.Status.CLOSED
    study.save(update_fields=["status", "updated_at"])
    return study


def _bulk_create(study: Study, objects: list) -> None:
    model = type(objects[0])
    saved = model.objects.bulk_create(objects, batch_size=_BATCH)
    if any(row.pk is None for row in saved):
        # A backend that does not return ids from bulk inserts: the study is new, so the
        # model's rows of it in id order end with exactly the ones just written.
        ids = list(model.objects.filter(study=study).order_by("id").values_list("id", flat=True))
        for row, pk in zip(objects, ids[-len(objects) :], strict=True):
            row.pk = pk


def _submitted(study: Study, answers: list[Answer]) -> None:
    """Write each answer as a submitted assignment with its judgment."""
    now = timezone.now()
    leases = [
        Assignment(
            participant=answer.participant,
            item=answer.item,
            status=Assignment.Status.SUBMITTED,
            served_at=now,
            expires_at=now,
            submitted_at=now,
        )
        for answer in answers
    ]
    Assignment.objects.bulk_create(leases, batch_size=_BATCH)
    if any(lease.pk is None for lease in leases):
        ids = (
            Assignment.objects.filter(item__study=study).order_by("id").values_list("id", flat=True)
        )
        for lease, pk in zip(leases, ids, strict=True):
            lease.pk = pk
    Judgment.objects.bulk_create(
        [
            Judgment(
                study=study,
                item=answer.item,
                participant=answer.participant,
                assignment=lease,
                part=0,
                payload=answer.payload,
                result=dict(answer.result),
                dwell_ms=0,
            )
            for answer, lease in zip(answers, leases, strict=True)
        ],
        batch_size=_BATCH,
    )
