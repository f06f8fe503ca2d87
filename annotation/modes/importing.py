"""What a mode's importer is: a published release or log file read into unsaved rows.

Part of the mode contract, like ``exporting.py``: a mode lists its importers in
``importer_classes`` (set in its ``mode.py``; ``ImportingMode`` gives the default, none),
each an ``Importer`` subclass naming the formats it reads. ``read`` parses and validates the
whole file and returns an ``ImportRows``: the study to create, the steps that give its rows
(images, captions, participants, items, and whatever the release holds), the answers to
store as submitted judgments, and a summary. It writes nothing: one service
(``annotation/services/imports/releases.py``) looks the importer up by the format the user
chose and writes its rows in one transaction, as ``study_open`` writes ``build_items``.

A mode may also offer files that add to an existing study's items (spans: the error spans a
judge or metric suggests): its ``item_file_importer_classes``, each an ``ItemFileImporter``
with a ``name``. Its ``read`` checks the whole file against the study and returns the
changed items, unsaved, in an ``ItemUpdates``; ``annotation/services/imports/item_files.py``
looks it up on the study's mode and saves them in one transaction.

Also here, for the importers of every mode: ``fileless_image`` (an image cited, not stored)
and ``format_error`` (a file refused, with its bad lines).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from django.db.models import Model

from annotation.errors import ServiceError
from annotation.models import Image, Item, Participant, Study
from annotation.modes.components import ModeOf


def format_error(message: str, errors: list[str] | None = None) -> ServiceError:
    """A dataset file that cannot be imported; ``details["errors"]`` lists its bad lines."""
    return ServiceError(message, field="file", details={"errors": errors or []})


def fileless_image(*, study: Study, name: str, source: str = "", alt_text: str = "") -> Image:
    """An unsaved image row that cites an image instead of holding its file (published
    datasets, benchmarks)."""
    return Image(
        study=study,
        name=name,
        sha256="",
        file="",
        display="",
        width=0,
        height=0,
        format="",
        source=source,
        alt_text=alt_text,
    )


@dataclass(frozen=True)
class NewStudy:
    """The study an import creates (closed once its rows are written): its default name
    (the user's ``name`` wins), its mode's settings and its description."""

    name: str
    settings: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class Answer:
    """One imported judgment: stored as a submitted assignment of ``item`` to
    ``participant`` with its judgment (``payload``, and what the server would have
    computed, ``result``)."""

    item: Item
    participant: Participant
    payload: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)


#: A step gives the unsaved rows of one model for the new study, in the order to store
#: them; it may refer to the rows of earlier steps, which are saved (with their ids) by then.
Step = Callable[[Study], Iterable[Model]]


@dataclass(frozen=True)
class ImportRows:
    """What an importer read, unsaved.

    ``steps`` are asked one after the other, each once the rows of the previous one are
    saved; ``answers`` last. ``summary`` is what the file gave, in words, for the command
    to print: its first sentence follows "Study <id> (<name>): ", the others stand alone.
    """

    study: NewStudy
    steps: tuple[Step, ...]
    answers: Callable[[Study], list[Answer]] | None = None
    summary: tuple[str, ...] = ()
    #: What the caller may read besides (counts, what the file lacks).
    details: dict[str, Any] = field(default_factory=dict)


class Importer:
    """Reads the release or log formats named in ``formats`` into a study of its mode.

    Child classes set ``formats`` and implement ``read``; ``options`` names the extra
    files or values a format may need (passed to ``read`` by keyword). The instance
    reaches its mode as ``self.mode``.
    """

    formats: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mode: ModeOf):
        self.mode = mode

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        """Parse and validate the whole file; ``ServiceError`` naming the bad lines."""
        raise NotImplementedError


@dataclass(frozen=True)
class ItemUpdates:
    """What an item-file importer read: the study's items it changed, unsaved, the fields
    to save of them, and a summary in words (whole sentences) for the command to print."""

    items: list[Item]
    fields: tuple[str, ...]
    summary: tuple[str, ...] = ()
    #: What the caller may read besides (counts).
    details: dict[str, Any] = field(default_factory=dict)


class ItemFileImporter:
    """Reads a file that adds to the items of an existing study of its mode.

    Child classes set ``name`` (what a command or page asks for), ``options`` (the values
    ``read`` takes by keyword) and ``wrong_study`` (the refusal, in words, of a study whose
    mode does not offer it), and implement ``read``. The instance reaches its mode as
    ``self.mode``.
    """

    name: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()
    wrong_study: ClassVar[str] = ""

    def __init__(self, mode: ModeOf):
        self.mode = mode

    def read(self, study: Study, path: Path, **options: Any) -> ItemUpdates:
        """Check the whole file against ``study``; ``ServiceError`` naming the bad lines."""
        raise NotImplementedError


class ImportingMode:
    """The importer part of the mode contract, with its defaults.

    ``importer_classes``: the mode's ``Importer`` subclasses (default: none).
    ``item_file_importer_classes``: its ``ItemFileImporter`` subclasses (default: none).
    ``import_notes``: sentences (safe HTML, code constants of the mode's package) the
    study's import page adds to its list of file formats (VICR: its tutorial and
    probation sets). ``Mode`` inherits this class.
    """

    importer_classes: ClassVar[tuple[type[Importer], ...]] = ()
    item_file_importer_classes: ClassVar[tuple[type[ItemFileImporter], ...]] = ()
    import_notes: ClassVar[tuple[str, ...]] = ()


def importers(mode: ModeOf) -> list[Importer]:
    """The mode's importers, instantiated for it (none by default)."""
    return [importer_class(mode) for importer_class in mode.importer_classes]


def item_file_importers(mode: ModeOf) -> list[ItemFileImporter]:
    """The mode's item-file importers, instantiated for it (none by default)."""
    return [importer_class(mode) for importer_class in mode.item_file_importer_classes]


def import_notes(mode: ModeOf) -> tuple[str, ...]:
    """What the study's import page says of the mode's own files (none by default)."""
    return tuple(mode.import_notes)
