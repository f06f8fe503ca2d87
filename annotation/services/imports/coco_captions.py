"""Read COCO results JSON into caption rows, collecting every problem with its line.

The file is ``[{"image_id": ..., "caption": ...}]``, one system per file; the system name is
given by the caller (the command and the page default to the file's stem). Image ids are
mapped to file names by a COCO ``images`` list (``[{"id": 1, "file_name": ...}]``), either
in the same file (``{"images": [...], "annotations": [...]}``, the layout of COCO's own
caption files) or in a separate file (``coco_images``), which then takes precedence. A
string ``image_id`` without a mapping is taken as the image name.

COCO files are for study captions only: a mode's own sets (VICR's tutorial and probation)
need its own columns, which COCO has no place for.

Problems are reported with the line each entry starts on; those of an ``images`` entry also
with its JSON path (``images[3].file_name``), since one line may hold the whole list. A
file with more than ``CAPEVAL_MAX_IMPORT_ROWS`` entries is refused before they are read.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings

from annotation.filelimits import json_depth_problem
from annotation.services.imports.captions import (
    IMAGE_NAME_MAX,
    CaptionRow,
    check_text,
    clean_system,
    field_problem,
)
from annotation.services.imports.sources import ImportTooLarge
from annotation.text import shown
from rubrics import json_text

CAPTIONS_FILE = "the captions file"
# Python's json parses recursively: thousands of nested brackets exhaust the stack.
TOO_DEEP = "nested too deeply to be COCO JSON (a list of flat objects)"


def read_coco(text: str, mapping_text: str, system: str, errors: list[str]) -> list[CaptionRow]:
    """The good entries of the results ``text``; every problem is added to ``errors``.

    ``mapping_text`` is the separate COCO images file ("" when there is none).
    """
    system = clean_system(system)
    if not system:
        errors.append(
            "COCO results need a system name (the command and page default to the "
            "file name without extension)"
        )
    document = _read_json(text, CAPTIONS_FILE, errors)
    if document is _UNREADABLE:
        return []
    id_to_name: dict[Any, str] | None = None
    if isinstance(document, dict):
        if "images" in document:
            id_to_name = _coco_id_map(document["images"], CAPTIONS_FILE, "images", errors)
        entries = document.get("annotations", document.get("results"))
        if not isinstance(entries, list):
            errors.append(
                "line 1: a COCO object needs an 'annotations' (or 'results') list of "
                '{"image_id", "caption"} entries'
            )
            return []
    elif isinstance(document, list):
        entries = document
    else:
        errors.append('line 1: COCO results must be a list of {"image_id", "caption"} entries')
        return []
    limit = settings.CAPEVAL_MAX_IMPORT_ROWS
    if len(entries) > limit:
        raise ImportTooLarge(
            f"the captions file has {len(entries)} entries; the limit per import is {limit} "
            "(CAPEVAL_MAX_IMPORT_ROWS). Import it in several parts."
        )
    if mapping_text:
        mapping_doc = _read_json(mapping_text, "the COCO images file", errors)
        if mapping_doc is _UNREADABLE:
            return []
        if isinstance(mapping_doc, dict):
            id_to_name = _coco_id_map(
                mapping_doc.get("images"), "the COCO images file", "images", errors
            )
        else:
            id_to_name = _coco_id_map(mapping_doc, "the COCO images file", "", errors)
    rows: list[CaptionRow] = []
    for located in entries:
        entry, line = located.value, located.line
        if not isinstance(entry, dict) or "image_id" not in entry or "caption" not in entry:
            errors.append(f'line {line}: each entry needs "image_id" and "caption"')
            continue
        image_id, raw = entry["image_id"], entry["caption"]
        problems: list[str] = []
        if not isinstance(raw, str):
            problems.append("caption is not a string")
        else:
            text_problem = check_text(raw, "caption")
            if text_problem:
                problems.append(text_problem)
        image_ref = ""
        if isinstance(image_id, bool) or not isinstance(image_id, int | str):
            problems.append(f"image_id {shown(repr(image_id))} is neither a number nor a name")
        elif id_to_name is not None and image_id in id_to_name:
            image_ref = id_to_name[image_id]
        elif isinstance(image_id, str) and id_to_name is None:
            image_ref = image_id.strip()
            problem = field_problem(image_ref, "image_id", max_length=IMAGE_NAME_MAX)
            if problem:
                problems.append(problem)
        elif id_to_name is None:
            problems.append(
                f"image_id {image_id} needs a COCO images list to map ids to file names"
            )
        else:
            problems.append(f"image_id {shown(repr(image_id))} is not in the COCO images list")
        if problems:
            errors.append(f"line {line}: " + "; ".join(problems))
            continue
        rows.append(CaptionRow(line=line, image_ref=image_ref, system=system, raw_text=raw))
    return rows


class _Located:
    """A JSON value and the line its text starts on."""

    def __init__(self, value: Any, line: int):
        self.value = value
        self.line = line


def _json_error(exc: json.JSONDecodeError, label: str) -> str:
    return f"line {exc.lineno}: {label} is not valid JSON ({exc.msg} at column {exc.colno})"


#: What ``_read_json`` returns for a file it could not read (``null`` is a JSON document).
_UNREADABLE = object()


def _read_json(text: str, label: str, errors: list[str]) -> Any:
    """The JSON document of ``text``, or ``_UNREADABLE`` with the reason added to ``errors``
    (a syntax error with its line, or nesting too deep), ``label`` naming the file."""
    # Checked before parsing, so the error names the line where the nesting runs too deep.
    problem = json_depth_problem(text)
    if problem:
        errors.append(f"{problem} ({label})")
        return _UNREADABLE
    try:
        return _scan_json(text)
    except json.JSONDecodeError as exc:
        errors.append(_json_error(exc, label))
    except RecursionError:
        errors.append(f"{label}: {TOO_DEEP}")
    except ValueError:
        # An integer longer than int() reads (issue 45): Python's message has no line.
        errors.append(f"{json_text.long_number_problem(text)} ({label})")
    return _UNREADABLE


def _scan_json(text: str) -> Any:
    """Parse JSON, recording the line of each entry of the top-level array (or of the array
    under ``annotations``/``results`` of a top-level object) so errors can cite it."""
    decoder = json.JSONDecoder()
    ws = " \t\n\r"

    def skip(pos: int) -> int:
        while pos < len(text) and text[pos] in ws:
            pos += 1
        return pos

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def array(pos: int) -> tuple[list[_Located], int]:
        items: list[_Located] = []
        pos = skip(pos + 1)
        if pos < len(text) and text[pos] == "]":
            return items, pos + 1
        while True:
            pos = skip(pos)
            value, end = decoder.raw_decode(text, pos)
            items.append(_Located(value, line_of(pos)))
            pos = skip(end)
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == "]":
                return items, pos + 1
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)

    # Validate the whole document first, so the error position is json's own.
    whole = json.loads(text)
    start = skip(0)
    if isinstance(whole, list):
        items, _ = array(start)
        return items
    if isinstance(whole, dict):
        result: dict[str, Any] = {}
        pos = skip(start + 1)
        while pos < len(text) and text[pos] != "}":
            key, pos = decoder.raw_decode(text, pos)
            pos = skip(skip(pos) + 1)  # past ':'
            if key in ("annotations", "results", "images") and text[pos] == "[":
                result[key], pos = array(pos)
            else:
                result[key], pos = decoder.raw_decode(text, pos)
            pos = skip(pos)
            if text[pos] == ",":
                pos = skip(pos + 1)
        return result
    return whole


def _coco_id_map(document: Any, label: str, root: str, errors: list[str]) -> dict[Any, str] | None:
    """Image id -> file name (without folders) from a located ``images`` list.

    ``root`` is the list's JSON path ("images", or "" for a top-level list); problems name
    the entry's line and path, e.g. ``line 7: images[1].file_name has 300 characters``.
    """
    if not isinstance(document, list):
        errors.append(f'{label}: \'images\' must be a list of {{"id", "file_name"}} objects')
        return None
    mapping: dict[Any, str] = {}
    for index, located in enumerate(document):
        entry = located.value
        # Lines of the captions file sort with its rows; another file's are named as such.
        where = f"line {located.line}: "
        if label != CAPTIONS_FILE:
            where = f"{label}, {where}"
        path = f"{root}[{index}]"
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if (
            isinstance(entry_id, bool)
            or not isinstance(entry_id, int | str)
            or not isinstance(entry.get("file_name"), str)
        ):
            errors.append(f"{where}{path} needs an id (a number or a name) and a file_name")
            continue
        name = PurePosixPath(entry["file_name"]).name
        problem = field_problem(name, f"{path}.file_name", max_length=IMAGE_NAME_MAX)
        if problem:
            errors.append(where + problem)
            continue
        mapping[entry_id] = name
    return mapping
