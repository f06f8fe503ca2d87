"""The datasheet: counts from the written batches (``_Tally``), the redacted settings, the
mode's report summary, and the dataset card written from it."""

from __future__ import annotations

import json
import platform
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import django
import numpy as np
import pyarrow as pa
from django.db import connection
from django.utils import timezone

import capeval
from annotation.models import Job, Study
from annotation.modes.base import ExportColumn, Mode
from annotation.selectors import study_counts
from annotation.services.exports.common import (
    GENERIC_EXCLUSION_RULE,
    REDACTED,
    _bits,
    _distinct,
    _from_micros,
    _iso,
    _values,
    _version,
)

# ---------------------------------------------------------------------------------------
# Counting what was written (for the datasheet)


@dataclass
class _Tally:
    columns: list[ExportColumn]
    rows: int = 0
    judgments: int = 0
    excluded: int = 0
    distinct: dict[str, set[Any]] = field(default_factory=dict)
    ids: dict[str, list[np.ndarray]] = field(default_factory=dict)
    first: Any = None
    last: Any = None
    _last_id: Any = None
    _counts: dict[str, int] | None = None

    def observe(self, batch: pa.RecordBatch) -> None:
        """Count from the batch's buffers (numpy views; see ``_neutralised`` for why not
        pyarrow.compute)."""
        if self._counts is not None:
            raise RuntimeError("this table's tally is closed")
        self.rows += batch.num_rows
        if not batch.num_rows:
            return
        names = batch.schema.names
        if "judgment_id" in names:
            # Rows come in judgment-id order: a new judgment wherever the id changes.
            ids = _values(batch.column("judgment_id"), np.int64)
            changes = int(np.count_nonzero(ids[1:] != ids[:-1])) + 1
            self.judgments += changes - int(ids[0] == self._last_id)
            self._last_id = ids[-1]
            if "excluded" in names:
                flags = batch.column("excluded")
                self.excluded += int(np.count_nonzero(_bits(flags, 1) & _bits(flags, 0)))
        if "created_at" in names:
            times = batch.column("created_at")
            if times.null_count == 0:
                stamps = _values(times, np.int64)
                low, high = int(stamps.min()), int(stamps.max())
                self.first = low if self.first is None else min(self.first, low)
                self.last = high if self.last is None else max(self.last, high)
        for column in self.columns:
            if column.counts:
                values = batch.column(column.name)
                if pa.types.is_integer(values.type):
                    if values.null_count == len(values):
                        continue
                    # Distinct ids in numpy, 8 bytes an id (a Python set of THumB's 500,000
                    # caption ids costs 30-40 MB): each batch's, merged into the first
                    # array whenever they outgrow it, so at most about twice the distinct
                    # ids are held and each id is sorted a few times.
                    found = self.ids.setdefault(column.counts, [])
                    found.append(np.unique(_values(values, np.int64)[_bits(values, 0)]))
                    if sum(len(ids) for ids in found[1:]) > len(found[0]):
                        found[:] = [_distinct(np.concatenate(found))]
                else:
                    self.distinct.setdefault(column.counts, set()).update(values.to_pylist())

    def close(self) -> None:
        """Count now and let go of the ids and names: a dataset writes its tables one after
        the other, and THumB's 100,000 image names (a Python set, about 11 MB) would
        otherwise still be held while the next table's are counted."""
        self._counts = self.counts()
        self.distinct, self.ids = {}, {}

    def counts(self) -> dict[str, int]:
        if self._counts is not None:
            return dict(self._counts)
        counts = {"rows": self.rows}
        if any(c.name == "judgment_id" for c in self.columns):
            counts["judgments"] = self.judgments
            counts["excluded_rows"] = self.excluded
        for what in ("participants", "images", "captions"):
            if any(c.counts == what for c in self.columns):
                if what in self.ids:
                    counts[what] = len(_distinct(np.concatenate(self.ids[what])))
                else:
                    counts[what] = len(self.distinct.get(what, set()) - {None})
        return counts


# ---------------------------------------------------------------------------------------
# Datasheet and dataset card


