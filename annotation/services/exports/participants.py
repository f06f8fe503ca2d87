"""The participants table: one row per participant, raw crowd ids only on the owner's
request."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.json as pa_json
from django.db.models import Count

from annotation.models import Participant, Study
from annotation.modes.base import ExportColumn
from annotation.services.exports.common import EXPORT_POOL, _iso

# ---------------------------------------------------------------------------------------
# The participants table


def participant_columns(*, raw_ids: bool = False) -> list[ExportColumn]:
    columns = [
        ExportColumn(
            "participant", "str", "Pseudonym (as in the judgments table).", "participants"
        ),
        ExportColumn("source", "str", "account (registered), prolific or mturk."),
        ExportColumn("status", "str", "Status or phase, defined by the mode."),
        ExportColumn("joined_at", "timestamp", "When the participant first arrived (UTC)."),
        ExportColumn(
            "completed_at",
            "timestamp",
            "Crowd workers: when they earned the completion code (UTC); empty: not (yet).",
        ),
        ExportColumn("completed", "bool", "Whether they earned the completion code."),
        ExportColumn("judgments", "int", "Judgments stored for them."),
        ExportColumn("flag_count", "int", "Integrity events recorded (rate limit, browser...)."),
        ExportColumn("flag_kinds", "str", "Kinds of those events, sorted, ';'-separated."),
    ]
    if raw_ids:
        columns += [
            ExportColumn(
                "worker_id", "str", "Prolific PID or MTurk WorkerId (owner's request only)."
            ),
            ExportColumn(
                "submission_id",
                "str",
                "Prolific SESSION_ID or MTurk assignmentId, to approve or reject.",
            ),
        ]
    return columns


def _participant_batches(
    study: Study, schema: pa.Schema, *, raw_ids: bool
) -> Iterator[pa.RecordBatch]:
    """One query (participants are thousands, not millions); raw ids only on request.
    The rows go through pyarrow's JSON reader, typed by the schema (see below why not
    ``pa.array``)."""
    crowd = {Participant.Source.PROLIFIC, Participant.Source.MTURK}
    fields = ["pseudonym", "source", "status", "created_at", "completed_at", "flags", "n"]
    if raw_ids:
        fields += ["external_id", "external_meta"]
    rows = (
        Participant.objects.filter(study_id=study.pk)
        .annotate(n=Count("judgments"))
        .order_by("id")
        .values_list(*fields)
    )
    lines: list[str] = []
    for row in rows:
        record = dict(zip(fields, row, strict=True))
        flags = [f for f in record["flags"] or [] if isinstance(f, dict)]
        values = {
            "participant": record["pseudonym"],
            "source": record["source"],
            "status": record["status"],
            "joined_at": record["created_at"],
            "completed_at": record["completed_at"],
            "completed": record["completed_at"] is not None,
            "judgments": record["n"],
            "flag_count": len(flags),
            "flag_kinds": ";".join(sorted({str(f.get("kind", "")) for f in flags})),
        }
        if raw_ids:
            is_crowd = record["source"] in crowd
            meta = record["external_meta"] or {}
            values["worker_id"] = record["external_id"] if is_crowd else None
            values["submission_id"] = (
                (meta.get("SESSION_ID") or meta.get("assignmentId")) if is_crowd else None
            )
        lines.append(json.dumps(values, default=_iso) + "\n")
    # pyarrow's JSON reader types the rows by the schema; pa.array() would make pyarrow
    # import pandas when it is installed (about 50 MB, a quarter of the memory budget).
    if not lines:
        yield pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        return
    table = pa_json.read_json(
        io.BytesIO("".join(lines).encode()),
        parse_options=pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="error"
        ),
        memory_pool=EXPORT_POOL,
    )
    for batch in table.to_batches():
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
