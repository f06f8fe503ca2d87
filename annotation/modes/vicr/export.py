"""The VICR export: one row per rating of every phase, with its pool and the player's status.

Tutorial and probation ratings are kept (the ``phase`` column, the kind of the item rated,
says which); ``final_view`` marks the rows of the paper's final view.
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
from annotation.modes.vicr.protocol import GAME


class VicrExport(Export):
    row_unit = "rating (tutorial, probation and game)"
    exclusion_rules = (
        "Tutorial, probation and catch-trial ratings never enter the dataset (phase column); "
        "the final view holds game ratings of players whose status is game and that are not "
        "flagged (a player who fails the catch-trial rule has every rating flagged)."
    )

    def columns(self) -> list[ExportColumn]:
        return [
            *judgment_export_columns(),
            ExportColumn("phase", "str", "tutorial, probation, game or catch (only game is data)."),
            ExportColumn("attempt", "int", "Probation attempt (1, 2, ...); 0 outside probation."),
            ExportColumn("caption_id", "int", "Id of the caption rated (the pair).", "captions"),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("system", "str", "System that wrote the caption (Human for people)."),
            ExportColumn(
                "caption", "str", "Caption as shown (a catch trial: the transformed text)."
            ),
            ExportColumn("rating", "int", "Rating, 1 (worst) to scale_levels (best)."),
            ExportColumn("points", "int", "Points the rating earned (Algorithm 1 or the truth)."),
            ExportColumn("truth", "int", "Tutorial and probation: the expert rating."),
            ExportColumn(
                "consensus", "int", "Game: the consensus of the pool when rated (empty: none)."
            ),
            ExportColumn("pool_size", "int", "Game: ratings in the consensus pool when rated."),
            ExportColumn("pool_human", "int", "Game: of which earlier human game ratings."),
            ExportColumn("pool_primed", "int", "Game: of which primed ratings."),
            ExportColumn("score_after", "int", "The player's running score after the rating."),
            ExportColumn("player_status", "str", "The player's phase now (game: good standing)."),
            ExportColumn(
                "final_view",
                "bool",
                "In the paper's final view: a game rating, not excluded, of a player in game.",
            ),
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        result = [
            sql.int("j.result", key)
            for key in (
                "points",
                "truth",
                "consensus",
                "pool_size",
                "pool_human",
                "pool_primed",
                "score_after",
            )
        ]
        return (
            # Ratings store their probation attempt; ratings stored before that was kept
            # have it as the lease's round (a retry used to be a new round).
            f"SELECT {JUDGMENT_SELECT}, i.kind, "
            f"COALESCE({sql.int('j.result', 'attempt')}, a.round), "
            f"c.id, im.name, c.system, COALESCE({sql.text('i.spec', 'catch', 'text')}, c.text), "
            f"{sql.int('j.payload', 'rating')}, {', '.join(result)}, p.status, "
            f"(i.kind = '{GAME}' AND NOT j.excluded AND p.status = '{GAME}'), "
            f"{JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_assignment a ON a.id = j.assignment_id "
            "JOIN annotation_item i ON i.id = j.item_id "
            f"LEFT JOIN annotation_caption c ON c.id = {sql.int('i.spec', 'caption_id')} "
            "LEFT JOIN annotation_image im ON im.id = c.image_id "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )
