"""The error-span export: two tidy tables.

``judgments`` has one row per judged caption (score, counts, weighted errors; the marks
again as JSON in ``spans``, so that table stands alone); ``spans`` (``extra_tables``) has one
row per mark: caption id, start, end, span text, severity, category, note, annotator
pseudonym. The marks are unnested by the database (``jsonb_array_elements`` on PostgreSQL,
``json_each`` on SQLite), so the export still builds no row in Python.
"""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.base import (
    JUDGMENT_FROM,
    JUDGMENT_SELECT,
    JUDGMENT_TRAILING,
    Export,
    ExportColumn,
    ExportSql,
    ExportTable,
    judgment_export_columns,
    judgment_trailing_columns,
)


class SpansExport(Export):
    row_unit = "judged caption"
    exclusion_rules = "Nothing is excluded by the mode; excluded rows are flagged, never dropped."

    def columns(self) -> list[ExportColumn]:
        return [
            *judgment_export_columns(),
            ExportColumn("item_id", "int", "Id of the item (one caption)."),
            ExportColumn("caption_id", "int", "Id of the caption judged.", "captions"),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("system", "str", "System that wrote the caption."),
            ExportColumn("caption", "str", "Text of the caption; offsets index its code points."),
            ExportColumn("score", "float", "ESA score 0-100 (empty: an import without one)."),
            ExportColumn("unusable", "bool", "The whole caption was marked unusable."),
            ExportColumn("minor", "int", "Minor marks (omissions included)."),
            ExportColumn("major", "int", "Major marks (omissions included)."),
            ExportColumn("omissions", "int", "Omission marks (no span, a note)."),
            ExportColumn("weighted", "float", "MQM-weighted errors with the study's weights."),
            ExportColumn(
                "spans",
                "str",
                "The marks as JSON: start, end (half-open code points), text, severity, "
                "category, note, omission.",
            ),
            ExportColumn(
                "suggestions",
                "str",
                "Suggested spans shown (ESA-AI) as JSON: id, source, decision (accepted or "
                "rejected); empty when none was shown.",
            ),
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        caption_id = sql.int("i.spec", "caption")
        spans = (
            "(j.payload -> 'spans')::text"
            if sql.postgresql
            else "json_extract(j.payload, '$.spans')"
        )
        suggestions = (
            "(j.payload -> 'suggestions')::text"
            if sql.postgresql
            else "json_extract(j.payload, '$.suggestions')"
        )
        return (
            f"SELECT {JUDGMENT_SELECT}, i.id, c.id, im.name, c.system, c.text, "
            f"{sql.float('j.payload', 'score')}, {sql.bool('j.payload', 'unusable')}, "
            f"{sql.int('j.result', 'minor')}, {sql.int('j.result', 'major')}, "
            f"{sql.int('j.result', 'omissions')}, {sql.float('j.result', 'weighted')}, "
            f"{spans}, {suggestions}, {JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_item i ON i.id = j.item_id "
            f"LEFT JOIN annotation_caption c ON c.id = {caption_id} "
            "LEFT JOIN annotation_image im ON im.id = i.image_id "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )

    def extra_tables(self) -> tuple[ExportTable, ...]:
        return (
            ExportTable(
                name="spans",
                label="Spans (one row per marked error)",
                row_unit="marked error (span or omission)",
                columns=span_columns,
                query=span_query,
            ),
        )


def span_columns() -> list[ExportColumn]:
    return [
        *judgment_export_columns(),
        ExportColumn("item_id", "int", "Id of the item (one caption)."),
        ExportColumn("caption_id", "int", "Id of the caption marked.", "captions"),
        ExportColumn("mark", "int", "Number of the mark in its judgment (1 = first)."),
        ExportColumn("start", "int", "First code point of the span (empty for an omission)."),
        ExportColumn("end", "int", "Code point after the span (half-open; empty: omission)."),
        ExportColumn("span_text", "str", "The caption's text between start and end."),
        ExportColumn("severity", "str", "minor or major (an import may hold others)."),
        ExportColumn("category", "str", "Error category from the study's list."),
        ExportColumn("note", "str", "The annotator's note (an omission says what is missing)."),
        ExportColumn("omission", "bool", "Something the caption leaves out: no span."),
        ExportColumn("excluded", "bool", "The judgment is excluded (kept here, flagged)."),
        ExportColumn("exclusion_reason", "str", "Why it is excluded; empty if not."),
    ]


def span_query(study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
    """One row per element of the payload's ``spans`` list, in judgment then mark order."""
    if sql.postgresql:
        unnest = (
            "CROSS JOIN LATERAL jsonb_array_elements(j.payload -> 'spans') "
            "WITH ORDINALITY AS s(value, n)"
        )
        number = "s.n"
    else:
        # json_each's key is the list index from 0.
        unnest = "JOIN json_each(j.payload, '$.spans') s"
        number = "s.key + 1"
    return (
        f"SELECT {JUDGMENT_SELECT}, i.id, {sql.int('i.spec', 'caption')}, {number}, "
        f"{sql.int('s.value', 'start')}, {sql.int('s.value', 'end')}, "
        f"{sql.text('s.value', 'text')}, {sql.text('s.value', 'severity')}, "
        f"{sql.text('s.value', 'category')}, {sql.text('s.value', 'note')}, "
        f"{sql.bool('s.value', 'omission')}, j.excluded, j.exclusion_reason "
        f"FROM {JUDGMENT_FROM} JOIN annotation_item i ON i.id = j.item_id {unnest} "
        f"WHERE j.study_id = %s ORDER BY j.id, {number}",
        [study.pk],
    )
