"""THumB's export table: one row per caption per stage, computed by the database.

A judgment scores every caption group of its image; the query unnests the payload's groups
and each group's caption ids, and joins stage-2 rows with the stage-1 judgment they
reviewed, so a researcher sees what stage 2 changed without joining anything.
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
from annotation.modes.thumb.protocol import CHECK, SCORE_FIELDS, STAGE1, STAGE2


class ThumbExport(Export):
    row_unit = "caption per stage (a judgment scores every caption of its image)"
    exclusion_rules = (
        "Every stage is exported. The report's scores are stage 2's (stage 1's in a study "
        "without stage 2): images with stage 1 only are counted and left out. A fluency-only "
        "round's fluency replaces the stages' when neither stage annotator was a native "
        "speaker. Check rows (a third annotator's review of a random sample of stage-2 "
        "scores) measure agreement only; they never change the scores. Catch rows (stage "
        "catch, an automatic catch trial with one altered caption, or a control with none) "
        "are never scored; an annotator who fails the catch-trial rule has every judgment "
        "flagged."
    )

    def columns(self) -> list[ExportColumn]:
        score = "Score of this caption's group in this stage"
        before = "Stage 2 rows: what stage 1 gave for"
        return [
            *judgment_export_columns(),
            ExportColumn(
                "stage",
                "str",
                "stage1, stage2 (a second annotator's review), fluency, check (a third "
                "annotator's review of stage 2, on a random sample of captions), or catch (a "
                "catch trial: never in the scores).",
            ),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("caption_id", "int", "Id of the caption.", "captions"),
            ExportColumn("system", "str", "System that wrote the caption (Human for people)."),
            ExportColumn(
                "caption",
                "str",
                "Caption as shown (THumB-normalised text; a catch trial's altered caption "
                "shows its altered text).",
            ),
            ExportColumn("raw_caption", "str", "Caption as imported."),
            ExportColumn("precision", "float", f"{score}: precision P, 1-5."),
            ExportColumn("recall", "float", f"{score}: recall R, 1-5."),
            ExportColumn("fluency", "float", f"{score}: fluency penalty (deducted, >= 0)."),
            ExportColumn(
                "fluency_errors",
                "str",
                "Fluency error types ticked, as a JSON object: type -> deduction.",
            ),
            ExportColumn("conciseness", "float", f"{score}: conciseness penalty (deducted)."),
            ExportColumn("inclusive", "float", f"{score}: inclusive-language penalty (deducted)."),
            ExportColumn("total", "float", f"{score}: Total = (P + R) / 2 - penalties."),
            ExportColumn(
                "changed",
                "str",
                "Stage 2 and check rows: the fields this review changed from stage 1 (check: "
                "from stage 2), ';'-separated (empty: confirmed).",
            ),
            *[
                ExportColumn(f"stage1_{field}", "float", f"{before} {field}.")
                for field in ("precision", "recall", "fluency", "conciseness", "inclusive")
            ],
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        """One row per caption of each judged caption group: the payload's groups (and each
        group's caption ids) are unnested by the database, stage 2 rows joined with the
        image's first stage-1 judgment (the one stage 2 reviewed, see ``stage1_payload``)."""
        if sql.postgresql:
            unnest = (
                "CROSS JOIN LATERAL jsonb_each(j.payload -> 'captions') AS g(key, value) "
                "CROSS JOIN LATERAL "
                "jsonb_array_elements_text(g.value -> 'caption_ids') AS e(value) "
                "JOIN annotation_caption c ON c.id = e.value::bigint"
            )

            def changed(field: str) -> str:
                return f"(j.result -> 'modified' -> g.key ->> '{field}')::boolean"

            def stage1(field: str) -> str:
                return f"(j1.payload -> 'captions' -> g.key ->> '{field}')::float8"

            errors = "(g.value -> 'fluency_errors')::text"
        else:
            unnest = (
                "JOIN json_each(j.payload, '$.captions') AS g "
                "JOIN json_each(g.value, '$.caption_ids') AS e "
                "JOIN annotation_caption c ON c.id = e.value"
            )

            def changed(field: str) -> str:
                return f"json_extract(j.result, '$.modified.' || g.key || '.{field}')"

            def stage1(field: str) -> str:
                return (
                    f"CAST(json_extract(j1.payload, '$.captions.' || g.key || '.{field}') AS REAL)"
                )

            errors = "json_extract(g.value, '$.fluency_errors')"
        changed_sql = " || ".join(
            f"CASE WHEN {changed(field)} THEN '{field};' ELSE '' END" for field in SCORE_FIELDS
        )
        scores = ", ".join(
            sql.float("g.value", field) if field != "fluency_errors" else errors
            for field in (
                "precision",
                "recall",
                "fluency",
                "fluency_errors",
                "conciseness",
                "inclusive",
                "total",
            )
        )
        before = ", ".join(
            stage1(field)
            for field in ("precision", "recall", "fluency", "conciseness", "inclusive")
        )
        # A catch trial's altered group (annotation/modes/catch.py) shows its altered text.
        altered = f"g.key = {sql.text('i.spec', 'catch', 'key')}"
        shown = f"CASE WHEN {altered} THEN {sql.text('i.spec', 'catch', 'text')} ELSE c.text END"
        query = (
            "WITH first_stage1 AS ("
            " SELECT i1.image_id AS image_id, MIN(j1.id) AS judgment_id"
            " FROM annotation_judgment j1 JOIN annotation_item i1 ON i1.id = j1.item_id"
            f" WHERE j1.study_id = %s AND i1.kind = '{STAGE1}' AND NOT j1.excluded"
            " GROUP BY i1.image_id) "
            f"SELECT {JUDGMENT_SELECT}, i.kind, im.name, c.id, c.system, {shown}, c.raw_text, "
            f"{scores}, "
            f"CASE WHEN i.kind IN ('{STAGE2}', '{CHECK}') THEN rtrim({changed_sql}, ';') END, "
            f"{before}, "
            f"{JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_item i ON i.id = j.item_id "
            "JOIN annotation_image im ON im.id = i.image_id "
            f"{unnest} "
            f"LEFT JOIN first_stage1 s1 ON i.kind = '{STAGE2}' AND s1.image_id = i.image_id "
            "LEFT JOIN annotation_judgment j1 ON j1.id = s1.judgment_id "
            "WHERE j.study_id = %s ORDER BY j.id, c.id"
        )
        return query, [study.pk, study.pk]
