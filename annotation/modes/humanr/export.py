"""HUMANr's export table: one row per trial, with the sides as shown and the flags.

Every cell comes from the judgment's stored result (what the worker was shown and how it
was scored) joined with the two captions' texts and the lease's status, so the table can
be re-scored without the platform. Flagged trials and unfinished groups stay in the table.
The datasheet's ``agreement.humanr`` (written by ``services.exports`` from the latest
report) holds HUMANr per system with its intervals and its test against the
Human-vs-Human baseline (``systems.<name>.vs_baseline``: p-value, difference and whether
its interval excludes the baseline).
"""

from __future__ import annotations

from typing import Any

from annotation.models import Assignment, Study
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
from annotation.modes.humanr.protocol import CHECK


class HumanrExport(Export):
    row_unit = (
        "trial (a full group: 9 comparisons and 1 attention check; comparisons left over "
        "make shorter groups, each with its check)"
    )
    exclusion_rules = (
        "A failed attention check (oriented answer >= 5) flags every response of its group; "
        "flagged responses and unfinished groups are left out of HUMANr."
    )

    def columns(self) -> list[ExportColumn]:
        return [
            *judgment_export_columns(),
            ExportColumn("group", "int", "Group index (the item's position)."),
            ExportColumn(
                "trial",
                "int",
                "Trial number within the group, from 1 to the group's size (10 in a full "
                "group, fewer in a group of leftover comparisons).",
            ),
            ExportColumn("trial_kind", "str", "comparison or attention_check."),
            ExportColumn("image", "str", "Name of the image shown.", "images"),
            ExportColumn(
                "system", "str", "Compared system (Human: the Human-vs-Human pair; empty: check)."
            ),
            ExportColumn("left_caption_id", "int", "Caption shown on the left.", "captions"),
            ExportColumn("left_caption", "str", "Text of the left caption."),
            ExportColumn("left_system", "str", "System of the left caption."),
            ExportColumn("right_caption_id", "int", "Caption shown on the right.", "captions"),
            ExportColumn("right_caption", "str", "Text of the right caption."),
            ExportColumn("right_system", "str", "System of the right caption."),
            ExportColumn(
                "human_side",
                "str",
                "Side of the human (reference) caption: left or right; for a check, the "
                "side of the image's own caption.",
            ),
            ExportColumn("raw", "int", "Answer, 1 (only left matches) to 9 (only right)."),
            ExportColumn(
                "score",
                "float",
                "Signed score (s - 5) / 4 in [-1, 1] with s the answer oriented so the human "
                "caption is left: negative, the human caption preferred. Empty for checks.",
            ),
            ExportColumn("is_attention_check", "bool", "The trial is the group's check."),
            ExportColumn(
                "attention_check_failed", "bool", "For a check: failed (s >= 5); else empty."
            ),
            ExportColumn(
                "group_finished",
                "bool",
                "The worker finished the group (unfinished groups are left out of HUMANr).",
            ),
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        left = sql.int("j.result", "left_caption_id")
        right = sql.int("j.result", "right_caption_id")
        kind = sql.text("j.result", "kind")
        return (
            f"SELECT {JUDGMENT_SELECT}, {sql.int('j.result', 'group')}, j.part + 1, {kind}, "
            f"{sql.text('j.result', 'image_name')}, {sql.text('j.result', 'system')}, "
            f"{left}, lc.text, {sql.text('j.result', 'left_system')}, "
            f"{right}, rc.text, {sql.text('j.result', 'right_system')}, "
            f"CASE WHEN {sql.bool('j.result', 'reference_on_left')} THEN 'left' ELSE 'right' END, "
            f"{sql.int('j.payload', 'raw')}, {sql.float('j.result', 'value')}, "
            f"({kind} = '{CHECK}'), {sql.bool('j.result', 'check_failed')}, "
            f"(a.status = '{Assignment.Status.SUBMITTED}'), {JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_assignment a ON a.id = j.assignment_id "
            f"LEFT JOIN annotation_caption lc ON lc.id = {left} "
            f"LEFT JOIN annotation_caption rc ON rc.id = {right} "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )
