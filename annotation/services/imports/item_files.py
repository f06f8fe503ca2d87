"""Add a file's contents to an existing study's items, through its mode's item-file importer.

A mode may offer files that add to the items of a study of its mode (spans: the error spans
a judge or metric suggests), each read by an ``ItemFileImporter`` with a name
(``annotation/modes/importing.py``). This service looks the importer up on the study's
mode, lets it read and check the whole file, and saves the items it changed in one
transaction. A file with any bad line saves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from annotation.errors import InvalidInput
from annotation.models import Item, Study
from annotation.modes import get_mode
from annotation.modes.importing import ItemFileImporter, item_file_importers
from annotation.registry import mode_names

_BATCH = 2000


@dataclass(frozen=True)
class ItemFileImport:
    """A stored item file: the study, and what the importer said of the file."""

    study: Study
    summary: tuple[str, ...]
    details: dict[str, Any]


def item_file_import(
    *, study: Study, path: Path | str, name: str, **options: Any
) -> ItemFileImport:
    """Read ``path`` with the importer ``name`` of the study's mode and save the items it
    changed. ``options`` go to the importer (``source`` for span suggestions). ServiceError
    (nothing saved) for a study whose mode offers no such importer, or a bad file."""
    importer = _importer(study, name)
    updates = importer.read(study, Path(path), **options)
    with transaction.atomic():
        Item.objects.bulk_update(updates.items, list(updates.fields), batch_size=_BATCH)
    return ItemFileImport(study=study, summary=updates.summary, details=updates.details)


def _importer(study: Study, name: str) -> ItemFileImporter:
    for importer in item_file_importers(get_mode(study.mode)):
        if importer.name == name:
            return importer
    # Another mode's importer says which studies it is for.
    for mode_name in mode_names():
        for importer in item_file_importers(get_mode(mode_name)):
            if importer.name == name:
                raise InvalidInput(importer.wrong_study, field="study")
    raise InvalidInput(f"unknown item file {name!r}", field="name")
