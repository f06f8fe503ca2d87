"""Load published error-span data as closed spans studies, so their scores can be computed.

Two formats (readers in ``rubrics/span_files.py``):

- ``mqm-tsv``: Google's ``wmt-mqm-human-evaluation`` TSV (Freitag et al. 2021), one row per
  error or ``No-error`` row. One judgment per (system, segment, rater) holds that rater's
  marks on that output; the study's weights are Freitag et al.'s (Major 5, Minor 1, Minor
  Fluency/Punctuation 0.1, Non-translation 25), so the report's MQM per caption is the
  published system score. An error marked in the source is an omission (the marked
  source words are its note); an error row with no marker is a mark without a span.
  There is no score (MQM has none).
- ``esa-csv``: the ESA campaign CSV of Kocmi et al. (``wmt-conference/ErrorSpanAnnotation``)
  with its batches JSON (``--batches``: the texts). The campaign's rule is kept: TGT items,
  no tutorial items, no deliberate ``#duplicate`` repeats, the last submission of each
  (login, item). Offsets are the reader's half-open code points; "missing" offsets are
  omissions.

There is no image: each segment gets a file-less image named ``doc#segment`` (MQM) or
``batch#item`` (ESA), and the item's spec holds the source text, which the page shows
instead of an image. A file is read and checked completely before anything is written, and
everything is written in one transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.errors import Forbidden, InvalidInput
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study, User
from annotation.modes import get_mode
from annotation.modes.spans.protocol import CAPTION, weighted_errors
from annotation.services.datasets import fileless_image
from annotation.services.imports import limits
from annotation.services.studies import study_create
from annotation.text import json_problem
from rubrics import span_files
from rubrics import spans as rules
from rubrics.spans import FREITAG_2021

SPAN_FORMATS = ("mqm-tsv", "esa-csv")
_BATCH = 2000
#: Freitag et al.'s weights as the spans settings write them.
MQM_SETTINGS = {
    "major_weight": FREITAG_2021.major,
    "minor_weight": FREITAG_2021.minor,
    "weight_overrides": "Fluency/Punctuation/minor=0.1; Non-translation/*=25",
    "max_spans": 50,
    "allow_overlap": True,
    "min_seconds": 0,
    "target": 1,
}


@dataclass
class _Judged:
    """One rater's judgment of one output, gathered from the file's rows."""

    segment: str
    source: str
    system: str
    target: str
    rater: str
    marks: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None


@dataclass(frozen=True)
class SpanImport:
    study: Study
    judgments: int
    marks: int


def _mark(start, end, text, severity, category, note="") -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "severity": severity.casefold(),
        "category": category,
        "text": text,
        "note": note,
        "omission": start is None,
    }


def _storable(problems: list[str]) -> None:
    """ValueError listing the rows' fields that cannot be stored (at most 20), if any."""
    if problems:
        more = f"; and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ValueError("; ".join(problems[:20]) + more)


def _read_mqm(path: Path) -> list[_Judged]:
    judged: dict[tuple[str, str, str, str], _Judged] = {}
    rows = span_files.read_mqm_tsv(path)
    # A NUL reaches PostgreSQL as text and jsonb (issue 45): every stored column, checked.
    _storable(
        [
            problem
            for row in rows
            for problem in limits.field_problems(
                f"line {row.line}",
                {
                    "system": row.system,
                    "doc": row.doc,
                    "seg_id": row.seg_id,
                    "rater": row.rater,
                    "category": row.category,
                    "severity": row.severity,
                    "source": row.source,
                    "target": row.target,
                    "comment": row.comment,
                },
                multiline=("source", "target", "comment"),
            )
        ]
    )
    for row in rows:
        key = (row.system, row.doc, row.seg_id, row.rater)
        unit = judged.get(key)
        if unit is None:
            unit = judged[key] = _Judged(
                f"{row.doc}#{row.seg_id}", row.source, row.system, row.target, row.rater
            )
        severity = row.severity.casefold()
        if row.span_in == "target":
            unit.marks.append(
                _mark(row.start, row.end, row.span_text, severity, row.category, row.comment)
            )
        elif row.span_in == "source":
            note = f"source: {row.span_text}" if row.span_text else "marked in the source"
            unit.marks.append(_mark(None, None, "", severity, row.category, note))
        elif severity not in FREITAG_2021.zero:
            # An error with no marker (a whole-segment error): kept, with nothing to point at.
            unit.marks.append(_mark(None, None, "", severity, row.category, "no span marked"))
    return list(judged.values())


def _read_esa(path: Path, batches: Path) -> list[_Judged]:
    rows = span_files.read_esa_csv(path, batches)
    _storable(
        [
            problem
            for r in rows
            for problem in limits.field_problems(
                f"line {r.line}",
                {
                    "login": r.login,
                    "system": r.system,
                    "item_id": r.item_id,
                    "sourceText (batches)": r.text.source if r.text else None,
                    "targetText (batches)": r.text.target if r.text else None,
                },
                multiline=("sourceText (batches)", "targetText (batches)"),
            )
        ]
    )
    kept = [
        r
        for r in span_files.latest_judgments(rows)
        if r.item_type == "TGT" and not r.tutorial and not r.duplicate
    ]
    out = []
    for r in kept:
        text = r.text.target if r.text else ""
        marks = [
            _mark(
                s.start,
                s.end,
                "" if s.omission else text[s.start : s.end],
                s.severity,
                "",
                "omission" if s.omission else "",
            )
            for s in r.spans
        ]
        segment = f"{r.text.batch}#{r.item_index}" if r.text else f"{r.login}#{r.item_index}"
        out.append(
            _Judged(
                segment, r.text.source if r.text else "", r.system, text, r.login, marks, r.score
            )
        )
    return out


