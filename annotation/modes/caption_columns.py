"""A mode's own caption data: its caption purposes and its columns of a captions CSV.

Part of the mode contract, like ``importing.py``. The shared captions reader knows
``image``, ``system``, ``caption``, ``description``, ``source`` and ``metric:<name>``; any
other column is the mode's, and so is what it stores: ``Caption.spec``. A mode names its
own purposes besides ``study`` in ``caption_purposes`` (VICR: its tutorial and probation
sets) and reads its columns with a ``CaptionColumns`` subclass, its
``caption_columns_class`` (``CaptionsMode`` gives the defaults: none, and an empty
``spec``). The words the import page says of the mode's columns are its ``import_notes``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from annotation.models import Caption
from annotation.modes.components import ModeOf


class CaptionColumns:
    """Reads a mode's own columns of a captions CSV into ``Caption.spec``.

    ``columns`` names the columns the mode requires and allows for captions of a purpose
    (default: none); ``parse`` reads them from one row, returns what goes into the caption's
    ``spec`` and adds each problem to ``problems`` as ``"<column> <problem>"`` (the reader
    puts the line before it).
    """

    def __init__(self, mode: ModeOf):
        self.mode = mode

    def columns(self, purpose: str) -> tuple[frozenset[str], frozenset[str]]:
        """(required, optional) columns of the mode for captions of ``purpose``."""
        return frozenset(), frozenset()

    def parse(self, purpose: str, cells: dict[str, str], problems: list[str]) -> dict[str, Any]:
        """The ``spec`` of one row's caption, from its ``cells`` (by lowercase column)."""
        return {}


class CaptionsMode:
    """The caption part of the mode contract, with its defaults; ``Mode`` inherits it.

    ``caption_purposes``: ``(value, label)`` of the mode's own purposes besides ``study``
    (each at most 10 characters, ``Caption.purpose``'s length). ``caption_columns_class``:
    its ``CaptionColumns`` subclass.
    """

    caption_purposes: ClassVar[tuple[tuple[str, str], ...]] = ()
    caption_columns_class: ClassVar[type[CaptionColumns]] = CaptionColumns


def caption_columns(mode: ModeOf) -> CaptionColumns:
    """The reader of the mode's own captions CSV columns."""
    return mode.caption_columns_class(mode)


def caption_purposes(mode: ModeOf) -> list[str]:
    """The purposes a study of the mode imports captions for: ``study`` and the mode's own."""
    return [Caption.Purpose.STUDY, *(value for value, _ in mode.caption_purposes)]
