"""Keep a judge endpoint's API key out of every text the platform records or shows.

A chat-completions server may echo the key it was sent: in an error body ("Incorrect API
key provided: sk-..."), in a reply, URL-encoded (a proxy quoting the request), or
base64-encoded (a Basic header quoted back). Whatever the judge client keeps of a
server's answer (an item's error, its raw reply, a log line) passes through
:class:`Scrubber` first, and only then is cut to length: cutting first would leave the
part of a key before the cut, which no longer equals the key and so escaped the
replacement (issue 45: 33 of 40 characters shown).

What is replaced by ``[key]``:

- the key in every form a server may quote it: as is, URL-encoded (upper- and lower-case
  escapes, ``+`` for a space), JSON- and HTML-escaped, and base64 (standard and URL-safe
  alphabets, at each of the three alignments a key can have inside a longer encoded
  text, without the first and last groups, which mix in the bytes around the key);
- any run of at least :data:`MIN_PIECE` characters that is a piece of one of those forms:
  a key the server cut itself, or a form at the edge of an excerpt. Eight characters of a
  random key are not guessable and are not found in ordinary text by chance.
"""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import quote, quote_plus

__all__ = ["MARK", "MIN_PIECE", "Scrubber", "key_forms"]

MARK = "[key]"
MIN_PIECE = 8


def key_forms(key: str) -> list[str]:
    """The key as a server may echo it, longest first (see the module docstring)."""
    if not key:
        return []
    escaped = quote(key, safe="")
    forms = {key, escaped, quote(key), quote_plus(key), json.dumps(key)[1:-1], html.escape(key)}
    forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), escaped))
    raw = key.encode("utf-8")
    for offset in range(3):
        # Base64 turns 3 bytes into 4 characters: the groups made only of the key's bytes
        # are the same whatever surrounds it, for a given offset of the key in its group.
        end = 4 * ((offset + len(raw)) // 3)
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(encode(bytes(offset) + raw).decode("ascii")[4 if offset else 0 : end])
    return sorted((form for form in forms if form), key=len, reverse=True)


class Scrubber:
    """``scrub(text)``: ``text`` with every form and long piece of ``key`` replaced."""

    __slots__ = ("_forms", "_pieces")

    def __init__(self, key: str):
        self._forms = key_forms(key)
        self._pieces = (
            {f[i : i + MIN_PIECE] for f in self._forms for i in range(len(f) - MIN_PIECE + 1)}
            if len(key) >= MIN_PIECE
            else set()
        )

    @property
    def longest(self) -> int:
        """The longest form's length: how far past a cut a key may reach back into it."""
        return len(self._forms[0]) if self._forms else 0

    def __call__(self, text: str) -> str:
        if not self._forms or not text:
            return text
        for form in self._forms:
            text = text.replace(form, MARK)
        if not self._pieces:
            return text
        covered = bytearray(len(text))
        for i in range(len(text) - MIN_PIECE + 1):
            if text[i : i + MIN_PIECE] in self._pieces:
                covered[i : i + MIN_PIECE] = b"\x01" * MIN_PIECE
        if not any(covered):
            return text
        out, i = [], 0
        while i < len(text):
            if covered[i]:
                while i < len(text) and covered[i]:
                    i += 1
                out.append(MARK)
            else:
                out.append(text[i])
                i += 1
        return "".join(out)

    def excerpt(self, text: str, limit: int) -> str:
        """The first ``limit`` characters of ``text`` scrubbed: scrubbed, then cut.

        Only the part that can reach the excerpt is scanned (a long body costs nothing)."""
        return self(text[: limit + self.longest + MIN_PIECE])[:limit]
