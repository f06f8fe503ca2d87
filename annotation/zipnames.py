"""Zip member names that unpack on every operating system.

Image names come from whoever uploaded the images. Windows refuses device names (``CON``,
``aux.png``, ``COM1.tar.gz``: the part before the first dot, in any case, with any
extension), the characters ``<>:"/\\|?*`` and control characters, and names ending in a dot
or space; Windows and macOS file systems ignore case, so ``a.jpg`` and ``A.JPG`` would
overwrite each other. ``safe_member_names`` maps every name to a safe one, keeps names that
are already safe, and is deterministic (the same set of names gives the same mapping, in
any order), so an export can be compared with the last one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

#: Device names Windows reserves in every folder (with any extension), including the
#: superscript-digit ports Windows also treats as devices.
RESERVED = frozenset(
    {"CON", "PRN", "AUX", "NUL"}
    | {f"{port}{digit}" for port in ("COM", "LPT") for digit in "0123456789¹²³"}
)
_FORBIDDEN = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
#: Longest member name kept: 255 is the usual file-name limit, in UTF-8 bytes on Linux;
#: the margin leaves room for the "~N" that makes a name unique.
MAX_NAME_BYTES = 200


def _safe(name: str) -> str:
    name = unicodedata.normalize("NFC", name)
    name = _FORBIDDEN.sub("_", name).strip(" ")
    # A leading dot hides the file (and ".." climbs out of the folder); trailing dots and
    # spaces are dropped by Windows, so two names could meet after unpacking.
    name = name.lstrip(".").rstrip(". ")
    while len(name.encode()) > MAX_NAME_BYTES:
        stem, dot, ext = name.rpartition(".")
        # Shorten the stem and keep a short extension (".jpg"), else cut the end.
        name = stem[:-1] + "." + ext if dot and stem and len(ext) <= 10 else name[:-1]
    name = name.rstrip(". ") or "image"
    if name.split(".")[0].rstrip(" ").upper() in RESERVED:
        name = "_" + name
    return name


def _numbered(name: str, number: int) -> str:
    stem, dot, ext = name.partition(".")
    return f"{stem}~{number}{dot}{ext}"


def safe_member_names(names: Iterable[str]) -> dict[str, str]:
    """Map each distinct name to a member name safe on Windows, macOS and Linux, unique
    regardless of case; a name safe already is kept as it is.

    Names are taken in sorted order, names already safe first, so a safe name is never
    the one renamed to make room, and the mapping does not depend on the input's order.
    A clash is resolved with ``~2``, ``~3``... before the first dot.
    """
    distinct = sorted(set(names))
    ordered = sorted(distinct, key=lambda n: (_safe(n) != n, n))
    taken: set[str] = set()
    mapping: dict[str, str] = {}
    for original in ordered:
        base = _safe(original)
        candidate, number = base, 1
        while candidate.casefold() in taken:
            number += 1
            candidate = _numbered(base, number)
        taken.add(candidate.casefold())
        mapping[original] = candidate
    return mapping
