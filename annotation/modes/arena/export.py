"""The arena export: one row per battle judgment, gold battles included (``gold`` column).

Sides are stated twice on purpose: ``left`` says which caption was shown on the left, and
``outcome`` is as the worker answered (``a``: the left caption is better), while ``winner``
restates it in the canonical order of the row (``caption_a`` / ``system_a``), which is what
the leaderboard fits.
"""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from annotation.modes.arena.protocol import CATCH, CRITERION_NAMES
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


class ArenaExport(Export):
    row_unit = "battle judgment"
    exclusion_rules = (
        "Gold battles (gold = true) check the worker and never enter the leaderboard; a "
        "worker who misses more than the study's share of them has every judgment flagged "
        "excluded (kept here, with the reason)."
    )

    def columns(self) -> list[ExportColumn]:
        return [
            *judgment_export_columns(),
            ExportColumn("item_id", "int", "Id of the battle."),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("system_a", "str", "System of caption A (canonical order)."),
            ExportColumn("system_b", "str", "System of caption B (gold: the altered copy)."),
            ExportColumn("caption_a_id", "int", "Id of caption A.", "captions"),
            ExportColumn("caption_b_id", "int", "Id of caption B (gold: the real caption's)."),
            ExportColumn("caption_a", "str", "Text of caption A."),
            ExportColumn("caption_b", "str", "Text of caption B as shown (gold: altered)."),
            ExportColumn("left", "str", "Which caption was shown on the left: a or b."),
            ExportColumn(
                "outcome", "str", "As answered: a (left better), b (right), tie, bothbad."
            ),
            ExportColumn(
                "winner",
                "str",
                "In canonical order, LMArena's names: model_a, model_b, tie, tie (bothbad).",
            ),
            *[
                ExportColumn(
                    f"criterion_{key}",
                    "int",
                    f"{label}: -2..2, positive when caption A is better (empty: not asked).",
                )
                for key, label in CRITERION_NAMES.items()
            ],
            ExportColumn("pair_probability", "float", "Design probability of the system pair."),
            ExportColumn("gold", "bool", "A gold battle (a caption against an alteration)."),
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        criteria = ", ".join(sql.int("j.result", "criteria", key) for key in CRITERION_NAMES)
        id_a = f"COALESCE({sql.int('i.spec', 'caption_a')}, {sql.int('i.spec', 'caption_id')})"
        id_b = f"COALESCE({sql.int('i.spec', 'caption_b')}, {sql.int('i.spec', 'caption_id')})"
        return (
            f"SELECT {JUDGMENT_SELECT}, i.id, im.name, "
            f"COALESCE({sql.text('i.spec', 'system_a')}, ca.system), "
            f"COALESCE({sql.text('i.spec', 'system_b')}, 'gold alteration'), "
            f"ca.id, cb.id, ca.text, COALESCE({sql.text('i.spec', 'catch', 'text')}, cb.text), "
            f"{sql.text('j.payload', 'left')}, {sql.text('j.payload', 'outcome')}, "
            f"{sql.text('j.result', 'winner')}, {criteria}, "
            f"{sql.float('j.result', 'pair_probability')}, (i.kind = '{CATCH}'), "
            f"{JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_item i ON i.id = j.item_id "
            f"LEFT JOIN annotation_caption ca ON ca.id = {id_a} "
            f"LEFT JOIN annotation_caption cb ON cb.id = {id_b} "
            "LEFT JOIN annotation_image im ON im.id = i.image_id "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )
