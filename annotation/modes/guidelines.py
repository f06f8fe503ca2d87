"""Task guidelines (issue 46, row 5): the Markdown a study's participants read on the intro
and one key away on every item page, and from which the judge's default prompt is built,
so that people and judge answer the same question.

A study's own text (``Study.guidelines``, set by its researchers) wins; empty, the mode's
default applies: ``guidelines.md`` in the mode's package (``Mode.default_guidelines``).
Every version is named by a short SHA-256 of its text, stored with each judgment and each
saved judge prompt; the judges' alignment report compares the two.

The text is written by any researcher of the study, members included, and shown to
workers who trust the page: it is rendered with raw HTML off (markup is shown as text),
no images (a page makes no request off the site), and links only to ``http``, ``https``
and ``mailto`` addresses, opened without a referrer. The rendering is markdown-it-py's
CommonMark, which escapes every text and attribute it writes.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from markdown_it import MarkdownIt

#: Most characters of a study's guidelines: several pages of definitions and examples, and
#: with the mode's question still inside a judge prompt's limit (``judge_runs.MAX_PROMPT``).
MAX_CHARS = 15_000
#: Hex digits of the SHA-256 that name a version (48 bits: no two versions of one study
#: collide in practice, and it is short enough to read in a table).
VERSION_DIGITS = 12
FILE_NAME = "guidelines.md"
_SAFE_SCHEMES = ("http:", "https:", "mailto:")


@dataclass(frozen=True)
class Guidelines:
    """A study's guidelines as shown: the Markdown ``text``, its ``html`` (safe to insert),
    its ``version`` and whether it is the mode's ``default``."""

    text: str
    html: str
    version: str
    default: bool


def version_of(text: str) -> str:
    """The short SHA-256 naming this text ("" for no text)."""
    text = normalised(text)
    if not text:
        return ""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:VERSION_DIGITS]


def normalised(text: str) -> str:
    """Line ends as LF and no surrounding blank space: a form's CRLF names the same version."""
    return (text or "").replace("\r\n", "\n").replace("\r", "\n").strip()


def _link_allowed(url: str) -> bool:
    # markdown-it-py has already percent-encoded the URL; a scheme is what precedes the
    # first colon, and a relative link (no colon before a slash) stays on the site.
    lowered = url.strip().lower()
    head = lowered.split("/", 1)[0]
    return ":" not in head or lowered.startswith(_SAFE_SCHEMES)


@cache
def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")  # no request off the site (CSP img-src 'self' would refuse it anyway)
    md.validateLink = _link_allowed

    def link_open(renderer, tokens, idx, options, env):
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return renderer.renderToken(tokens, idx, options, env)

    def heading(renderer, tokens, idx, options, env):
        # One level down: the page's "Guidelines" heading is an h2, so "#" is an h3 under it.
        tokens[idx].tag = f"h{min(int(tokens[idx].tag[1]) + 2, 6)}"
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("heading_open", heading)
    md.add_render_rule("heading_close", heading)
    return md


@lru_cache(maxsize=64)  # every item page and submission asks again for the same text
def render(text: str) -> str:
    """The safe HTML of Markdown ``text`` (see the module doc)."""
    return _renderer().render(normalised(text))


@cache
def package_default(mode_class: type) -> str:
    """The ``guidelines.md`` beside the first class of ``mode_class``'s ancestry whose
    package has one ("" when none has): a mode's subclass keeps its parent's default."""
    for klass in mode_class.__mro__:
        try:
            folder = Path(inspect.getfile(klass)).parent
        except TypeError:  # builtins (object) have no file
            continue
        found = folder / FILE_NAME
        if found.is_file():
            return normalised(found.read_text(encoding="utf-8"))
    return ""


def of_study(own: str, default: str) -> Guidelines:
    """The guidelines a study shows: its ``own`` text, else the mode's ``default``."""
    text = normalised(own) or normalised(default)
    return Guidelines(
        text=text,
        html=render(text) if text else "",
        version=version_of(text),
        default=not normalised(own),
    )
