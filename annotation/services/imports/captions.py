"""Caption rows, whichever file they come from, and the image each one cites.

A caption cites its image by exact file name, or by the name without extension when exactly
one image of the study (or of this import) has that stem. ``Human`` is matched without regard
to case. ``Caption.line`` is the line of the file the row or JSON entry starts on.

A model has one caption per image in a study, so a second caption by the same system of the
same image is a duplicate; people and curated sets may have several captions of an image,
and only the same text twice is a duplicate. Duplicates are looked for within the file and
against the captions of the same purpose the study already has.

Every text field of a row is checked by ``annotation.text`` (``field_problem``): captions,
alt text and sources may span lines; image names, system names and metric names are one
line; each is at most its column's length. A problem is reported as
``line <n>: <field> <problem>``, ``<field>`` being the CSV column or the COCO key.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings

from annotation.models import Caption, Image, Study
from annotation.text import shown, text_problem

# The columns' limits, so a value never reaches the database longer than its column.
IMAGE_NAME_MAX = Image._meta.get_field("name").max_length
SYSTEM_MAX = Caption._meta.get_field("system").max_length
ALT_TEXT_MAX = Image._meta.get_field("alt_text").max_length
SOURCE_MAX = Image._meta.get_field("source").max_length
METRIC_NAME_MAX = 100  # a key of Caption.metrics, shown as a report column


@dataclass
class CaptionRow:
    """One caption as read from the file, before its image is resolved."""

    line: int
    image_ref: str
    system: str
    raw_text: str
    metrics: dict[str, float] = field(default_factory=dict)
    #: What the study's mode read of its own columns (``Caption.spec``).
    spec: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    source: str = ""


def read_text(path: Path, errors: list[str]) -> str | None:
    """The file's text (UTF-8, a BOM is accepted), or None with the problem in ``errors``."""
    limit = settings.CAPEVAL_MAX_CAPTION_FILE_BYTES
    if path.stat().st_size > limit:
        errors.append(f"{shown(path.name)}: larger than {limit // 1048576} MB")
        return None
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        errors.append(
            f"line {line}: {shown(path.name)} is not UTF-8 (byte 0x{data[exc.start]:02x} at "
            f"position {exc.start}); save it as UTF-8"
        )
        return None


def clean_system(value: str) -> str:
    """The system name as stored: stripped, and ``Human`` whatever its case."""
    value = value.strip()
    return Caption.HUMAN if value.lower() == Caption.HUMAN.lower() else value


def check_text(raw: str, what: str) -> str | None:
    """The problem with a caption's text, or None."""
    if not raw.strip():
        return f"empty {what}"
    problem = field_problem(
        raw, what, max_length=settings.CAPEVAL_MAX_CAPTION_CHARS, multiline=True
    )
    if problem is not None and len(raw) > settings.CAPEVAL_MAX_CAPTION_CHARS:
        # The limit is the deployment's: say which setting raises it.
        problem += " (CAPEVAL_MAX_CAPTION_CHARS, a deployment setting; see the README)"
    return problem


def field_problem(
    value: str, field: str, *, max_length: int, multiline: bool = False
) -> str | None:
    """``"<field> <problem>"`` for a text field of a row, or None (see ``annotation.text``)."""
    problem = text_problem(value, max_length=max_length, multiline=multiline)
    return None if problem is None else f"{field} {problem}"


def resolve_rows(
    rows: list[CaptionRow],
    names: set[str],
    purpose: str,
    study: Study,
    errors: list[str],
    report: Callable[[float, str], None],
) -> list[str]:
    """The image name each row cites (parallel to ``rows``), reporting every problem.

    ``names`` are the images the rows may cite: the study's and this import's. Progress runs
    from 60 to 90 percent.
    """
    by_stem: dict[str, list[str]] = defaultdict(list)
    for name in names:
        by_stem[PurePosixPath(name).stem].append(name)
    seen: dict[tuple, int] = {}
    for caption in Caption.objects.filter(study=study, purpose=purpose).select_related("image"):
        seen[_duplicate_key(caption.image.name, caption.system, caption.raw_text, purpose)] = 0
    resolved: list[str] = []
    for index, row in enumerate(rows):
        report(60 + 30 * index / max(1, len(rows)), f"Checking caption {index + 1}")
        name = row.image_ref if row.image_ref in names else None
        if name is None:
            matches = sorted(by_stem.get(row.image_ref, []))
            if len(matches) == 1:
                name = matches[0]
            elif matches:
                errors.append(
                    f"line {row.line}: image '{shown(row.image_ref)}' is ambiguous "
                    f"({', '.join(matches)}); cite the full file name"
                )
            else:
                errors.append(f"line {row.line}: unknown image '{shown(row.image_ref)}'")
        resolved.append(name or "")
        if name is None:
            continue
        key = _duplicate_key(name, row.system, row.raw_text, purpose)
        if key not in seen:
            seen[key] = row.line
            continue
        where = f"on line {seen[key]}" if seen[key] else "in the study already"
        if len(key) == 2:
            errors.append(
                f"line {row.line}: duplicate: {shown(row.system)} has another caption of "
                f"'{name}' {where} (one caption per system and image)"
            )
        else:
            errors.append(
                f"line {row.line}: duplicate: the same caption of '{name}' by "
                f"{shown(row.system)} is {where}"
            )
    return resolved


def _duplicate_key(image: str, system: str, raw_text: str, purpose: str) -> tuple:
    # A model has one caption per image in a study; people and curated sets may have several.
    if purpose == Caption.Purpose.STUDY and system != Caption.HUMAN:
        return (image, system)
    return (image, system, raw_text.strip())
