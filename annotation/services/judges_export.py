"""The judges table of a study's export: one row per judge answer, apart from the judgments.

Judges' answers are never rows of the judgments table (that table is what people said);
they are their own table, ``judges`` (``manage.py export_study --table judges``, and
``data/judges.parquet`` with ``judge_alignment.json`` in a dataset zip).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json

from annotation.models import JudgeAnswer, Study
from annotation.modes.base import ExportColumn, Mode
from annotation.services.judges import judges_report

#: Bootstrap resamples of the alignment written into a dataset (fewer than the page's
#: 1,000: the export is a job others wait on, and the intervals are marked with it).
EXPORT_RESAMPLES = 200
_BATCH = 5000


def judge_columns() -> list[ExportColumn]:
    return [
        ExportColumn("answer_id", "int", "Id of the judge's answer; rows are in this order."),
        ExportColumn("judge", "str", "The judge's name (a model or metric, not a person)."),
        ExportColumn("model", "str", "The model behind the judge; empty if not given."),
        ExportColumn("prompt_version", "str", "The prompt version it was asked with."),
        ExportColumn("judge_kind", "str", "vlm, metric or imported."),
        ExportColumn(
            "caption_id", "int", "The caption judged (pairs: the one shown first).", "captions"
        ),
        ExportColumn("caption_b_id", "int", "Pairs: the caption shown second; empty otherwise."),
        ExportColumn("run", "int", "Repeat number of the same question."),
        ExportColumn("answer", "str", "The answer as the mode's rules cleaned it (JSON)."),
        ExportColumn("scores", "str", "The per-unit scores compared with the humans (JSON)."),
        ExportColumn("raw_reply", "str", "What the judge replied, verbatim."),
        ExportColumn("created_at", "timestamp", "When the answer was stored (UTC)."),
    ]


def judge_batches(study: Study, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The study's judge answers in id order, typed by ``schema`` through pyarrow's JSON
    reader (as the participants table, so pyarrow never imports pandas)."""
    rows = (
        JudgeAnswer.objects.filter(judge__study_id=study.pk)
        .order_by("id")
        .values_list(
            "pk",
            "judge__name",
            "judge__model",
            "judge__prompt_version",
            "judge__kind",
            "caption_id",
            "caption_b_id",
            "run",
            "answer",
            "scores",
            "raw_reply",
            "created_at",
        )  # fmt: skip
    )
    names = [c.name for c in judge_columns()]
    lines: list[str] = []
    produced = False
    for row in rows.iterator(chunk_size=_BATCH):
        values: dict[str, Any] = dict(zip(names, row, strict=True))
        values["answer"] = json.dumps(values["answer"], ensure_ascii=False)
        values["scores"] = json.dumps(values["scores"])
        values["created_at"] = values["created_at"].isoformat()
        lines.append(json.dumps(values, ensure_ascii=False) + "\n")
        if len(lines) >= _BATCH:
            yield from _read(lines, schema)
            produced, lines = True, []
    if lines or not produced:
        yield from _read(lines, schema)


def _read(lines: list[str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    if not lines:
        yield pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        return
    table = pa_json.read_json(
        io.BytesIO("".join(lines).encode()),
        parse_options=pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="error"
        ),
    )
    for batch in table.to_batches():
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def judge_alignment_json(study: Study, mode: Mode | None = None) -> str | None:
    """The alignment report as JSON for a dataset zip; None when the study has no judge.
    ``mode``: the study's, as the export job looked it up."""
    if not JudgeAnswer.objects.filter(judge__study_id=study.pk).exists():
        return None
    report = judges_report(study, resamples=EXPORT_RESAMPLES, mode=mode)
    report["bootstrap_resamples"] = EXPORT_RESAMPLES
    return json.dumps(report, indent=2, ensure_ascii=False)