def dataset_import_spans(
    *, owner: User, path: Path | str, fmt: str, batches: Path | str | None = None, name: str = ""
) -> SpanImport:
    """Load an MQM TSV (``mqm-tsv``) or an ESA campaign CSV with its batches (``esa-csv``)
    as a new CLOSED spans study; nothing is written when the file or the owner is refused."""
    path = Path(path)
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden(f"{owner.username} is not a researcher")
    if fmt not in SPAN_FORMATS:
        raise InvalidInput(
            f"unknown format {fmt!r}; choose one of {', '.join(SPAN_FORMATS)}", field="format"
        )
    if fmt == "esa-csv" and batches is None:
        raise InvalidInput(
            "esa-csv needs the campaign's batches JSON (the texts): give --batches.",
            field="batches",
        )
    try:
        judged = _read_mqm(path) if fmt == "mqm-tsv" else _read_esa(path, Path(batches))
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path.name}: cannot read the file ({exc})", field="file") from exc
    except ValueError as exc:
        raise InvalidInput(f"{path.name}: {exc}", field="file") from exc
    if fmt == "mqm-tsv":
        settings = dict(MQM_SETTINGS)
        categories = sorted({m["category"] for j in judged for m in j.marks if m["category"]})
        settings["categories"] = ", ".join(categories) or "other"
    else:
        settings = {**MQM_SETTINGS, "weight_overrides": "", "categories": "other"}
    now = timezone.now()
    with transaction.atomic():
        study = study_create(owner=owner, name=name or path.name, mode="spans", settings=settings)
        study.description = (
            f"Imported from {path.name} ({fmt}); no images: each item shows its source text."
        )
        images: dict[str, Image] = {}
        for unit in judged:
            if unit.segment not in images:
                images[unit.segment] = fileless_image(
                    study=study, name=unit.segment[:255], source=unit.segment[:500]
                )
        Image.objects.bulk_create(images.values(), batch_size=1000)
        captions: dict[tuple[str, str], Caption] = {}
        for unit in judged:
            key = (unit.segment, unit.system)
            if key not in captions:
                captions[key] = Caption(
                    study=study,
                    image=images[unit.segment],
                    system=unit.system[:100],
                    raw_text=unit.target,
                    text=unit.target,
                    purpose=Caption.Purpose.STUDY,
                    line=len(captions) + 1,
                )
        Caption.objects.bulk_create(captions.values(), batch_size=1000)
        raters = {
            rater: Participant(
                study=study,
                source=Participant.Source.ACCOUNT,
                external_id=rater[:200],
                state={"imported": True},
            )
            for rater in sorted({unit.rater for unit in judged})
        }
        Participant.objects.bulk_create(raters.values())
        per_item: dict[tuple[str, str], list[_Judged]] = {}
        for unit in judged:
            per_item.setdefault((unit.segment, unit.system), []).append(unit)
        items = Item.objects.bulk_create(
            [
                Item(
                    study=study,
                    kind=CAPTION,
                    image=images[segment],
                    position=position,
                    target=len(units),
                    judgment_count=len(units),
                    spec={
                        "caption": captions[(segment, system)].pk,
                        "system": system,
                        "source": units[0].source,
                    },
                )
                for position, ((segment, system), units) in enumerate(per_item.items())
            ],
            batch_size=_BATCH,
        )
        pairs = [
            (item, unit)
            for item, units in zip(items, per_item.values(), strict=True)
            for unit in units
        ]
        leases = Assignment.objects.bulk_create(
            [
                Assignment(
                    participant=raters[unit.rater],
                    item=item,
                    status=Assignment.Status.SUBMITTED,
                    served_at=now,
                    expires_at=now,
                    submitted_at=now,
                )
                for item, unit in pairs
            ],
            batch_size=_BATCH,
        )
        config = get_mode("spans").settings(study)
        weights = config.weights()
        Judgment.objects.bulk_create(
            [
                Judgment(
                    study=study,
                    item=item,
                    participant=raters[unit.rater],
                    assignment=lease,
                    part=0,
                    payload={"spans": unit.marks, "score": unit.score, "unusable": False},
                    result={
                        "imported": True,
                        "weighted": weighted_errors({"spans": unit.marks}, config, weights),
                        "minor": sum(m["severity"] == "minor" for m in unit.marks),
                        "major": sum(m["severity"] == "major" for m in unit.marks),
                        "omissions": sum(m["omission"] for m in unit.marks),
                    },
                    dwell_ms=0,
                )
                for (item, unit), lease in zip(pairs, leases, strict=True)
            ],
            batch_size=_BATCH,
        )
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status", "description", "updated_at"])
    return SpanImport(study, len(judged), sum(len(unit.marks) for unit in judged))


# ---------------------------------------------------------------------------------------
# ESA-AI suggestions: pre-filled spans from a judge or a metric (Zouhar et al. 2025)

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
        row = limits.loads(line, first_line=number)
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
