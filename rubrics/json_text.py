"""JSON read from a data file, refused with its line instead of Python's own errors.

``json.loads`` fails three ways a published file (or a hostile one) can reach: bad syntax
(``JSONDecodeError``, which has a line), nesting thousands of levels deep (it recurses once
per level and raises ``RecursionError``) and an integer of more digits than ``int()`` reads
(a ``ValueError`` "Exceeds the limit (4300 digits) ...", with no position). Both of the
last are found before or after parsing by linear scans, so every refusal names its line.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

#: Deepest nesting of lists and objects read. The formats read nest a few levels at most
#: (LMArena's conversations: three); Python's parser stops near 1,000.
MAX_DEPTH = 32

# An escape (skipped, so an escaped quote does not end a string), a quote or a bracket: the
# text is read once, in linear time whatever it holds (an unclosed quote backtracks nothing).
_TOKEN = re.compile(r'\\.|["\[\]{}]', re.S)


def too_deep_at(text: str, max_depth: int = MAX_DEPTH) -> int | None:
    """The offset of the ``[`` or ``{`` (outside JSON strings) that nests deeper than
    ``max_depth``, or None. No recursion: it runs before any parser does."""
    depth = 0
    inside = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] == "\\":
            continue
        if token == '"':
            inside = not inside
        elif inside:
            continue
        elif token in "[{":
            depth += 1
            if depth > max_depth:
                return match.start()
        else:
            depth = max(0, depth - 1)
    return None


def line_at(text: str, offset: int, first_line: int = 1) -> int:
    return first_line + text.count("\n", 0, offset)


def loads(text: str, *, first_line: int = 1, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``; ValueError ``"line N: ..."`` when the text is not JSON, nests
    deeper than ``max_depth`` or holds an integer too long to read. ``first_line`` is the
    file line ``text`` starts on."""
    deep = too_deep_at(text, max_depth)
    if deep is not None:
        raise ValueError(
            f"line {line_at(text, deep, first_line)}: JSON nested too deeply (more than "
            f"{max_depth} lists or objects inside each other)"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = first_line + exc.lineno - 1
        raise ValueError(f"line {line}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError:
        raise ValueError(long_number_problem(text, first_line)) from None


def long_number_problem(text: str, first_line: int = 1) -> str:
    """``"line N: ..."`` for the integer ``json`` refused as longer than ``int()`` reads
    (its ValueError says neither where nor in words a reader needs)."""
    limit = sys.get_int_max_str_digits()
    found = re.search(f"[0-9]{{{limit + 1},}}", text)
    line = line_at(text, found.start(), first_line) if found else first_line
    return (
        f"line {line}: a number has more than {limit} digits (no field of a data file holds "
        "one that long)"
    )
