"""The test-rating importer: a release of rated captions as a closed test-rating study.

``test-rating-csv`` (``manage.py import_ratings --format test-rating-csv ratings.csv``): a
UTF-8 CSV with the header ``image,caption,rater,rating``, one rating a line. ``image`` is
the image's file name (the image is cited, not stored), ``rater`` names who rated, and
``rating`` is a whole number from 1 to 5. Lines with the same image and caption rate one
caption: it becomes one ``rating`` item, each rater one participant, each line a submitted
judgment. Every bad line is reported with its line number and field, and nothing is
written; the shared service (``annotation/services/imports/releases.py``) writes the rows.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotation import filelimits
from annotation.models import Caption, Image, Item, Participant, Study
from annotation.modes.importing import (
    Answer,
    Importer,
    ImportRows,
    NewStudy,
    fileless_image,
    format_error,
)

RELEASE_FORMAT = "test-rating-csv"
COLUMNS = ("image", "caption", "rater", "rating")
#: Longest value of each short field, the width of its column (``Image.name``,
#: ``Participant.external_id``).
_LONGEST = {"image": 255, "rater": 128}
#: The ratings a line may give, as written (no int() of a 5,000-digit field).
_RATINGS = {"1", "2", "3", "4", "5"}
#: Most bad lines the error lists: enough to fix a file, not a page of one mistake.
_SHOWN_ERRORS = 100


@dataclass(frozen=True)
class RatedLine:
    """One checked line of the file."""

    line: int
    image: str
    caption: str
    rater: str
    rating: int


def _line(number: int, record: dict[str, str | None]) -> tuple[RatedLine | None, list[str]]:
    """The line's checked values, or None and what is wrong with each field."""
    where = f"line {number}"
    values = {column: (record.get(column) or "").strip() for column in COLUMNS}
    problems = [f"{where}: {column} is empty" for column, value in values.items() if not value]
    problems += [
        f"{where}: {column} is longer than {most} characters"
        for column, most in _LONGEST.items()
        if len(values[column]) > most
    ]
    problems += filelimits.field_problems(
        where, {k: v for k, v in values.items() if k != "rating"}, multiline=("caption",)
    )
    rating = values["rating"]
    if rating and rating not in _RATINGS:
        problems.append(f"{where}: rating {rating!r} is not a whole number from 1 to 5")
    if problems:
        return None, problems
    return RatedLine(number, values["image"], values["caption"], values["rater"], int(rating)), []


def _records(path: Path) -> list[tuple[int, dict[str, str | None]]]:
    """(line number, record) of each data line; ServiceError for an unreadable file."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            try:
                header = reader.fieldnames or []
            except csv.Error as exc:
                raise format_error(filelimits.csv_problem(exc, 1)) from None
            missing = [column for column in COLUMNS if column not in header]
            if missing:
                raise format_error(
                    f"{path.name}: line 1: missing column(s) {', '.join(missing)}; "
                    f"the header is {','.join(COLUMNS)}"
                )
            records = []
            while True:
                start = reader.line_num + 1  # an error stops the reader inside this line
                try:
                    record = next(reader)
                except StopIteration:
                    return records
                except csv.Error as exc:
                    raise format_error(filelimits.csv_problem(exc, start)) from None
                records.append((start, record))
    except (OSError, UnicodeDecodeError) as exc:
        raise format_error(f"{path.name}: not a readable UTF-8 CSV file ({exc})") from None


def read_rating_csv(path: Path) -> list[RatedLine]:
    """The file's checked lines; ServiceError listing every bad line and field."""
    lines: list[RatedLine] = []
    errors: list[str] = []
    first_by_cell: dict[tuple[str, str, str], int] = {}
    for number, record in _records(path):
        checked, problems = _line(number, record)
        errors += problems
        if checked is None:
            continue
        cell = (checked.image, checked.caption, checked.rater)
        if cell in first_by_cell:
            errors.append(
                f"line {number}: rater {checked.rater!r} rated this caption already "
                f"on line {first_by_cell[cell]}"
            )
            continue
        first_by_cell[cell] = number
        lines.append(checked)
    if errors:
        raise format_error(
            f"{len(errors)} problem(s) in {path.name}; nothing imported.", errors[:_SHOWN_ERRORS]
        )
    if not lines:
        raise format_error(f"{path.name} holds no ratings; nothing imported.")
    return lines


class _Rows:
    """The file's rows for the new study, step by step (each once the previous is saved)."""

    def __init__(self, lines: list[RatedLine]):
        self.lines = lines
        self.images: dict[str, Image] = {}
        self.captions: dict[tuple[str, str], Caption] = {}
        self.items: dict[tuple[str, str], Item] = {}
        self.raters: dict[str, Participant] = {}

    def image_rows(self, study: Study) -> list[Image]:
        for line in self.lines:
            if line.image not in self.images:
                self.images[line.image] = fileless_image(study=study, name=line.image)
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        for line in self.lines:
            key = (line.image, line.caption)
            if key not in self.captions:
                self.captions[key] = Caption(
                    study=study,
                    image=self.images[line.image],
                    system="Release",
                    raw_text=line.caption,
                    text=line.caption,
                    purpose=Caption.Purpose.STUDY,
                    line=line.line,
                )
        return list(self.captions.values())

    def item_rows(self, study: Study) -> list[Item]:
        ratings = _ratings_per_caption(self.lines)
        for position, (key, caption) in enumerate(self.captions.items()):
            self.items[key] = Item(
                study=study,
                kind="rating",
                image=caption.image,
                position=position,
                spec={"caption": caption.pk, "parts": 1},
                target=ratings[key],
                judgment_count=ratings[key],
            )
        return list(self.items.values())

    def participant_rows(self, study: Study) -> list[Participant]:
        answered: dict[str, int] = {}
        for line in self.lines:
            answered[line.rater] = answered.get(line.rater, 0) + 1
        self.raters = {
            rater: Participant(
                study=study,
                source=Participant.Source.ACCOUNT,
                external_id=rater,
                state={"answered": count, "imported": True},
            )
            for rater, count in answered.items()
        }
        return list(self.raters.values())

    def answers(self, study: Study) -> list[Answer]:
        return [
            Answer(
                self.items[(line.image, line.caption)],
                self.raters[line.rater],
                {"rating": line.rating},
                {"imported": True},
            )
            for line in self.lines
        ]


def _ratings_per_caption(lines: list[RatedLine]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for line in lines:
        counts[(line.image, line.caption)] = counts.get((line.image, line.caption), 0) + 1
    return counts


class RatingCsvImporter(Importer):
    """``test-rating-csv``: one item per rated caption, one participant per rater."""

    formats = (RELEASE_FORMAT,)

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        lines = read_rating_csv(path)
        rows = _Rows(lines)
        most = max(_ratings_per_caption(lines).values())
        return ImportRows(
            study=NewStudy(
                name=f"Rated captions ({path.name})",
                settings={"target": most},
                description="Imported ratings of a test-rating release file.",
            ),
            steps=(rows.image_rows, rows.caption_rows, rows.item_rows, rows.participant_rows),
            answers=rows.answers,
            summary=(
                f"{len(_ratings_per_caption(lines))} captions, "
                f"{len({line.rater for line in lines})} raters, {len(lines)} ratings, closed.",
            ),
            details={"ratings": len(lines)},
        )
