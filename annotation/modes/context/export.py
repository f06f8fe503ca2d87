"""The context export: one row per judgment (each part of a rating), with the description,
its context's name, domain and title, and the part's ratings.

A rater's self-reported vision is a health-related attribute: the ``rater_vision`` column
(blind or low vision, or sighted) is written only when the study's ``export_vision``
setting says so, and never in an export with raw crowd ids, where it would sit beside a
worker's Prolific or MTurk id. The item's kind (the group it was served to) is left out
for the same reason.
"""

from __future__ import annotations

from typing import Any

from annotation.models import Study, Vision
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
from rubrics.context.questions import BEFORE

VISION_COLUMN = "rater_vision"


class ContextExport(Export):
    row_unit = "judgment (the before-image part, and the after-image part of sighted raters)"
    exclusion_rules = (
        "Excluded judgments are kept and flagged (excluded, exclusion_reason); the report "
        "leaves them out, and a rating whose before-image part is excluded entirely."
    )

    def columns(self) -> list[ExportColumn]:
        before = [
            ExportColumn(dim, "int", f"Before the image: {dim}, 1-5 (empty on part 1).")
            for dim in BEFORE
            if dim != "overall"
        ]
        return [
            *judgment_export_columns(),
            ExportColumn("item_id", "int", "Id of the item (a description in one context)."),
            ExportColumn("part", "int", "0: before the image (every rater); 1: after it."),
            ExportColumn("context", "str", "Short name of the context the description is read in."),
            ExportColumn("domain", "str", "The context's domain (news, shopping, ...)."),
            ExportColumn("title", "str", "The page's title or the image's purpose there."),
            ExportColumn("caption_id", "int", "Id of the description rated.", "captions"),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("system", "str", "System that wrote the description."),
            ExportColumn("caption", "str", "The description as shown."),
            ExportColumn("overall", "int", "Overall quality in this context, 1-5 (both parts)."),
            *before,
            ExportColumn("accuracy", "int", "After the image: accuracy, 1-5 (empty on part 0)."),
            ExportColumn("missing", "str", "After the image: what is missing (free text)."),
            *judgment_trailing_columns(),
        ]

    def _with_vision(self, study: Study, raw_ids: bool) -> bool:
        return not raw_ids and bool(self.mode.settings(study).export_vision)

    def study_columns(self, study: Study, *, raw_ids: bool) -> list[ExportColumn]:
        columns = self.columns()
        if self._with_vision(study, raw_ids):
            at = len(judgment_export_columns())
            columns.insert(
                at,
                ExportColumn(
                    VISION_COLUMN,
                    "str",
                    "The rater's self-reported group: blv (blind or low vision) or sighted "
                    "(exported because the study's export_vision setting is on).",
                ),
            )
        return columns

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        return self._query(study, sql, vision=False)

    def study_query(self, study: Study, sql: ExportSql, *, raw_ids: bool) -> tuple[str, list[Any]]:
        return self._query(study, sql, vision=self._with_vision(study, raw_ids))

    def _query(self, study: Study, sql: ExportSql, *, vision: bool) -> tuple[str, list[Any]]:
        blv = "', '".join((Vision.BLIND, Vision.LOW_VISION))
        group = (
            f"CASE WHEN p.vision IN ('{blv}') THEN 'blv' "
            f"WHEN p.vision = '{Vision.SIGHTED}' THEN 'sighted' ELSE '' END, "
            if vision
            else ""
        )
        before = ", ".join(sql.int("j.payload", dim) for dim in BEFORE if dim != "overall")
        return (
            f"SELECT {JUDGMENT_SELECT}, {group}j.item_id, j.part, x.system, "
            f"{sql.text('i.spec', 'domain')}, {sql.text('x.spec', 'title')}, c.id, im.name, "
            f"c.system, c.text, {sql.int('j.payload', 'overall')}, {before}, "
            f"{sql.int('j.payload', 'accuracy')}, {sql.text('j.payload', 'missing')}, "
            f"{JUDGMENT_TRAILING} FROM {JUDGMENT_FROM} "
            "JOIN annotation_item i ON i.id = j.item_id "
            f"LEFT JOIN annotation_caption c ON c.id = {sql.int('i.spec', 'caption')} "
            f"LEFT JOIN annotation_caption x ON x.id = {sql.int('i.spec', 'context')} "
            "LEFT JOIN annotation_image im ON im.id = c.image_id "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )
