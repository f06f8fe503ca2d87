"""What a mode's export is: typed, described columns and the SQL computing them.

Part of the mode contract (``annotation/modes/base.py`` re-exports every name here): a
mode's ``export.py`` subclasses ``Export``; the export service
(``annotation/services/exports/``) streams the query's rows into every format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from annotation.models import Study
from annotation.modes.components import ModeOf

#: Types an export column may have; the export service maps them onto Arrow types.
EXPORT_TYPES = ("int", "float", "str", "bool", "timestamp")
_JSON_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ExportColumn:
    """One typed column of a mode's export table; ``description`` goes into the datasheet.

    ``counts`` names what the datasheet counts with the column's distinct values
    (``"participants"``, ``"images"`` or ``"captions"``), empty for none.
    """

    name: str
    type: str
    description: str
    counts: str = ""

    def __post_init__(self):
        if self.type not in EXPORT_TYPES:
            raise ValueError(f"export column {self.name}: unknown type {self.type!r}")


class ExportSql:
    """SQL snippets a mode's export query needs on PostgreSQL and on SQLite.

    The export streams the query's rows without building a model instance (that cost the
    old export 0.03x COPY's speed), so every cell is computed by the database; only JSON
    access differs between the two databases. Keys are code constants (checked), never input.
    """

    def __init__(self, vendor: str):
        self.postgresql = vendor == "postgresql"

    @staticmethod
    def _keys(keys: tuple[str, ...]) -> tuple[str, ...]:
        if not keys or not all(_JSON_KEY.match(key) for key in keys):
            raise ValueError(f"JSON keys must be identifiers: {keys!r}")
        return keys

    def text(self, doc: str, *keys: str) -> str:
        """The JSON value at ``keys`` of the JSON column ``doc``, as text."""
        keys = self._keys(keys)
        if self.postgresql:
            steps = "".join(f" -> '{key}'" for key in keys[:-1])
            return f"({doc}{steps} ->> '{keys[-1]}')"
        return f"json_extract({doc}, '$.{'.'.join(keys)}')"

    def int(self, doc: str, *keys: str) -> str:
        value = self.text(doc, *keys)
        return f"{value}::bigint" if self.postgresql else f"CAST({value} AS INTEGER)"

    def float(self, doc: str, *keys: str) -> str:
        value = self.text(doc, *keys)
        return f"{value}::float8" if self.postgresql else f"CAST({value} AS REAL)"

    def bool(self, doc: str, *keys: str) -> str:
        # SQLite's json_extract already gives 1/0 for JSON true/false.
        value = self.text(doc, *keys)
        return f"{value}::boolean" if self.postgresql else value

    def json(self, doc: str) -> str:
        """A JSON column as JSON text."""
        return f"{doc}::text" if self.postgresql else doc


def judgment_export_columns() -> list[ExportColumn]:
    """The columns every judgment table starts with; ``JUDGMENT_SELECT`` computes them."""
    return [
        ExportColumn("judgment_id", "int", "Id of the judgment; rows are in this order."),
        ExportColumn(
            "participant",
            "str",
            "Pseudonym of the participant (never a user name or crowd worker id; the "
            "participants table maps pseudonyms to crowd ids when the owner asks for them).",
            counts="participants",
        ),
    ]


def judgment_trailing_columns() -> list[ExportColumn]:
    """Timing and exclusion columns every judgment table ends with (``JUDGMENT_TRAILING``)."""
    return [
        ExportColumn("created_at", "timestamp", "When the judgment was stored (UTC)."),
        ExportColumn("dwell_ms", "int", "Server-measured time from showing to answer, in ms."),
        ExportColumn("excluded", "bool", "Excluded from the scores (kept here, flagged)."),
        ExportColumn("exclusion_reason", "str", "Why it is excluded; empty if not."),
        # Issue 40: the estimate weights a judgment by the inverse of its item's chance of
        # going to people, so a reader of the export can too.
        ExportColumn(
            "sampling_probability",
            "float",
            "The chance the judged item was drawn for people by the study's sampling design "
            "(its inverse is the judgment's weight); empty: no design, every item to people.",
        ),
        ExportColumn(
            "sampling_design",
            "str",
            "The design that drew the item: uniform (a random share), uncertainty (chosen by "
            "the judge's uncertainty); empty: none.",
        ),
    ]


#: Select-list SQL of ``judgment_export_columns`` and ``judgment_trailing_columns`` over
#: ``annotation_judgment j`` joined with ``annotation_participant p`` and the judged item
#: (``ji``: its own alias, so that a mode's own join of the item keeps its name).
JUDGMENT_SELECT = "j.id, p.pseudonym"
JUDGMENT_TRAILING = (
    "j.created_at, j.dwell_ms, j.excluded, j.exclusion_reason, "
    "ji.sampling_probability, ji.sampling_design"
)
JUDGMENT_FROM = (
    "annotation_judgment j JOIN annotation_participant p ON p.id = j.participant_id "
    "JOIN annotation_item ji ON ji.id = j.item_id"
)


@dataclass(frozen=True)
class ExportTable:
    """A further table of a mode's export, beside its judgments table (``Export.extra_tables``).

    ``name`` is what a download asks for (``table=<name>``) and the dataset folder's
    ``data/<name>.parquet``; ``label`` what the export form lists; ``row_unit`` what one row
    is (the datasheet). ``columns`` and ``query`` work as ``Export.columns`` and
    ``Export.query``: typed columns, and SQL giving their values in judgment-id order.
    """

    name: str
    label: str
    row_unit: str
    columns: Callable[[], list[ExportColumn]]
    query: Callable[[Study, ExportSql], tuple[str, list[Any]]]


class Export:
    """A mode's export table: typed, described columns and one SQL query computing them.

    The default, for a mode that declares no table of its own: the common judgment columns
    with the payload and the server's result as JSON text. ``extra_tables`` may add tables
    (every format writes them: a download each, a Parquet file each in a dataset folder).
    """

    #: What one row of the table is, and which rows count as data (both go in the datasheet).
    row_unit: ClassVar[str] = "judgment"
    exclusion_rules: ClassVar[str] = ""

    def __init__(self, mode: ModeOf):
        self.mode = mode

    def columns(self) -> list[ExportColumn]:
        """The table's columns, in file order."""
        return [
            *judgment_export_columns(),
            ExportColumn("item_id", "int", "Id of the item judged."),
            ExportColumn("part", "int", "Part of the assignment this answers."),
            ExportColumn("phase", "str", "Kind of the item judged, defined by the mode."),
            ExportColumn("payload", "str", "What the participant submitted (JSON)."),
            ExportColumn("result", "str", "What the server computed (JSON)."),
            *judgment_trailing_columns(),
        ]

    def query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        """SQL and parameters of the rows: one value per column, in order, by judgment id.

        The export streams these rows as they come (``COPY`` on PostgreSQL): the database
        computes every cell, so write joins rather than anything per row in Python.
        """
        return (
            f"SELECT {JUDGMENT_SELECT}, j.item_id, j.part, i.kind, {sql.json('j.payload')}, "
            f"{sql.json('j.result')}, {JUDGMENT_TRAILING} FROM {JUDGMENT_FROM} "
            "JOIN annotation_item i ON i.id = j.item_id WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )

    def study_columns(self, study: Study, *, raw_ids: bool) -> list[ExportColumn]:
        """The columns of ``study``'s table, what the export writes: ``columns`` unless a
        study setting adds a column. ``raw_ids``: the export holds raw crowd ids (the
        owner's request), which a sensitive column (a rater's self-reported vision) must
        never join. ``study_query`` must give the same columns."""
        return self.columns()

    def study_query(self, study: Study, sql: ExportSql, *, raw_ids: bool) -> tuple[str, list[Any]]:
        """``query`` for the columns of ``study_columns``."""
        return self.query(study, sql)

    def extra_tables(self) -> tuple[ExportTable, ...]:
        """Tables the mode exports beside the judgments table. Default: none."""
        return ()
