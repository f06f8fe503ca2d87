"""Limits every importer applies to the structure of a file, reported with a line number.

A file can be small and still break a parser: JSON nested ten thousand levels deep exhausts
Python's recursion (``RecursionError`` from ``json``), and a CSV field longer than the csv
module's field limit (131,072 characters) stops its reader (``_csv.Error``). Both are
checked or translated here, so an importer lists them like any other bad row, with the
line, instead of a traceback.
"""

from __future__ import annotations

import csv
import json
import re
from typing import Any

#: Deepest nesting of lists and objects accepted in an imported JSON file. The formats read
#: (COCO captions, THumB lines, Flickr8k-Expert, Pascal-50S) nest four levels at most;
#: Python's json parser recurses once per level and stops near 1,000.
MAX_JSON_DEPTH = 32

_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth_problem(text: str, *, first_line: int = 1) -> str | None:
    """ "line N: ..." if ``text`` nests deeper than ``MAX_JSON_DEPTH``, else None.

    Scans brackets outside strings only (no recursion, linear time); the line is where the
    nesting passes the limit. ``first_line`` is the file line ``text`` starts on.
    """
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                line = first_line + text.count("\n", 0, match.start())
                return (
                    f"line {line}: JSON nested too deeply (more than {MAX_JSON_DEPTH} levels "
                    "of lists or objects inside each other); no import format nests that deep"
                )
        elif token in "]}":
            depth = max(0, depth - 1)
    return None


def loads(text: str, *, first_line: int = 1) -> Any:
    """``json.loads`` that refuses deep nesting first; ValueError names the line."""
    problem = json_depth_problem(text, first_line=first_line)
    if problem:
        raise ValueError(problem)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"line {first_line + exc.lineno - 1}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None


def csv_problem(exc: csv.Error, line: int) -> str:
    """The csv module's error as a line-numbered problem, the field limit said plainly."""
    if "field larger than field limit" in str(exc):
        return (
            f"line {line}: a field is longer than {csv.field_size_limit():,} characters, "
            "the longest one CSV field may be (is a quote left open?)"
        )
    return f"line {line}: malformed CSV ({exc})"
