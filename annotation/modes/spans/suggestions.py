"""ESA-AI suggestions: pre-filled spans from a judge or a metric (Zouhar et al. 2025),
read into the items of an open error-span study.

An item-file importer (``annotation/modes/importing.py``): it reads and checks the file
and returns the items with their new specs, unsaved; ``services/imports/item_files.py``
saves them. (Published error-span data, MQM TSV and ESA campaign CSV, become closed
studies through the mode's release importer, ``importers.py``.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from annotation import filelimits
from annotation.errors import InvalidInput
from annotation.models import Caption, Item, Study
from annotation.modes.importing import ItemFileImporter, ItemUpdates
from annotation.modes.spans.protocol import CAPTION
from annotation.text import json_problem
from rubrics import spans as rules

#: Largest suggestions file read (a few hundred bytes a caption: far past any study).
MAX_SUGGESTION_BYTES = 64 << 20
_SOURCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,59}$")
#: Bad lines named in one refusal, at most.
_MAX_PROBLEMS = 20


class SpanSuggestionsImporter(ItemFileImporter):
    """Reads the spans a judge or metric ``source`` suggests, from JSON Lines keyed by caption.

    Each line: ``{"caption_id": <id>, "spans": [{"start", "end", "severity", "category",
    "text"?, "note"?}]}``, offsets in code points as the page's marks. Every span is checked
    as an annotator's mark is (inside the text, in the study's categories, no overlap unless
    the study allows it, at most ``max_spans``), so accepting all of a caption's suggestions
    is always a valid answer. They are kept in the item's spec (``suggestions``, each with
    an id ``<source>:<caption>:<n>`` a judgment's decisions refer to); importing a source
    again replaces that source's suggestions of the captions listed. The whole file is
    checked first: a bad line changes nothing.
    """

    name = "span-suggestions"
    options = ("source",)
    wrong_study = "Suggestions are for error-span studies only."

    def read(self, study: Study, path: Path, *, source: str = "", **options: Any) -> ItemUpdates:
        config = self.mode.settings(study)
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
                "The study has no items yet: open it first "
                "(suggestions are stored with its items).",
                field="study",
            )
        found = _suggestions(path, items, config, source)
        changed = []
        for caption, suggestions in found.items():
            item = items[caption]
            kept = [s for s in item.spec.get("suggestions", []) if s.get("source") != source]
            item.spec = {**item.spec, "suggestions": kept + suggestions}
            changed.append(item)
        captions, count = len(found), sum(len(s) for s in found.values())
        return ItemUpdates(
            items=changed,
            fields=("spec",),
            summary=(
                f"Stored {count:,} suggestions from {source} "
                f"for {captions:,} captions of study {study.pk}.",
            ),
            details={"source": source, "captions": captions, "suggestions": count},
        )


def _suggestions(
    path: Path, items: dict[Any, Item], config: Any, source: str
) -> dict[int, list[dict[str, Any]]]:
    """Every line's checked suggestions by caption id; InvalidInput naming the bad lines."""
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
            if len(problems) >= _MAX_PROBLEMS:
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
    return found


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
