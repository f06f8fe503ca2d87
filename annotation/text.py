"""The one check of text a person types or uploads, before it is stored or shown.

Every text field goes through ``text_problem`` (the study form and API, the settings'
``text`` fields, every field of an import row, every value a participant posts as an
answer, ``clean_answer``): a value is refused when it is longer than its column, or when it
holds a character that no name, caption or description needs and that breaks storage or
misleads a reader:

- control characters (C0, DEL, C1): PostgreSQL refuses NUL in text and in ``jsonb``, and
  the rest are invisible or drive terminals; a multi-line field keeps tab, LF and CR;
- bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they
  reorder what follows them, so "gnp.exe" can show as "exe.png" ("Trojan Source",
  CVE-2021-42574). The left-to-right and right-to-left marks (U+200E, U+200F, U+061C)
  stay allowed: they only set the direction of neighbouring punctuation, cannot reorder a
  run of text, and right-to-left writing needs them;
- unpaired surrogates (U+D800-U+DFFF), which JSON can escape but no UTF-8 database stores;
- in a single-line field, the line and paragraph separators U+2028 and U+2029.

Other format characters (zero-width joiners of emoji and Indic scripts, soft hyphens) are
ordinary text. Values are never changed here; callers strip them where they always did.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible

from annotation.errors import ServiceError
from rubrics import json_text

# The forbidden characters as one class, so a 1,000-character caption is checked in C.
_ALWAYS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_MULTI_LINE = re.compile(f"[{_ALWAYS}]")
_SINGLE_LINE = re.compile(f"[{_ALWAYS}\t\n\r\u2028\u2029]")

_BIDI = {
    0x202A: "LEFT-TO-RIGHT EMBEDDING",
    0x202B: "RIGHT-TO-LEFT EMBEDDING",
    0x202C: "POP DIRECTIONAL FORMATTING",
    0x202D: "LEFT-TO-RIGHT OVERRIDE",
    0x202E: "RIGHT-TO-LEFT OVERRIDE",
    0x2066: "LEFT-TO-RIGHT ISOLATE",
    0x2067: "RIGHT-TO-LEFT ISOLATE",
    0x2068: "FIRST STRONG ISOLATE",
    0x2069: "POP DIRECTIONAL ISOLATE",
}

#: Study descriptions: a TextField, so no column limit; a page of text is plenty.
DESCRIPTION_MAX_CHARS = 10_000


def text_problem(value: str, *, max_length: int | None, multiline: bool = False) -> str | None:
    """What is wrong with ``value`` as a stored text, to follow the field's name, or None.

    E.g. ``"contains the control character U+0000"``; the caller writes
    ``f"{field} {problem}"`` with the field's name and, for an import row, its line.
    ``max_length`` None: the length is checked elsewhere (a form field's own max_length).
    """
    if not isinstance(value, str):
        return "is not text"
    if max_length is not None and len(value) > max_length:
        return f"has {len(value)} characters; the limit is {max_length}"
    found = (_MULTI_LINE if multiline else _SINGLE_LINE).search(value)
    if found is None:
        return None
    code = ord(found.group())
    if code in _BIDI:
        return (
            f"contains the bidirectional control U+{code:04X} ({_BIDI[code]}), which "
            "reorders the text around it"
        )
    if 0xD800 <= code <= 0xDFFF:
        return f"contains U+{code:04X}, half of a surrogate pair (not valid Unicode)"
    if code in (0x2028, 0x2029, 0x0A, 0x0D):
        return f"contains a line break (U+{code:04X}); it must be one line"
    return f"contains the control character U+{code:04X}"


def text_pattern(*, multiline: bool = False, nonblank: bool = False) -> str:
    """What ``text_problem`` accepts, as the OpenAPI schema's ``pattern`` (ECMA-262): no
    forbidden character (lone surrogates left out: JSON and UTF-8 cannot carry them) and,
    ``nonblank``, one character that is not white space (DRF trims, then refuses blank)."""
    forbidden = r"\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069"
    if not multiline:
        forbidden += r"\t\n\r\u2028\u2029"
    if nonblank:
        return rf"^[^{forbidden}]*[^{forbidden}\s][^{forbidden}]*$"
    return rf"^[^{forbidden}]*$"


def clean_text(value: str, *, field: str, max_length: int, multiline: bool = False) -> str:
    """``value`` if it may be stored in ``field``; else ServiceError naming the field."""
    problem = text_problem(value, max_length=max_length, multiline=multiline)
    if problem is not None:
        raise ServiceError(f"{field} {problem}", field=field)
    return value


def shown(value: str, limit: int | None = 80, *, multiline: bool = False) -> str:
    """``value`` as safe to quote in a message: what ``text_problem`` refuses is escaped
    (``\\x00``, ``\\u202e``) and a long value shortened, so the message itself can be stored
    (PostgreSQL refuses NUL) and read in the order it was written. ``limit`` None: kept
    whole; ``multiline``: line breaks and tabs kept (a judge's raw reply stays readable)."""
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    pattern = _MULTI_LINE if multiline else _SINGLE_LINE
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), value)


