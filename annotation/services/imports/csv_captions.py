"""Read a captions CSV into caption rows, collecting every problem with its line.

The file is UTF-8 (a BOM is accepted) with the header ``image,system,caption`` plus optional
``prime_ratings`` (``3;4``), ``metric:<name>`` columns (numbers, stored in
``Caption.metrics``), ``description`` (the image's alt text) and ``source`` (the image's
origin and licence). For ``purpose`` tutorial or probation the header is
``image,caption,truth,explanation`` (``system`` optional, default ``Curated``). A system
name given by the caller replaces the ``system`` column, which the file must then not have.

A header problem stops the reading (no row can be trusted); a malformed record stops it
too, since the CSV reader cannot find where the next one starts. Any other bad row is
reported and the reading goes on, so one run lists every problem of the file.
"""

from __future__ import annotations

import csv
import io
import math

from annotation.models import Caption
from annotation.services.imports.captions import CaptionRow, check_text, clean_system

TUTORIAL_DEFAULT_SYSTEM = "Curated"


def read_csv(text: str, system: str, purpose: str, errors: list[str]) -> list[CaptionRow]:
    """The good rows of the CSV ``text``; every problem is added to ``errors``."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        errors.append(f"line 1: malformed CSV header ({exc})")
        return []
    if header is None:
        errors.append("line 1: the captions file is empty")
        return []
    columns = [c.strip().lower() for c in header]
    required, optional = _csv_columns(purpose, bool(system))
    problems = []
    missing = sorted(required - set(columns))
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    unknown = [c for c in columns if c not in required | optional and not c.startswith("metric:")]
    if unknown:
        allowed = ", ".join(sorted(required | optional) + ["metric:<name>"])
        problems.append(f"unknown column(s) {', '.join(unknown)} (allowed: {allowed})")
    if "metric:" in columns:
        problems.append("a metric column needs a name, like metric:clipscore")
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        problems.append(f"repeated column(s) {', '.join(duplicated)}")
    if system and "system" in columns:
        problems.append("the file has a system column and a system name was given; use one")
    if problems:
        errors.append("line 1: " + "; ".join(problems))
        return []

    rows: list[CaptionRow] = []
    last_line = reader.line_num
    while True:
        start = last_line + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(f"line {start}: malformed CSV ({exc}); rows after it were not read")
            break
        last_line = reader.line_num
        if not record or all(not cell.strip() for cell in record):
            continue
        if len(record) != len(columns):
            errors.append(f"line {start}: {len(record)} fields; the header has {len(columns)}")
            continue
        row = _csv_row(start, dict(zip(columns, record, strict=True)), system, purpose, errors)
        if row is not None:
            rows.append(row)
    return rows


def _csv_columns(purpose: str, system_given: bool) -> tuple[set[str], set[str]]:
    """(required, optional) columns of a captions CSV for this purpose."""
    if purpose == Caption.Purpose.STUDY:
        required = {"image", "caption"} | (set() if system_given else {"system"})
        return required, {"system", "prime_ratings", "description", "source"}
    required = {"image", "caption", "truth"}
    if purpose == Caption.Purpose.TUTORIAL:
        required.add("explanation")
    return required, {"system", "explanation", "description", "source"}


def _csv_row(
    line: int, cells: dict[str, str], system: str, purpose: str, errors: list[str]
) -> CaptionRow | None:
    problems: list[str] = []
    image_ref = cells["image"].strip()
    if not image_ref:
        problems.append("empty image name")
    system_name = clean_system(cells.get("system", "") or system)
    if not system_name:
        system_name = "" if purpose == Caption.Purpose.STUDY else TUTORIAL_DEFAULT_SYSTEM
    if not system_name:
        problems.append("empty system name")
    elif len(system_name) > 100:
        problems.append("system name longer than 100 characters")
    raw = cells["caption"]
    text_problem = check_text(raw, "caption")
    if text_problem:
        problems.append(text_problem)
    row = CaptionRow(line=line, image_ref=image_ref, system=system_name, raw_text=raw)
    row.prime_ratings = _parse_primes(cells.get("prime_ratings", ""), problems)
    for column, value in cells.items():
        if column.startswith("metric:") and value.strip():
            number = _parse_number(value)
            if number is None:
                problems.append(f"{column} is not a number: {value.strip()!r}")
            else:
                row.metrics[column.removeprefix("metric:")] = number
    row.description = cells.get("description", "").strip()
    row.source = cells.get("source", "").strip()
    if len(row.description) > 500:
        problems.append("description longer than 500 characters")
    if len(row.source) > 500:
        problems.append("source longer than 500 characters")
    if purpose != Caption.Purpose.STUDY:
        truth = cells.get("truth", "").strip()
        if truth not in {"1", "2", "3", "4", "5"}:
            problems.append(f"truth must be a whole number from 1 to 5, not {truth!r}")
        else:
            row.truth = int(truth)
        row.explanation = cells.get("explanation", "").strip()
        if purpose == Caption.Purpose.TUTORIAL and not row.explanation:
            problems.append("empty explanation (the tutorial shows it to every player)")
        elif len(row.explanation) > 5000:
            problems.append("explanation longer than 5000 characters")
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


def _parse_primes(value: str, problems: list[str]) -> list[float | int]:
    primes: list[float | int] = []
    for part in value.replace(",", ";").split(";"):
        if not part.strip():
            continue
        number = _parse_number(part)
        if number is None or not 1 <= number <= 5:
            problems.append(f"prime rating {part.strip()!r} is not a number from 1 to 5")
            continue
        primes.append(int(number) if number.is_integer() else number)
    return primes