def public_settings(settings_: dict[str, Any] | None) -> dict[str, Any]:
    """Study settings without secrets: the completion code, also inside a Prolific URL."""
    public = dict(settings_ or {})
    # The screen-out code is a secret too: with it anyone could claim the screen-out fee.
    for key in ("completion_code", "screen_out_code", "failed_check_code"):
        if key in public:
            public[key] = REDACTED
    for key in ("prolific_completion_url", "prolific_screen_out_url"):
        url = public.get(key)
        if isinstance(url, str) and url:
            parts = urlsplit(url)
            query = [(k, REDACTED if k.lower() == "cc" else v) for k, v in parse_qsl(parts.query)]
            public[key] = urlunsplit(parts._replace(query=urlencode(query)))
    return public


def _datasheet(
    study: Study,
    tallies: dict[str, _Tally],
    *,
    export_format: str,
    files: dict[str, str],
    raw_ids: bool,
    mode: Mode,
) -> dict[str, Any]:
    rules = mode.export.exclusion_rules or ""
    rules_list = [rules] if isinstance(rules, str) else list(rules)
    main = tallies.get("judgments")
    tables = {}
    for table, tally in tallies.items():
        tables[table] = {
            "file": files[table],
            "row": _row_unit(mode, table),
            "counts": tally.counts(),
            "columns": [
                {"name": c.name, "type": c.type, "description": c.description}
                for c in tally.columns
            ],
        }
    guide = mode.guidelines(study)
    return {
        "title": f"{study.name} ({mode.label or study.mode})",
        "format": export_format,
        "format_notes": _FORMAT_NOTES[export_format],
        "exported_at": timezone.now().astimezone(UTC).isoformat(),
        "motivation": study.description or "",
        "study": {
            "id": study.pk,
            "name": study.name,
            "mode": study.mode,
            "protocol": mode.label or study.mode,
            "status": study.status,
            "settings": public_settings(study.settings),
            "created_at": _iso(study.created_at),
            # What participants and the judge's default prompt were told (issue 46); the
            # judgments table's rows were shown the version each stored.
            "guidelines": {
                "version": guide.version,
                "default": guide.default,
                "text": guide.text,
            },
        },
        # What the study's own protocol was beyond its settings (HUMANr's real group sizes).
        "protocol_notes": mode.dataset_notes(study),
        "seeds": {"study": study.seed},
        "collection": {
            "first_judgment_at": _iso(_from_micros(main.first)) if main else None,
            "last_judgment_at": _iso(_from_micros(main.last)) if main else None,
        },
        "tables": tables,
        "counts_notes": (
            "rows: lines of the table's file. judgments: distinct judgments in it (THumB "
            "gives one row per caption, so rows > judgments). excluded_rows: rows flagged "
            "excluded. participants, images and captions: distinct values appearing in the "
            "file. study_totals: the whole study when exported."
        ),
        "study_totals": study_counts(study),
        "exclusion_rules": [*[r for r in rules_list if r], GENERIC_EXCLUSION_RULE],
        "agreement": _agreement_summary(study, mode),
        "privacy": (
            "Participants appear by pseudonym only; no user names, client addresses or "
            "browser ids. "
            + (
                "The participants table holds raw Prolific/MTurk ids (the owner asked for "
                "them): remove them before publishing."
                + (
                    # Rows tell a rater's vision in such a study (files._unlinks_raters).
                    " The study asks raters' vision, so the judgment rows name no participant."
                    if mode.asks_vision
                    else ""
                )
                if raw_ids
                else "No crowd worker ids."
            )
        ),
        "licence": {
            "data_licence": "TODO: the licence of this dataset (e.g. CC BY 4.0)",
            "image_licence": "TODO: the licence terms of the images",
            "citation": "TODO: how to cite this dataset",
        },
        "software": {
            "capeval": capeval.__version__,
            "django": django.get_version(),
            "python": platform.python_version(),
            "pyarrow": pa.__version__,
            "numpy": _version("numpy"),
            "database": connection.vendor,
            "platform": sys.platform,
        },
    }


def _row_unit(mode, table: str) -> str:
    if table == "judgments":
        return mode.export.row_unit
    if table == "judges":
        return "judge answer"
    if table == "caption_metrics":
        return "caption"
    extra = {t.name: t.row_unit for t in mode.export.extra_tables()}
    return extra.get(table, "participant")


