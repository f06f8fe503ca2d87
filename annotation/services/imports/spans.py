"""ESA-AI suggestions: pre-filled spans from a judge or a metric (Zouhar et al. 2025),
stored in the items of an open error-span study.

(Published error-span data, MQM TSV and ESA campaign CSV, become closed studies through
the spans mode's importer, ``annotation/modes/spans/importers.py``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from annotation import filelimits
from annotation.errors import InvalidInput
from annotation.models import Caption, Item, Study
from annotation.modes import get_mode
from annotation.modes.spans.protocol import CAPTION
from annotation.text import json_problem
from rubrics import spans as rules

_BATCH = 2000


#: Largest suggestions file read (a few hundred bytes a caption: far past any study).
MAX_SUGGESTION_BYTES = 64 << 20
_SOURCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,59}$")


@dataclass(frozen=True)
class SuggestionImport:
    study: Study
    source: str
    captions: int
    suggestions: int


def span_suggestions_import(*, study: Study, path: Path, source: str) -> SuggestionImport:
    """Store the spans a judge or metric ``source`` suggests, from JSON Lines keyed by caption.

    Each line: ``{"caption_id": <id>, "spans": [{"start", "end", "severity", "category",
    "text"?, "note"?}]}``, offsets in code points as the page's marks. Every span is checked
    as an annotator's mark is (inside the text, in the study's categories, no overlap unless
    the study allows it, at most ``max_spans``), so accepting all of a caption's suggestions
    is always a valid answer. They are kept in the item's spec (``suggestions``, each with
    an id ``<source>:<caption>:<n>`` a judgment's decisions refer to); importing a source
    again replaces that source's suggestions of the captions listed. The whole file is
    checked first and written in one transaction: a bad line stores nothing.
    """
    config = get_mode(study.mode).settings(study)
    # A capability, not a mode name: only a mode with a ``suggestions`` setting shows them.
    if not hasattr(config, "suggestions"):
        raise InvalidInput("Suggestions are for error-span studies only.", field="study")
    if not _SOURCE.match(source or ""):
        raise InvalidInput(
            "source: name the judge or metric with 1-60 letters, digits, '.', '_' or '-'.",
            field="source",
        )
    items = {
        item.spec.get("caption"): item
        for item in Item.objects.filter(study=study, kind=CAPTION).only("pk", "spec")
    }
    if not items:
        raise InvalidInput(
            "The study has no items yet: open it first (suggestions are stored with its items).",
            field="study",
        )
    lines = _suggestion_lines(path)
    texts = dict(Caption.objects.filter(pk__in=items).values_list("pk", "text"))
    found: dict[int, list[dict[str, Any]]] = {}
    problems: list[str] = []
    for number, line in lines:
        try:
            caption, marks = _suggestion_line(line, number, items, found)
            clean = rules.validate_judgment(
                texts[caption],
                marks,
                categories=config.category_list(),
                max_spans=config.max_spans,
                allow_overlap=config.allow_overlap,
                require_score=False,
            )
            # Kept in the item's jsonb spec: no NUL, controls or overrides in a note.
            problem = json_problem([span.note for span in clean.spans], "note")
            if problem:
                raise ValueError(problem)
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
            if len(problems) >= 20:
                break
            continue
        found[caption] = [
            {
                "id": f"{source}:{caption}:{n}",
                "source": source,
                "start": span.start,
                "end": span.end,
                "text": span.text,
                "severity": span.severity,
                "category": span.category,
                "note": span.note,
            }
            for n, span in enumerate(clean.spans)
        ]
    if problems:
        raise InvalidInput(f"{path.name}: " + "; ".join(problems), field="file")
    if not found:
        raise InvalidInput(f"{path.name}: no suggestion in the file.", field="file")
    changed = []
    for caption, suggestions in found.items():
        item = items[caption]
        kept = [s for s in item.spec.get("suggestions", []) if s.get("source") != source]
        item.spec = {**item.spec, "suggestions": kept + suggestions}
        changed.append(item)
    with transaction.atomic():
        Item.objects.bulk_update(changed, ["spec"], batch_size=_BATCH)
    return SuggestionImport(
        study=study,
        source=source,
        captions=len(found),
        suggestions=sum(len(s) for s in found.values()),
    )


def _suggestion_lines(path: Path) -> list[tuple[int, str]]:
    try:
        if path.stat().st_size > MAX_SUGGESTION_BYTES:
            raise InvalidInput(
                f"{path.name}: larger than {MAX_SUGGESTION_BYTES >> 20} MB.", field="file"
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path.name}: not UTF-8 text.", field="file") from None
    except OSError as exc:
        raise InvalidInput(
            f"{path.name}: cannot read the file ({exc.strerror}).", field="file"
        ) from None
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _suggestion_line(
    line: str, number: int, items: dict[Any, Item], found: dict[int, Any]
) -> tuple[int, list[Any]]:
    """(caption id, raw marks) of one line; ValueError saying what is wrong."""
    try:
        row = filelimits.loads(line, first_line=number)
    except ValueError as exc:
        raise ValueError(str(exc).split(": ", 1)[-1]) from None
    if not isinstance(row, dict) or set(row) - {"caption_id", "spans"}:
        raise ValueError('each line is an object with "caption_id" and "spans" only')
    caption = row.get("caption_id")
    if isinstance(caption, bool) or not isinstance(caption, int) or caption not in items:
        raise ValueError(f"caption_id {str(caption)[:20]!r} is not a caption of this study")
    if caption in found:
        raise ValueError(f"caption {caption} is listed twice")
    marks = row.get("spans")
    if not isinstance(marks, list):
        raise ValueError('"spans" must be a list of marks')
    if any(isinstance(m, dict) and m.get("omission") for m in marks):
        raise ValueError("a suggestion is a span of the caption, not an omission")
    return caption, marks
