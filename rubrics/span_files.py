"""Readers for published error-span data: MQM TSV and the ESA campaign CSV (pure; no Django).

- :func:`read_mqm_tsv` -- Google's ``wmt-mqm-human-evaluation`` format (Freitag et al. 2021):
  a header, then ``system, doc, doc_id, seg_id, rater, source, target, category,
  severity[, comment]`` separated by tabs, one row per error (or a ``No-error`` row), the
  error span marked ``<v>...</v>`` in the target (in the source for an omission). The
  reader removes the markers and returns the span as code-point offsets into the clean
  text.
- :func:`read_esa_batches` and :func:`read_esa_csv` -- the ESA campaign of Kocmi et al.
  (``wmt-conference/ErrorSpanAnnotation``, Appraise exports): a headerless CSV ``login,
  system, item index, TGT|BAD, source language, target language, score, item id, flag,
  spans JSON, start time, end time`` and the batches JSON holding the texts.

Conventions found in the published files, and what the readers do with them:

- MQM: two rows (TED en-de line 6444, zh-en line 9622) open ``<v>`` and never close it; the
  span then runs to the end of the text and the row says so (``unclosed=True``). Any other
  marker problem (two spans in one row, ``</v>`` first) is refused.
- ESA: ``end_i`` is inclusive (Appraise highlights characters ``start_i <= i <= end_i``;
  no span in the campaign ends at ``len(text)``, and 89 have ``start_i == end_i``), so the
  reader returns ``end = end_i + 1``. Offsets index the target text as stored (markup such
  as ``<laugh/>`` counted as characters), which lines spans up with word boundaries far
  better than offsets into the text without markup. ``"missing"`` offsets mark an omission.
- ESA logins map to batches by content: a login's batch is the only batch whose items
  agree with every row of that login (item index -> item id, system, TGT/BAD); the
  campaign's own ``itemID`` is not unique across batches.

Every refusal is a ``ValueError`` that names the file line (``line 12: ...``).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from rubrics import json_text

__all__ = [
    "MQM_COLUMNS",
    "MQMRow",
    "read_mqm_tsv",
    "ESASpan",
    "ESARow",
    "ESAText",
    "read_esa_batches",
    "read_esa_csv",
    "latest_judgments",
    "text_source",
]

MQM_COLUMNS = (
    "system",
    "doc",
    "doc_id",
    "seg_id",
    "rater",
    "source",
    "target",
    "category",
    "severity",
)
_OPEN, _CLOSE = "<v>", "</v>"
ESA_SEVERITIES = ("minor", "major", "undecided")

Source = str | os.PathLike[str] | IO[str]


def _lines(source: Source) -> Iterator[str]:
    if isinstance(source, str | os.PathLike):
        with Path(source).open(encoding="utf-8", newline="") as fh:
            yield from fh
    else:
        yield from source


# ---------------------------------------------------------------------------
# MQM TSV
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MQMRow:
    """One MQM row, markers removed; ``start``/``end`` index ``target`` (or ``source``)."""

    line: int
    system: str
    doc: str
    doc_id: str
    seg_id: str
    rater: str
    source: str
    target: str
    category: str
    severity: str
    comment: str
    span_in: str | None  # "target", "source" (omissions) or None (no marker: No-error)
    start: int | None
    end: int | None
    unclosed: bool = False

    @property
    def span_text(self) -> str:
        if self.span_in is None:
            return ""
        text = self.target if self.span_in == "target" else self.source
        return text[self.start : self.end]


def _strip_markers(text: str, line: int, column: str) -> tuple[str, int | None, int | None, bool]:
    opens, closes = text.count(_OPEN), text.count(_CLOSE)
    if opens == 0 and closes == 0:
        return text, None, None, False
    if opens != 1 or closes > 1:
        raise ValueError(
            f"line {line}: {column} has {opens} <v> and {closes} </v> markers; expected one span"
        )
    start = text.index(_OPEN)
    rest = text[:start] + text[start + len(_OPEN) :]
    if closes == 0:
        return rest, start, len(rest), True
    end = rest.find(_CLOSE)
    if end < start:
        raise ValueError(f"line {line}: {column} closes </v> before it opens <v>")
    return rest[:end] + rest[end + len(_CLOSE) :], start, end, False


def read_mqm_tsv(source: Source) -> list[MQMRow]:
    """Read an MQM TSV (header first); see the module docstring for the format and choices."""
    reader = csv.reader(_lines(source), delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError("line 1: the file is empty (expected the MQM header)") from None
    except csv.Error as exc:
        raise ValueError(f"line 1: {exc}") from None
    names = [h.strip().lower() for h in header]
    if tuple(names[:9]) != MQM_COLUMNS or len(names) > 10:
        raise ValueError(
            f"line 1: expected the columns {', '.join(MQM_COLUMNS)}[, comment], got {header!r}"
        )
    width = len(names)
    rows: list[MQMRow] = []
    try:
        for fields in reader:
            line = reader.line_num
            if len(fields) != width:
                raise ValueError(f"line {line}: {len(fields)} columns, expected {width}")
            system, doc, doc_id, seg_id, rater, src, tgt, category, severity = fields[:9]
            for name, value in (
                ("system", system),
                ("seg_id", seg_id),
                ("rater", rater),
                ("severity", severity),
            ):
                if not value.strip():
                    raise ValueError(f"line {line}: {name} is empty")
            target, t_start, t_end, t_unclosed = _strip_markers(tgt, line, "target")
            clean_source, s_start, s_end, s_unclosed = _strip_markers(src, line, "source")
            if t_start is not None and s_start is not None:
                raise ValueError(f"line {line}: both source and target mark a span")
            if t_start is not None:
                span_in, start, end, unclosed = "target", t_start, t_end, t_unclosed
            elif s_start is not None:
                span_in, start, end, unclosed = "source", s_start, s_end, s_unclosed
            else:
                span_in, start, end, unclosed = None, None, None, False
            rows.append(
                MQMRow(
                    line=line,
                    system=system,
                    doc=doc,
                    doc_id=doc_id,
                    seg_id=seg_id,
                    rater=rater,
                    source=clean_source,
                    target=target,
                    category=category,
                    severity=severity,
                    comment=fields[9] if width == 10 else "",
                    span_in=span_in,
                    start=start,
                    end=end,
                    unclosed=unclosed,
                )
            )
    except csv.Error as exc:
        raise ValueError(f"line {reader.line_num}: {exc}") from None
    if not rows:
        raise ValueError("line 2: the file has a header but no rows")
    return rows


# ---------------------------------------------------------------------------
# ESA campaign
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ESAText:
    """One item of an ESA batch: its texts and whether it is a tutorial item."""

    batch: int
    item_index: int
    item_id: str
    system: str
    item_type: str
    source: str
    target: str
    tutorial: bool


@dataclass(frozen=True)
class ESASpan:
    """One ESA mark: half-open code-point offsets into the target, or an omission (None)."""

    start: int | None
    end: int | None
    severity: str
    error_type: tuple[str, ...] = ()

    @property
    def omission(self) -> bool:
        return self.start is None


@dataclass(frozen=True)
class ESARow:
    """One row of an ESA campaign CSV; ``text`` is set when batches were given."""

    line: int
    login: str
    system: str
    item_index: int
    item_type: str
    source_lang: str
    target_lang: str
    score: float
    item_id: str
    flag: bool
    spans: tuple[ESASpan, ...]
    start_time: float
    end_time: float
    text: ESAText | None = None

    @property
    def tutorial(self) -> bool:
        if self.text is not None:
            return self.text.tutorial
        return "tutorial" in self.item_id

    @property
    def duplicate(self) -> bool:
        """A deliberate repeat of an item to the same annotator (intra-annotator check)."""
        return "#duplicate" in self.item_id


def read_esa_batches(source: Source) -> dict[int, dict[int, ESAText]]:
    """Read an Appraise batches JSON: ``{batch number: {item index: ESAText}}``."""
    data = json_text.loads("".join(_lines(source)))
    if not isinstance(data, list):
        raise ValueError("line 1: expected a list of batches")
    batches: dict[int, dict[int, ESAText]] = {}
    for b, batch in enumerate(data):
        try:
            number = int(batch["task"]["batchNo"])
            items = batch["items"]
            texts = {}
            for item in items:
                tutorial = isinstance(item.get("mqm"), dict) and "tutorial" in item["mqm"]
                text = ESAText(
                    batch=number,
                    item_index=int(item["itemID"]),
                    item_id=str(item["documentID"]),
                    system=str(item["targetID"]),
                    item_type=str(item["itemType"]),
                    source=str(item["sourceText"]),
                    target=str(item["targetText"]),
                    tutorial=tutorial,
                )
                if text.item_index in texts:
                    raise ValueError(f"item index {text.item_index} appears twice")
                texts[text.item_index] = text
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"batch {b}: malformed ({exc})") from None
        if number in batches:
            raise ValueError(f"batch {b}: batch number {number} appears twice")
        batches[number] = texts
    return batches


def _esa_offset(value: Any, line: int, i: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"line {line}: spans[{i}].{name} must be a whole number >= 0, got {value!r}"
        )
    return value


def _esa_spans(raw: str, line: int) -> tuple[ESASpan, ...]:
    try:
        data = json_text.loads(raw)
    except ValueError as exc:
        # The cell's own line 1 is the row's line: name the row.
        raise ValueError(
            f"line {line}: spans are not JSON ({str(exc).split(': ', 1)[-1]})"
        ) from None
    if isinstance(data, dict) and "errors" in data:  # a later Appraise export wraps them
        data = data["errors"]
    if not isinstance(data, list):
        raise ValueError(f"line {line}: spans must be a JSON list")
    spans = []
    for i, span in enumerate(data):
        if not isinstance(span, dict):
            raise ValueError(f"line {line}: spans[{i}] must be an object")
        severity = span.get("severity")
        if severity not in ESA_SEVERITIES:
            raise ValueError(
                f"line {line}: spans[{i}].severity {severity!r} is not one of {ESA_SEVERITIES}"
            )
        error_type = span.get("error_type") or ()
        if isinstance(error_type, str):
            error_type = (error_type,)
        if not all(isinstance(e, str) for e in error_type):
            raise ValueError(f"line {line}: spans[{i}].error_type must be text")
        start, end = span.get("start_i"), span.get("end_i")
        if start == "missing" or end == "missing":
            if start != end:
                raise ValueError(f"line {line}: spans[{i}] is half missing ({start!r}..{end!r})")
            spans.append(ESASpan(None, None, severity, tuple(error_type)))
            continue
        first = _esa_offset(start, line, i, "start_i")
        last = _esa_offset(end, line, i, "end_i")
        if last < first:
            raise ValueError(f"line {line}: spans[{i}] ends ({last}) before it starts ({first})")
        spans.append(ESASpan(first, last + 1, severity, tuple(error_type)))  # end_i inclusive
    return tuple(spans)


def _parse_esa_row(fields: list[str], line: int) -> ESARow:
    if len(fields) != 12:
        raise ValueError(f"line {line}: {len(fields)} columns, expected 12")
    login, system, index, item_type, src_lang, tgt_lang, score, item_id, flag, spans, t0, t1 = (
        fields
    )
    if item_type not in ("TGT", "BAD"):
        raise ValueError(f"line {line}: item type must be TGT or BAD, got {item_type!r}")
    try:
        item_index = int(index)
    except ValueError:
        raise ValueError(f"line {line}: item index {index!r} is not a whole number") from None
    try:
        value = float(score)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise ValueError(f"line {line}: score must be a number from 0 to 100, got {score!r}")
    if flag not in ("True", "False"):
        raise ValueError(f"line {line}: flag must be True or False, got {flag!r}")
    try:
        start_time, end_time = float(t0), float(t1)
    except ValueError:
        raise ValueError(f"line {line}: start and end times must be numbers") from None
    return ESARow(
        line=line,
        login=login,
        system=system,
        item_index=item_index,
        item_type=item_type,
        source_lang=src_lang,
        target_lang=tgt_lang,
        score=value,
        item_id=item_id,
        flag=flag == "True",
        spans=_esa_spans(spans, line),
        start_time=start_time,
        end_time=end_time,
    )


def _match_login(rows: list[ESARow], batches: dict[int, dict[int, ESAText]]) -> int:
    candidates = []
    for number, texts in batches.items():
        if all(
            (t := texts.get(r.item_index)) is not None
            and t.item_id == r.item_id
            and t.system == r.system
            and t.item_type == r.item_type
            for r in rows
        ):
            candidates.append(number)
    if len(candidates) != 1:
        what = "no batch" if not candidates else f"{len(candidates)} batches ({candidates})"
        raise ValueError(
            f"line {rows[0].line}: login {rows[0].login!r} matches {what}; "
            "cannot tell which texts it judged"
        )
    return candidates[0]


def _attach_texts(rows: list[ESARow], batches: dict[int, dict[int, ESAText]]) -> list[ESARow]:
    by_login: dict[str, list[ESARow]] = defaultdict(list)
    for row in rows:
        by_login[row.login].append(row)
    batch_of = {login: _match_login(mine, batches) for login, mine in by_login.items()}
    out = []
    for row in rows:
        text = batches[batch_of[row.login]][row.item_index]
        for i, span in enumerate(row.spans):
            if span.end is not None and span.end > len(text.target):
                raise ValueError(
                    f"line {row.line}: spans[{i}] ends at {span.end - 1} (inclusive), "
                    f"outside the target ({len(text.target)} characters)"
                )
        out.append(replace(row, text=text))
    return out


def read_esa_csv(source: Source, batches: Source | None = None) -> list[ESARow]:
    """Read an ESA campaign CSV (no header); with ``batches`` attach and check the texts.

    Rows are returned as they are in the file, repeats included (a re-submission of the
    same item by the same login appears twice); choosing among them is the caller's rule.
    """
    reader = csv.reader(_lines(source))
    rows: list[ESARow] = []
    try:
        for fields in reader:
            if not fields:
                continue
            rows.append(_parse_esa_row(fields, reader.line_num))
    except csv.Error as exc:
        raise ValueError(f"line {reader.line_num}: {exc}") from None
    if not rows:
        raise ValueError("line 1: the file has no rows")
    if batches is not None:
        rows = _attach_texts(rows, read_esa_batches(batches))
    return rows


def latest_judgments(rows: Iterable[ESARow]) -> list[ESARow]:
    """One row per (login, item index): the one submitted last (end time, then file line).

    Appraise writes a new row when an annotator submits an item again (the campaign has 14
    such repeats, some with a changed score); the last submission is the annotator's answer.
    Order of the result: file order of the kept rows.
    """
    last: dict[tuple[str, int], ESARow] = {}
    for row in rows:
        key = (row.login, row.item_index)
        kept = last.get(key)
        if kept is None or (row.end_time, row.line) >= (kept.end_time, kept.line):
            last[key] = row
    return sorted(last.values(), key=lambda r: r.line)


def text_source(text: str) -> IO[str]:
    """A file-like object over ``text``, for the readers (tests, uploads held in memory)."""
    return io.StringIO(text, newline="")