@deconstructible
class TextValidator:
    """``text_problem`` as a validator of Django form fields and DRF serializer fields."""

    def __init__(self, label: str, *, max_length: int | None = None, multiline: bool = False):
        self.label = label
        self.max_length = max_length
        self.multiline = multiline

    def __call__(self, value: str) -> None:
        problem = text_problem(value, max_length=self.max_length, multiline=self.multiline)
        if problem is not None:
            raise ValidationError(f"The {self.label} {problem}.", code="bad_text")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextValidator) and (
            self.label,
            self.max_length,
            self.multiline,
        ) == (other.label, other.max_length, other.multiline)


#: Deepest nesting of lists and objects in a posted answer. The deepest a mode reads is a
#: list of objects (spans' marks); ``json`` recurses once per level and, thousands deep,
#: raises RecursionError (not ValueError), which was a 500 (issue 45).
MAX_ANSWER_DEPTH = 32


def nesting_problem(value: str, *, max_depth: int = MAX_ANSWER_DEPTH) -> str | None:
    """What is wrong with ``value`` if it nests lists or objects (``[`` and ``{`` outside
    JSON strings) deeper than ``max_depth``, to follow the field's name, or None.

    Linear and without recursion (``rubrics.json_text``, the importers' scan too), so it
    can run before any parser does.
    """
    if json_text.too_deep_at(value, max_depth) is None:
        return None
    return f"is nested too deeply (more than {max_depth} lists or objects inside each other)"


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string of decoded JSON (keys too) with where it is: ``spans[0].note``."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for index, element in enumerate(value):
            yield from _strings(element, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, element in value.items():
            yield f"{path} key", key
            yield from _strings(element, f"{path}.{shown(key, 40)}")


def json_problem(value: Any, path: str) -> str | None:
    """``"<path> <problem>"`` for the first string of decoded JSON ``value`` (keys too) that
    ``text_problem`` refuses (texts may span lines), e.g. ``"spans[0].note contains the
    control character U+0000"``, or None. JSON escapes ``\\u0000`` and half surrogate pairs,
    which PostgreSQL's ``jsonb`` and the UTF-8 encoder refuse once decoded."""
    for where, text in _strings(value, path):
        problem = text_problem(text, max_length=None, multiline=True)
        if problem is not None:
            return f"{where} {problem}"
    return None


def clean_answer(fields: Iterable[tuple[str, list[str]]]) -> None:
    """Refuse a participant's posted answer that no mode may read: ServiceError naming the
    field (``fields``: a form's ``(name, values)``, e.g. ``request.POST.lists()``).

    One check for every mode, before its ``parse_form`` and ``validate`` run: each name and
    value passes ``text_problem`` (values may span lines) and ``nesting_problem``, and a
    value that is a JSON list or object (spans' marks) has every string in it checked too,
    since ``\\u0000`` in JSON is a NUL once decoded and PostgreSQL refuses it in ``jsonb``.
    A value that is not valid JSON is left to the mode, which says what it expected.
    """
    for name, values in fields:
        field = shown(name)
        problem = text_problem(name, max_length=None)
        if problem is not None:
            raise ServiceError(f"The field name {field} {problem}", field=field)
        for value in values:
            problem = text_problem(value, max_length=None, multiline=True) or nesting_problem(value)
            if problem is not None:
                raise ServiceError(f"{field} {problem}", field=field)
            if value.lstrip()[:1] not in ("[", "{"):
                continue
            try:
                decoded = json.loads(value)
            except ValueError:
                continue
            problem = json_problem(decoded, field)
            if problem is not None:
                raise ServiceError(problem, field=field)
