"""Read a captions CSV into caption rows, collecting every problem with its line.

The file is UTF-8 (a BOM is accepted) with the header ``image,system,caption`` plus optional
``metric:<name>`` columns (numbers, stored in ``Caption.metrics``), ``description`` (the
image's alt text) and ``source`` (the image's origin and licence). Any other column is the
study's mode's (``CaptionColumns``: VICR's ``prime_ratings``, and its tutorial and probation
sets' ``truth`` and ``explanation``): the mode says which it requires and allows for the
purpose and reads them into ``Caption.spec``. For a purpose other than ``study`` (a mode's
own set) ``system`` is optional, default ``Curated``. A system name given by the caller
replaces the ``system`` column, which the file must then not have.

A header problem stops the reading (no row can be trusted); a malformed record stops it
too, since the CSV reader cannot find where the next one starts. Any other bad row is
reported and the reading goes on, so one run lists every problem of the file. A file with
more than ``CAPEVAL_MAX_IMPORT_ROWS`` rows is refused at the first row over the limit
(``ImportTooLarge``).
"""

from __future__ import annotations

import csv
import io
import math

from django.conf import settings

from annotation.filelimits import csv_problem
from annotation.models import Caption
from annotation.modes.caption_columns import CaptionColumns
from annotation.services.imports.captions import (
    ALT_TEXT_MAX,
    IMAGE_NAME_MAX,
    METRIC_NAME_MAX,
    SOURCE_MAX,
    SYSTEM_MAX,
    CaptionRow,
    check_text,
    clean_system,
    field_problem,
)
from annotation.services.imports.sources import ImportTooLarge
from annotation.text import shown

TUTORIAL_DEFAULT_SYSTEM = "Curated"


def read_csv(
    text: str, system: str, purpose: str, errors: list[str], mode_columns: CaptionColumns
) -> list[CaptionRow]:
    """The good rows of the CSV ``text``; every problem is added to ``errors``.

    ``mode_columns`` reads the study's mode's own columns."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        errors.append(csv_problem(exc, 1))
        return []
    if header is None:
        errors.append("line 1: the captions file is empty")
        return []
    columns = [c.strip().lower() for c in header]
    required, optional = _csv_columns(purpose, bool(system), mode_columns)
    problems = []
    missing = sorted(required - set(columns))
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    unknown = [c for c in columns if c not in required | optional and not c.startswith("metric:")]
    if unknown:
        allowed = ", ".join(sorted(required | optional) + ["metric:<name>"])
        named = ", ".join(shown(c) for c in unknown)
        problems.append(f"unknown column(s) {named} (allowed: {allowed})")
    if "metric:" in columns:
        problems.append("a metric column needs a name, like metric:clipscore")
    for column in columns:
        # Metric names become keys of Caption.metrics and report columns.
        if column.startswith("metric:"):
            name = column.removeprefix("metric:")
            problem = field_problem(name, "its metric name", max_length=METRIC_NAME_MAX)
            if problem:
                problems.append(f"column {shown(column)}: {problem}")
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        problems.append(f"repeated column(s) {', '.join(shown(c) for c in duplicated)}")
    if system and "system" in columns:
        problems.append("the file has a system column and a system name was given; use one")
    if problems:
        errors.append("line 1: " + "; ".join(problems))
        return []

    rows: list[CaptionRow] = []
    limit = settings.CAPEVAL_MAX_IMPORT_ROWS
    count = 0
    last_line = reader.line_num
    while True:
        start = last_line + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(csv_problem(exc, start) + "; rows after it were not read")
            break
        last_line = reader.line_num
        if not record or all(not cell.strip() for cell in record):
            continue
        count += 1
        if count > limit:
            raise ImportTooLarge(
                f"line {start}: more than {limit} caption rows; the limit per import is "
                f"{limit} (CAPEVAL_MAX_IMPORT_ROWS). Import the file in several parts."
            )
        if len(record) != len(columns):
            errors.append(f"line {start}: {len(record)} fields; the header has {len(columns)}")
            continue
        cells = dict(zip(columns, record, strict=True))
        row = _csv_row(start, cells, system, purpose, errors, mode_columns)
        if row is not None:
            rows.append(row)
    return rows


def _csv_columns(
    purpose: str, system_given: bool, mode_columns: CaptionColumns
) -> tuple[set[str], set[str]]:
    """(required, optional) columns of a captions CSV for this purpose: the shared ones and
    the mode's."""
    required = {"image", "caption"}
    if purpose == Caption.Purpose.STUDY and not system_given:
        required.add("system")
    mode_required, mode_optional = mode_columns.columns(purpose)
    return required | mode_required, {"system", "description", "source"} | mode_optional


def _csv_row(
    line: int,
    cells: dict[str, str],
    system: str,
    purpose: str,
    errors: list[str],
    mode_columns: CaptionColumns,
) -> CaptionRow | None:
    problems: list[str | None] = []  # None: that check passed
    image_ref = cells["image"].strip()
    if not image_ref:
        problems.append("empty image name")
    else:
        problems.append(field_problem(image_ref, "image", max_length=IMAGE_NAME_MAX))
    # A system given by the caller is checked once, for the whole file (study_import).
    system_name = clean_system(cells.get("system", "") or system)
    if not system_name:
        system_name = "" if purpose == Caption.Purpose.STUDY else TUTORIAL_DEFAULT_SYSTEM
    if not system_name:
        problems.append("empty system name")
    elif "system" in cells:
        problems.append(field_problem(system_name, "system", max_length=SYSTEM_MAX))
    raw = cells["caption"]
    problems.append(check_text(raw, "caption"))
    row = CaptionRow(line=line, image_ref=image_ref, system=system_name, raw_text=raw)
    for column, value in cells.items():
        if column.startswith("metric:") and value.strip():
            number = _parse_number(value)
            if number is None:
                problems.append(f"{shown(column)} is not a number: '{shown(value.strip())}'")
            else:
                row.metrics[column.removeprefix("metric:")] = number
    # Alt text and sources may span lines (a quoted CSV cell can).
    row.description = cells.get("description", "").strip()
    row.source = cells.get("source", "").strip()
    problems.append(
        field_problem(row.description, "description", max_length=ALT_TEXT_MAX, multiline=True)
    )
    problems.append(field_problem(row.source, "source", max_length=SOURCE_MAX, multiline=True))
    mode_problems: list[str] = []
    row.spec = mode_columns.parse(purpose, cells, mode_problems)
    problems += mode_problems
    problems = [problem for problem in problems if problem]
    if problems:
        errors.append(f"line {line}: " + "; ".join(problems))
        return None
    return row


def _parse_number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None
