"""The context mode's data of a caption, kept in ``Caption.spec``, and the CSV columns that
give it.

A context is a caption of the mode's own purpose ``context``: its ``image`` is the image
that appears there, its ``system`` the context's short name (``news-1``), its ``caption``
the passage around the image (``Caption.raw_text``), and two columns of the mode's own:

- ``domain`` (required): the kind of page, e.g. news, shopping, social media,
  encyclopedia; stored lower-case, so "News" and "news" are one domain of the report;
- ``title`` (required): the page's title or the image's purpose there.

Descriptions are ordinary study captions and have no column of the mode's.
"""

from __future__ import annotations

from typing import Any

from annotation.models import Caption
from annotation.modes.caption_columns import CaptionColumns
from annotation.text import text_problem

CONTEXT = "context"
DOMAIN, TITLE = "domain", "title"
#: The mode's own caption purpose: the contexts the study's descriptions are shown in.
PURPOSES = ((CONTEXT, "Context"),)
#: A domain is a word or two (the report groups by it); a title one line of a page.
DOMAIN_MAX = 40
TITLE_MAX = 300


def domain(caption: Caption) -> str:
    """The context's domain ("" for a caption that is no context)."""
    return caption.spec.get(DOMAIN, "")


def title(caption: Caption) -> str:
    """The context's page title or purpose ("" for a caption that is no context)."""
    return caption.spec.get(TITLE, "")


class ContextCaptionColumns(CaptionColumns):
    """Contexts need ``domain`` and ``title``; descriptions have no column of the mode's."""

    def columns(self, purpose: str) -> tuple[frozenset[str], frozenset[str]]:
        if purpose == CONTEXT:
            return frozenset({DOMAIN, TITLE}), frozenset()
        return frozenset(), frozenset()

    def parse(self, purpose: str, cells: dict[str, str], problems: list[str]) -> dict[str, Any]:
        if purpose != CONTEXT:
            return {}
        spec: dict[str, Any] = {}
        for column, limit in ((DOMAIN, DOMAIN_MAX), (TITLE, TITLE_MAX)):
            # One line each: both are shown as a heading's text, and the report groups by
            # the domain.
            value = cells.get(column, "").strip()
            if not value:
                problems.append(f"{column} is empty (every context needs one)")
                continue
            problem = text_problem(value, max_length=limit)
            if problem is not None:
                problems.append(f"{column} {problem}")
                continue
            spec[column] = value.lower() if column == DOMAIN else value
        return spec
