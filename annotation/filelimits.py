"""Limits every importer applies to the structure of a file, reported with a line number.

A file can be small and still break a parser: JSON nested ten thousand levels deep exhausts
Python's recursion (``RecursionError`` from ``json``), an integer of 5,000 digits is more
than ``int()`` reads (a ValueError with Python's own words), and a CSV field longer than the
csv module's field limit (131,072 characters) stops its reader (``_csv.Error``). They are
checked or translated here, so an importer lists them like any other bad row, with the
line, instead of a traceback. ``field_problems`` puts the fields a reader of a published
format returns through ``annotation.text`` with the row's line (issue 45: a NUL in a
battle or an MQM row reached PostgreSQL, half a surrogate pair the UTF-8 encoder).

A neutral module (text, ``rubrics/`` and nothing of the layers above): the importers of
the services (``services/imports/``) and of the modes (``modes/<mode>/importers.py``) both
read files through it.
"""

from __future__ import annotations

import csv
from collections.abc import Collection
from typing import Any

from annotation.text import text_problem
from rubrics import json_text

#: Deepest nesting of lists and objects accepted in an imported JSON file. The formats read
#: (COCO captions, THumB lines, Flickr8k-Expert, Pascal-50S) nest four levels at most;
#: Python's json parser recurses once per level and stops near 1,000.
MAX_JSON_DEPTH = 32
#: Longest reference kept (characters); a caption is a sentence, not a document.
REFERENCE_MAX = 2000


def json_depth_problem(text: str, *, first_line: int = 1) -> str | None:
    """ "line N: ..." if ``text`` nests deeper than ``MAX_JSON_DEPTH``, else None.

    Scans brackets outside strings only (no recursion, linear time: ``rubrics.json_text``);
    the line is where the nesting passes the limit. ``first_line`` is the file line ``text``
    starts on.
    """
    offset = json_text.too_deep_at(text, MAX_JSON_DEPTH)
    if offset is None:
        return None
    return (
        f"line {json_text.line_at(text, offset, first_line)}: JSON nested too deeply (more "
        f"than {MAX_JSON_DEPTH} levels of lists or objects inside each other); no import "
        "format nests that deep"
    )


def loads(text: str, *, first_line: int = 1) -> Any:
    """``json.loads`` that refuses deep nesting first; ValueError names the line (also for
    bad syntax and an integer too long to read)."""
    problem = json_depth_problem(text, first_line=first_line)
    if problem:
        raise ValueError(problem)
    return json_text.loads(text, first_line=first_line)


def field_problems(
    where: str, fields: dict[str, str | None], *, multiline: Collection[str] = ()
) -> list[str]:
    """``"<where>: <field> <problem>"`` for each text field of a row that
    ``annotation.text`` refuses (a NUL PostgreSQL cannot store, half a surrogate pair no
    UTF-8 database can, controls, bidirectional overrides); None values are absent fields.
    Lengths are the caller's (importers cut long names to their columns)."""
    problems = []
    for name, value in fields.items():
        if value is None:
            continue
        problem = text_problem(value, max_length=None, multiline=name in multiline)
        if problem is not None:
            problems.append(f"{where}: {name} {problem}")
    return problems


def csv_problem(exc: csv.Error, line: int) -> str:
    """The csv module's error as a line-numbered problem, the field limit said plainly."""
    if "field larger than field limit" in str(exc):
        return (
            f"line {line}: a field is longer than {csv.field_size_limit():,} characters, "
            "the longest one CSV field may be (is a quote left open?)"
        )
    return f"line {line}: malformed CSV ({exc})"
