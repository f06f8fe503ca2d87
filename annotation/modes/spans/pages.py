"""The error-span page: the image, the caption as selectable words, the marks, the score.

The page works without JavaScript: each mark is a row of number fields (start, end in
characters counted from 0), severity and category, and the score a number box. With
``spans.js`` the annotator selects words by mouse, touch or keyboard instead, the marks
are listed as text with Edit and Remove buttons, and the list is posted as JSON in
``spans`` (each mark with its ``text``, so the server checks the offsets).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from annotation import storage
from annotation.models import Assignment, Item, Participant
from annotation.modes.base import Pages
from annotation.modes.spans.protocol import MAX_SPANS_JSON, caption_of, shown_suggestions
from rubrics.spans import SEVERITIES

_NUMBER = re.compile(r"^[0-9]{1,7}(?:\.[0-9]{1,6})?$")
_WORD = re.compile(r"\S+")


def _number(value: Any) -> Any:
    """A form value as an int or float when it is a plain decimal, else as sent (so the
    protocol's check names what was wrong with it) and None when blank."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if _NUMBER.match(text):
        return float(text) if "." in text else int(text)
    return text


def words(text: str) -> list[dict[str, Any]]:
    """The caption cut into words and the spaces between them, with code-point offsets."""
    pieces: list[dict[str, Any]] = []
    at = 0
    for match in _WORD.finditer(text):
        if match.start() > at:
            pieces.append({"text": text[at : match.start()], "word": False})
        pieces.append(
            {"text": match.group(), "word": True, "start": match.start(), "end": match.end()}
        )
        at = match.end()
    if at < len(text):
        pieces.append({"text": text[at:], "word": False})
    return pieces


def caption_html(text: str) -> SafeString:
    """The caption as the page shows it: each word a ``span.w`` with its code-point
    offsets (what the page's script selects by), the spaces between as text, all escaped
    as the template would. Built here, not by a template loop: a detailed caption has
    hundreds of words, and the loop cost several lookups each (issue 48)."""
    return mark_safe(
        "".join(
            f'<span class="w" data-start="{p["start"]}" data-end="{p["end"]}">'
            f"{escape(p['text'])}</span>"
            if p["word"]
            else escape(p["text"])
            for p in words(text)
        )
    )


def _options(values: Any, selected: Any = None) -> SafeString:
    """``<option>`` elements of ``values``, each its own label, ``selected`` marked so,
    escaped as the template would."""
    return _option_list(tuple(values), selected if isinstance(selected, str) else None)


@functools.lru_cache(maxsize=512)
def _option_list(values: tuple[str, ...], selected: str | None) -> SafeString:
    # Kept per process: a study's severities and categories are the same on every page
    # (four lists a page, each escaped value by value, issue 48).
    html = []
    for value in values:
        mark = " selected" if value == selected else ""
        html.append(f'<option value="{escape(value)}"{mark}>{escape(value)}</option>')
    return mark_safe("".join(html))


def fallback_rows(count: int, length: int, severities: str, categories: str) -> SafeString:
    """The ``count`` rows of number fields a mark is given by without JavaScript, each with
    the option lists ``severities`` and ``categories`` (already HTML), as the template's
    loop over them gave: a mark's row is five fields, and at the default of ten rows the
    loop was about a fifth of the page's rendering (issue 48)."""
    row = (
        '\n      <div class="spans-row">\n'
        '        <label>Start <input type="number" name="span-{i}-start" min="0" max="{n}"'
        ' inputmode="numeric"></label>\n'
        '        <label>End <input type="number" name="span-{i}-end" min="1" max="{n}"'
        ' inputmode="numeric"></label>\n'
        '        <label>Severity <select name="span-{i}-severity">{s}</select></label>\n'
        '        <label>Category <select name="span-{i}-category">{c}</select></label>\n'
        '        <label>Note <input type="text" name="span-{i}-note" maxlength="500"></label>\n'
        "      </div>\n      "
    )
    n = int(length)
    return mark_safe(
        "".join(row.format(i=i, n=n, s=severities, c=categories) for i in range(count))
    )


def _marks_json(marks: Any) -> str:
    if isinstance(marks, str):
        return marks if len(marks) <= MAX_SPANS_JSON else "[]"
    return json.dumps(marks or [])


class SpansPages(Pages):
    item_template = "modes/spans/item.html"
    keeps_answers = True

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        data: dict[str, Any] = {
            "score": _number(post.get("score")),
            "unusable": post.get("unusable") in ("on", "true", "1"),
        }
        note = (post.get("omission-note") or "").strip()
        if note:
            data["omission"] = {
                "omission": True,
                "note": note,
                "severity": post.get("omission-severity") or "major",
                "category": post.get("omission-category"),
            }
        # ESA-AI: one radio group per suggestion, "suggestion-<id>" = accept / reject.
        decisions = {
            key.removeprefix("suggestion-"): post.get(key)
            for key in post
            if key.startswith("suggestion-")
        }
        if decisions:
            data["suggestions"] = decisions
        posted = post.get("spans")
        if posted is not None and str(posted).strip():
            data["spans"] = str(posted)
            return data
        # Without JavaScript: numbered rows, a row with no start and no end is unused.
        marks = []
        for i in range(50):
            start, end = post.get(f"span-{i}-start"), post.get(f"span-{i}-end")
            if not (start or "").strip() and not (end or "").strip():
                continue
            marks.append(
                {
                    "start": _number(start),
                    "end": _number(end),
                    "severity": post.get(f"span-{i}-severity"),
                    "category": post.get(f"span-{i}-category"),
                    "note": post.get(f"span-{i}-note") or "",
                }
            )
        data["spans"] = marks
        return data

    def item_context(
        self, assignment: Assignment, part: int, answers: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        participant = assignment.participant
        config = self.mode.settings(participant.study)
        item = assignment.item
        # The caption and its image in one read; the item's image is the caption's (the
        # importer makes one item per caption), read apart only if it ever is not.
        caption = caption_of(item)
        image = caption.image if item.image_id == caption.image_id else item.image
        waited = (timezone.now() - assignment.served_at).total_seconds()
        remaining = max(0.0, float(config.min_seconds) - waited)
        answers = answers or {}
        categories = config.category_list()
        omission = answers.get("omission") or {}  # parse_form's dict, on a refused answer
        source = assignment.item.spec.get("source", "")
        decided = answers.get("suggestions") or {}
        suggestions = [
            {**s, "decision": decided.get(s["id"], "") if isinstance(decided, dict) else ""}
            for s in shown_suggestions(assignment.item, config)
        ]
        severity_options, category_options = _options(SEVERITIES), _options(categories)
        return {
            "caption_text": caption.text,
            "caption_html": caption_html(caption.text),
            "length": len(caption.text),
            "source_text": source,
            "image": image,
            "image_url": storage.display_url(image.display) if image and image.display else "",
            "alt_text": (image.alt_text if image else "") or "Image the caption describes",
            "categories": categories,
            "severities": SEVERITIES,
            "category_options": category_options,
            "max_spans": config.max_spans,
            # Each of the ``max_spans`` fallback rows lists every severity and category: the
            # option lists are built once, the rows by ``fallback_rows`` (issue 48).
            "fallback_rows": fallback_rows(
                config.max_spans, len(caption.text), severity_options, category_options
            ),
            "score": answers.get("score") if answers.get("score") is not None else "",
            "omission": omission,
            "omission_severities": _options(SEVERITIES, omission.get("severity")),
            "omission_categories": _options(categories, omission.get("category")),
            # A refused submission's marks, for the script to list again (JSON text).
            "marks_json": _marks_json(answers.get("spans")),
            "unusable": bool(answers.get("unusable")),
            "suggestions": suggestions,
            "remaining_seconds": math.ceil(remaining * 10) / 10,
            "minimum_seconds": config.min_seconds,
            "captions_done": (participant.state or {}).get("captions", 0),
            # A registered annotator's total (a crowd worker's is the code's count, on the
            # progress line above every item page): each caption is served to a person
            # once, so the study's captions are the most they can judge (issue 46, row 13).
            "captions_total": Item.objects.filter(study_id=participant.study_id).count()
            if participant.source == Participant.Source.ACCOUNT
            else None,
        }
