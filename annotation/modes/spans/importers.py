"""The spans importer: published error-span data as closed spans studies.

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
instead of an image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation import filelimits
from annotation.errors import InvalidInput
from annotation.models import Caption, Image, Item, Participant, Study
from annotation.modes.importing import Answer, Importer, ImportRows, NewStudy, fileless_image
from annotation.modes.spans.protocol import CAPTION, weighted_errors
from rubrics import span_files
from rubrics.spans import FREITAG_2021

SPAN_FORMATS = ("mqm-tsv", "esa-csv")
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


def _mqm_fields(row: Any) -> dict[str, str | None]:
    return {
        "system": row.system,
        "doc": row.doc,
        "seg_id": row.seg_id,
        "rater": row.rater,
        "category": row.category,
        "severity": row.severity,
        "source": row.source,
        "target": row.target,
        "comment": row.comment,
    }


def read_mqm(path: Path) -> list[_Judged]:
    judged: dict[tuple[str, str, str, str], _Judged] = {}
    rows = span_files.read_mqm_tsv(path)
    # A NUL reaches PostgreSQL as text and jsonb (issue 45): every stored column, checked.
    _storable(
        [
            problem
            for row in rows
            for problem in filelimits.field_problems(
                f"line {row.line}", _mqm_fields(row), multiline=("source", "target", "comment")
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


def read_esa(path: Path, batches: Path) -> list[_Judged]:
    rows = span_files.read_esa_csv(path, batches)
    _storable(
        [
            problem
            for r in rows
            for problem in filelimits.field_problems(
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


class _SpanRows:
    """The judged outputs' rows for a new study, step by step (each once the previous is
    saved): a file-less image per segment, a caption per (segment, system), a participant
    per rater, an item per caption."""

    def __init__(self, mode: Any, judged: list[_Judged]):
        self.mode = mode
        self.judged = judged
        self.images: dict[str, Image] = {}
        self.captions: dict[tuple[str, str], Caption] = {}
        self.raters: dict[str, Participant] = {}
        self.per_item: dict[tuple[str, str], list[_Judged]] = {}
        for unit in judged:
            self.per_item.setdefault((unit.segment, unit.system), []).append(unit)
        self.items: list[Item] = []

    def image_rows(self, study: Study) -> list[Image]:
        for unit in self.judged:
            if unit.segment not in self.images:
                self.images[unit.segment] = fileless_image(
                    study=study, name=unit.segment[:255], source=unit.segment[:500]
                )
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        for unit in self.judged:
            key = (unit.segment, unit.system)
            if key not in self.captions:
                self.captions[key] = Caption(
                    study=study,
                    image=self.images[unit.segment],
                    system=unit.system[:100],
                    raw_text=unit.target,
                    text=unit.target,
                    purpose=Caption.Purpose.STUDY,
                    line=len(self.captions) + 1,
                )
        return list(self.captions.values())

    def rater_rows(self, study: Study) -> list[Participant]:
        self.raters = {
            rater: Participant(
                study=study,
                source=Participant.Source.ACCOUNT,
                external_id=rater[:200],
                state={"imported": True},
            )
            for rater in sorted({unit.rater for unit in self.judged})
        }
        return list(self.raters.values())

    def item_rows(self, study: Study) -> list[Item]:
        self.items = [
            Item(
                study=study,
                kind=CAPTION,
                image=self.images[segment],
                position=position,
                target=len(units),
                judgment_count=len(units),
                spec={
                    "caption": self.captions[(segment, system)].pk,
                    "system": system,
                    "source": units[0].source,
                },
            )
            for position, ((segment, system), units) in enumerate(self.per_item.items())
        ]
        return self.items

    def answers(self, study: Study) -> list[Answer]:
        config = self.mode.settings(study)
        weights = config.weights()
        return [
            Answer(
                item,
                self.raters[unit.rater],
                {"spans": unit.marks, "score": unit.score, "unusable": False},
                {
                    "imported": True,
                    "weighted": weighted_errors({"spans": unit.marks}, config, weights),
                    "minor": sum(m["severity"] == "minor" for m in unit.marks),
                    "major": sum(m["severity"] == "major" for m in unit.marks),
                    "omissions": sum(m["omission"] for m in unit.marks),
                },
            )
            for item, units in zip(self.items, self.per_item.values(), strict=True)
            for unit in units
        ]


class SpanImporter(Importer):
    """An MQM TSV (``mqm-tsv``) or an ESA campaign CSV with its batches (``esa-csv``)."""

    formats = SPAN_FORMATS
    options = ("batches",)

    def read(self, path: Path, fmt: str, *, batches: Path | str | None = None, **options):
        if fmt == "esa-csv" and batches is None:
            raise InvalidInput(
                "esa-csv needs the campaign's batches JSON (the texts): give --batches.",
                field="batches",
            )
        try:
            judged = read_mqm(path) if fmt == "mqm-tsv" else read_esa(path, Path(batches))
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
            # The campaign repository's MQM run is in the same CSV with every score 0: it
            # asked for none, so its table is ordered by the errors, not by a constant.
            if all(not unit.score for unit in judged):
                settings["ranking"] = "mqm"
        built = _SpanRows(self.mode, judged)
        marks = sum(len(unit.marks) for unit in judged)
        return ImportRows(
            study=NewStudy(
                name=path.name,
                settings=settings,
                description=(
                    f"Imported from {path.name} ({fmt}); no images: each item shows its "
                    "source text."
                ),
            ),
            steps=(built.image_rows, built.caption_rows, built.rater_rows, built.item_rows),
            answers=built.answers,
            summary=(
                f"{len(judged)} judgments, {marks} marks, {len(built.per_item)} texts, closed. "
                "No images: each item shows its source text.",
            ),
            details={"judgments": len(judged), "marks": marks},
        )
