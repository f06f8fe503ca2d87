"""The error-span export: one row per judged caption (score, counts, weighted errors).

The export package gives a mode one table (``Export.columns`` and one ``query``), so the
per-span table the issue asks for is not a second file yet: each row carries its marks as
a JSON list (``spans``: start, end, text, severity, category, note, omission), from which
one row per span is one ``explode`` away. A second table needs the package to accept
several ``(name, columns, query)`` per mode.
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
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        caption_id = sql.int("i.spec", "caption")
        spans = (
            "(j.payload -> 'spans')::text"
            if sql.postgresql
            else "json_extract(j.payload, '$.spans')"
        )
        return (
            f"SELECT {JUDGMENT_SELECT}, i.id, c.id, im.name, c.system, c.text, "
            f"{sql.float('j.payload', 'score')}, {sql.bool('j.payload', 'unusable')}, "
            f"{sql.int('j.result', 'minor')}, {sql.int('j.result', 'major')}, "
            f"{sql.int('j.result', 'omissions')}, {sql.float('j.result', 'weighted')}, "
            f"{spans}, {JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_item i ON i.id = j.item_id "
            f"LEFT JOIN annotation_caption c ON c.id = {caption_id} "
            "LEFT JOIN annotation_image im ON im.id = i.image_id "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )
