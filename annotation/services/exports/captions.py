"""The ``caption_metrics`` table of every study's export: one row per caption with its
metric scores, one column per metric (issue 26: "nobody can redo the correlations
elsewhere").

The metric lab (``services/metrics.py``) stores each caption's scores in ``Caption.metrics``
under the metric's name, which names its implementation (``"CIDEr (pycocoevalcap)"``;
imported columns such as CLIP-S keep the name they were imported with). Each name becomes
the column ``metric_<name in lower case, runs of other characters as "_">``
(``metric_cider_pycocoevalcap``), numbered when two names would give the same column.

The table is generic: it reads captions, which every mode has, and no mode's judgments, so
it needs no mode's knowledge. It joins the judgments table on ``caption_id`` (THumB, VICR,
HUMANr and arena tables carry caption ids). The API's
``GET /api/studies/<id>/metrics/`` pages through the same rows (``caption_metric_rows``)
with the same column names.

Memory and speed: on PostgreSQL the database lists the metric names and computes every
cell, and the rows leave by ``COPY`` like the judgments table's (a first version decoding
each caption's JSON in Python added 4 s and 37 MB of peak memory to a 100,000-caption
dataset export, bench/export.py); on SQLite the documents are read in chunks of
``_BATCH`` captions, each written before the next is read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from django.db import connection

from annotation.models import Caption, Study
from annotation.modes.base import ExportColumn
from annotation.services.exports.common import EXPORT_POOL
from annotation.services.exports.query import _sql_batches

TABLE = "caption_metrics"
LABEL = "Captions with their metric scores"
ROW_UNIT = "caption"
PREFIX = "metric_"
_BATCH = 5000
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def metric_names(study: Study) -> list[str]:
    """The names of every metric score a caption of the study holds, sorted."""
    if connection.vendor == "postgresql":
        # The database lists the keys: no document crosses into Python (bench/export.py).
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT DISTINCT jsonb_object_keys(metrics) FROM annotation_caption "
                "WHERE study_id = %s AND jsonb_typeof(metrics) = 'object'",
                [study.pk],
            )
            return sorted(name for (name,) in cursor.fetchall())
    names: set[str] = set()
    documents = Caption.objects.filter(study_id=study.pk).values_list("metrics", flat=True)
    for document in documents.iterator(chunk_size=_BATCH):
        if isinstance(document, dict):
            names.update(document)
    return sorted(names)


def metric_column_names(names: Iterable[str]) -> dict[str, str]:
    """Each metric name's column: ``metric_`` and the name in lower case with every run of
    other characters turned into ``_``; ``_2``, ``_3``... when two names collide."""
    columns: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = PREFIX + (_NOT_WORD.sub("_", str(name).lower()).strip("_") or "unnamed")
        column, number = base, 1
        while column in taken:
            number += 1
            column = f"{base}_{number}"
        taken.add(column)
        columns[name] = column
    return columns


def caption_metric_columns(study: Study) -> list[ExportColumn]:
    """The table's columns: the caption, then one float column per metric of the study."""
    fixed = [
        ExportColumn("caption_id", "int", "Id of the caption; rows are in this order.", "captions"),
        ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
        ExportColumn("system", "str", "System that wrote the caption (Human for people)."),
        ExportColumn("purpose", "str", "study, or tutorial/probation for a mode's practice."),
        ExportColumn("raw_caption", "str", "Caption as imported."),
    ]
    metrics = [
        ExportColumn(
            column,
            "float",
            f"{name}: the caption's score as the metric lab stored it, on the "
            "implementation's own scale (docs/metrics.md); empty where it has none.",
        )
        for name, column in metric_column_names(metric_names(study)).items()
    ]
    return [*fixed, *metrics]


def _score(value: Any) -> float | None:
    """A stored score as a float; None for what is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _rows(study: Study) -> Any:
    return (
        Caption.objects.filter(study_id=study.pk)
        .order_by("id")
        .values_list("pk", "image__name", "system", "purpose", "raw_text", "metrics")
    )


def caption_metric_batches(study: Study, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The table's rows in caption-id order as record batches of ``schema``.

    On PostgreSQL the database computes every cell and the rows leave by ``COPY``, as the
    judgments table's (``query._sql_batches``); elsewhere (SQLite, development) they are
    read in chunks and converted here, with the same rule for what counts as a score.
    """
    names = [
        name
        for name, column in metric_column_names(metric_names(study)).items()
        if column in schema.names
    ]
    if connection.vendor == "postgresql":
        # A number stays a number; any other JSON value (text, true) is no score: NULL.
        cells = "".join(
            ", CASE WHEN jsonb_typeof(c.metrics -> %s) = 'number' "
            "THEN (c.metrics ->> %s)::float8 END"
            for _ in names
        )
        sql = (
            f"SELECT c.id, i.name, c.system, c.purpose, c.raw_text{cells} "
            "FROM annotation_caption c JOIN annotation_image i ON i.id = c.image_id "
            "WHERE c.study_id = %s ORDER BY c.id"
        )
        params = [value for name in names for value in (name, name)] + [study.pk]
        with _sql_batches(sql, params, schema) as batches:
            yield from batches
        return
    chunk: list[tuple[Any, ...]] = []
    produced = False
    for row in _rows(study).iterator(chunk_size=_BATCH):
        chunk.append(row)
        if len(chunk) >= _BATCH:
            yield _batch(chunk, names, schema)
            produced, chunk = True, []
    if chunk or not produced:
        yield _batch(chunk, names, schema)


def _batch(rows: list[tuple[Any, ...]], names: list[str], schema: pa.Schema) -> pa.RecordBatch:
    fixed = list(zip(*rows, strict=True)) if rows else [()] * 6
    documents = [document if isinstance(document, dict) else {} for document in fixed[5]]
    columns = [*fixed[:5], *([_score(d.get(name)) for d in documents] for name in names)]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(list(values), type=field.type, memory_pool=EXPORT_POOL)
            for values, field in zip(columns, schema, strict=True)
        ],
        schema=schema,
    )


def caption_metric_rows(study: Study) -> Any:
    """The captions the API pages through (a queryset in caption-id order)."""
    return _rows(study)


def caption_metric_json(
    rows: Iterable[tuple[Any, ...]], columns: dict[str, str]
) -> list[dict[str, Any]]:
    """API rows: the caption and ``metrics``, ``{column: score}`` for every metric of the
    study (``columns``: name -> column, ``metric_column_names``), null where it has none."""
    out = []
    for pk, image, system, purpose, raw_text, document in rows:
        document = document if isinstance(document, dict) else {}
        out.append(
            {
                "caption_id": pk,
                "image": image,
                "system": system,
                "purpose": purpose,
                "raw_caption": raw_text,
                "metrics": {column: _score(document.get(name)) for name, column in columns.items()},
            }
        )
    return out


__all__ = [
    "LABEL",
    "TABLE",
    "caption_metric_batches",
    "caption_metric_columns",
    "caption_metric_json",
    "caption_metric_rows",
    "metric_column_names",
    "metric_names",
]