_FORMAT_NOTES = {
    "csv": (
        "CSV: UTF-8, header row, fields quoted when needed (RFC 4180); booleans true/false, "
        "null as an empty cell, timestamps ISO 8601 UTC; text cells starting with = + - @ "
        "tab or CR are prefixed with ' (CSV injection), numbers never are."
    ),
    "jsonl": (
        "JSONL: one JSON object per line, UTF-8, values in their JSON types, timestamps as "
        "ISO 8601 UTC text; U+0085, U+2028 and U+2029 are written as \\u escapes."
    ),
    "parquet": "Parquet: typed columns; each field's description is in its metadata.",
    "dataset": (
        "A dataset folder (zip): data/*.parquet (typed columns), README.md (the dataset "
        "card), datasheet.json; load it with datasets.load_dataset('<folder>')."
    ),
}


def _agreement_summary(study: Study, mode: Mode) -> dict[str, Any]:
    job = (
        Job.objects.filter(study_id=study.pk, kind=Job.Kind.REPORT, status=Job.Status.DONE)
        .order_by("-finished_at", "-id")
        .only("result", "finished_at")
        .first()
    )
    if job is None or not isinstance(job.result, dict):
        return {"note": "No report computed yet: compute the report, then export again."}
    # The mode says which parts of its report summarise agreement (Report.summary).
    summary: dict[str, Any] = {"report_computed_at": _iso(job.finished_at)}
    summary.update(mode.report.summary(job.result))
    return summary


def dataset_card(datasheet: dict[str, Any]) -> str:
    """The README of a dataset folder: Hugging Face YAML header, then the datasheet."""
    tables = datasheet["tables"]
    study = datasheet["study"]
    lines = [
        "---",
        "configs:",
    ]
    for n, (table, info) in enumerate(tables.items()):
        lines += [f"- config_name: {table}", f"  data_files: {info['file']}"]
        if n == 0:
            lines.append("  default: true")
    lines += [
        "license: unknown  # TODO: fill in the dataset's licence",
        "---",
        "",
        f"# {datasheet['title']}",
        "",
        "## Motivation",
        "",
        datasheet["motivation"] or "TODO: why this dataset was collected, and by whom.",
        "",
        "## Composition",
        "",
    ]
    for table, info in tables.items():
        counts = ", ".join(f"{k}: {v:,}" for k, v in info["counts"].items())
        lines += [f"### `{info['file']}` ({table}; one row per {info['row']})", "", counts, ""]
        lines += ["| column | type | description |", "| --- | --- | --- |"]
        lines += [
            f"| `{c['name']}` | {c['type']} | {c['description'].replace('|', '/')} |"
            for c in info["columns"]
        ]
        lines.append("")
    collection = datasheet["collection"]
    lines += [
        "## Protocol",
        "",
        f"{study['protocol']} (`{study['mode']}`), study seed {datasheet['seeds']['study']}.",
        "",
        *[line for note in datasheet.get("protocol_notes") or () for line in (note, "")],
        "Settings (secrets redacted):",
        "",
        "```json",
        json.dumps(study["settings"], indent=2, ensure_ascii=False),
        "```",
        "",
        *_guidelines_lines(study.get("guidelines")),
        "## Collection",
        "",
        f"Judgments from {collection['first_judgment_at']} to "
        f"{collection['last_judgment_at']} (UTC); exported {datasheet['exported_at']}.",
        "",
        "## Exclusion rules",
        "",
        *[f"- {rule}" for rule in datasheet["exclusion_rules"]],
        "",
        "## Agreement",
        "",
        "```json",
        json.dumps(datasheet["agreement"], indent=2, ensure_ascii=False, default=str),
        "```",
        "",
        "## Privacy",
        "",
        datasheet["privacy"],
        "",
        "## Licence and citation",
        "",
        *[f"- {k.replace('_', ' ')}: {v}" for k, v in datasheet["licence"].items()],
        "",
    ]
    return "\n".join(lines)


def _guidelines_lines(guide: dict[str, Any] | None) -> list[str]:
    """The card's task guidelines: version and text, fenced as written (not rendered: the
    card is read as Markdown, and the text is a researcher's)."""
    if not guide or not guide.get("text"):
        return []
    text = guide["text"]
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    origin = "the mode's default" if guide.get("default") else "the study's own"
    return [
        f"Task guidelines shown to participants ({origin}, version {guide['version']}):",
        "",
        f"{fence}markdown",
        text,
        fence,
        "",
    ]
