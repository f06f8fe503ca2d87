"""VICR's importer: published rating datasets as closed VICR studies (see
../shared/datasets/README.md), and what the study's import page says of VICR's own sets.

- ``flickr8k-expert``: ``{image_id: {human_judgement: [{image_id, image_path, caption,
  rating}]}}``, 3 consecutive entries per caption, ratings 1-4. Scale levels 4.
- ``vicr-csv``: columns ``image`` (URL), ``caption``, ``ratings``, ``rating_2`` ..
  ``rating_7`` (blank when absent). Scale levels 5.

Each rated caption becomes one game ``Item``; each rating position (first, second, ...
rating of a caption) becomes one ``Participant`` standing for a virtual rater, in the game
and in good standing, so every rating is in the report's final view. The datasets do not
identify their raters (Flickr8k-Expert even stores each caption's ratings sorted), so these
participants are positions, not people. The images are never downloaded: each ``Image``
row keeps the dataset's path, URL or id in ``source`` with empty file fields.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from django.utils.safestring import mark_safe

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
from annotation.modes.vicr.protocol import GAME
from annotation.text import shown, text_problem

#: What the study's import page says of VICR's own caption columns and sets (code
#: constants; the columns are read by ``captions.VicrCaptionColumns``).
IMPORT_NOTES = (
    mark_safe(  # a constant of this module, no input
        "VICR study captions may add <code>prime_ratings</code> (primed ratings, like "
        "<code>3;4</code>)."
    ),
    mark_safe(  # a constant of this module, no input
        "VICR tutorial and probation sets (CSV): <code>image,caption,truth,explanation</code> "
        "with truth from 1 to 5; choose the purpose above."
    ),
)

_RATING_COLUMNS = ["ratings"] + [f"rating_{i}" for i in range(2, 8)]

_RatedRow = tuple[str, str, str, list[int]]  # image name, image source, caption, ratings


def _rating(value: Any, levels: int, where: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise format_error(f"{where}: rating {value!r} is not a number") from None
    if not number.is_integer() or not 1 <= number <= levels:
        raise format_error(f"{where}: rating {value!r} is not a whole number from 1 to {levels}")
    return int(number)


def _storable(where: str, fields: dict[str, Any]) -> None:
    """Refuse a row whose stored text ``annotation.text`` refuses, naming where and the field
    (a caption may span lines)."""
    for name, value in fields.items():
        problem = text_problem(str(value), max_length=None, multiline=name == "caption")
        if problem:
            raise format_error(f"{where}: {name} {problem}")


def read_flickr8k_expert(path: Path) -> list[_RatedRow]:
    try:
        data = filelimits.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise format_error(f"{path.name}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise format_error(f"{path.name}: line 1: a JSON object of images is expected")
    rows: list[_RatedRow] = []
    for image_id, entry in data.items():
        judgements = entry.get("human_judgement") if isinstance(entry, dict) else None
        if not isinstance(judgements, list) or len(judgements) % 3:
            raise format_error(f"{image_id}: human_judgement must hold 3 entries per caption")
        for start in range(0, len(judgements), 3):
            triple = judgements[start : start + 3]
            where = f"{image_id}, entries {start + 1}-{start + 3}"
            if len({item.get("caption") for item in triple}) != 1:
                raise format_error(f"{where}: 3 consecutive entries must share one caption")
            source = str(triple[0].get("image_path") or image_id)
            _storable(
                shown(where),
                {"image id": str(image_id), "image_path": source, "caption": triple[0]["caption"]},
            )
            ratings = [_rating(item.get("rating"), 4, where) for item in triple]
            rows.append((str(image_id), source, str(triple[0]["caption"]), ratings))
    return rows


def _csv_records(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            records = []
            try:
                _ = reader.fieldnames  # reads the header now, so line_num counts it
            except csv.Error as exc:
                raise format_error(filelimits.csv_problem(exc, 1)) from None
            while True:
                # An error stops the reader inside the line after the last one it finished.
                start = reader.line_num + 1
                try:
                    records.append(next(reader))
                except StopIteration:
                    break
                except csv.Error as exc:
                    raise format_error(filelimits.csv_problem(exc, start)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise format_error(f"{path}: not a readable UTF-8 CSV file ({exc})") from None
    return records


def read_vicr_csv(path: Path) -> list[_RatedRow]:
    records = _csv_records(path)
    missing = {"image", "caption", "ratings"} - set(records[0] if records else {})
    if missing:
        raise format_error(f"{path}: missing columns {', '.join(sorted(missing))}")
    rows: list[_RatedRow] = []
    for number, record in enumerate(records, start=2):
        where = f"line {number}"
        url = (record.get("image") or "").strip()
        caption = (record.get("caption") or "").strip()
        if not url or not caption:
            raise format_error(f"{where}: empty image or caption")
        _storable(where, {"image": url, "caption": caption})
        ratings = [
            _rating(record[column], 5, where)
            for column in _RATING_COLUMNS
            if (record.get(column) or "").strip()
        ]
        if not ratings:
            raise format_error(f"{where}: no rating")
        rows.append((PurePosixPath(url).name, url, caption, ratings))
    return rows


# Format name -> (reader, number of scale levels).
RATING_FORMATS: dict[str, tuple[Callable[[Path], list[_RatedRow]], int]] = {
    "flickr8k-expert": (read_flickr8k_expert, 4),
    "vicr-csv": (read_vicr_csv, 5),
}


class _RatingRows:
    """The dataset's rows for a new study, step by step (each once the previous is saved)."""

    def __init__(self, rows: list[_RatedRow]):
        self.rows = rows
        self.images: dict[str, Image] = {}
        self.captions: list[Caption] = []
        self.items: list[Item] = []
        self.raters: list[Participant] = []

    def image_rows(self, study: Study) -> list[Image]:
        for image_name, source, _, _ in self.rows:
            if image_name not in self.images:
                self.images[image_name] = fileless_image(
                    study=study, name=image_name[:255], source=source[:500]
                )
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        self.captions = [
            Caption(
                study=study,
                image=self.images[image_name],
                system="Dataset",
                raw_text=text,
                text=text,
                purpose=Caption.Purpose.STUDY,
                line=line,
            )
            for line, (image_name, _, text, _) in enumerate(self.rows, start=1)
        ]
        return self.captions

    def item_rows(self, study: Study) -> list[Item]:
        self.items = [
            Item(
                study=study,
                kind=GAME,
                image=caption.image,
                position=position,
                spec={"caption_id": caption.pk},
                target=len(row[3]),
                judgment_count=len(row[3]),
            )
            for position, (caption, row) in enumerate(zip(self.captions, self.rows, strict=True))
        ]
        return self.items

    def rater_rows(self, study: Study) -> list[Participant]:
        positions = max(len(row[3]) for row in self.rows)
        self.raters = [
            Participant(
                study=study,
                source=Participant.Source.ACCOUNT,
                external_id=f"dataset-rater-{k}",
                status=GAME,
                state={"imported": True},
            )
            for k in range(1, positions + 1)
        ]
        return self.raters

    def answers(self, study: Study) -> list[Answer]:
        return [
            Answer(item, self.raters[k], {"rating": rating}, {"imported": True})
            for item, row in zip(self.items, self.rows, strict=True)
            for k, rating in enumerate(row[3])
        ]


class RatingsImporter(Importer):
    """Flickr8k-Expert and the VICR CSV: one game item per rated caption, one virtual
    rater per rating position."""

    formats = tuple(RATING_FORMATS)

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        reader, levels = RATING_FORMATS[fmt]
        rows = reader(path)
        if not rows:
            raise format_error(f"{path}: no rated caption")
        built = _RatingRows(rows)
        ratings = sum(len(row[3]) for row in rows)
        return ImportRows(
            study=NewStudy(
                name=path.name, settings={"scale_levels": levels, "collapse_top": levels == 5}
            ),
            steps=(built.image_rows, built.caption_rows, built.item_rows, built.rater_rows),
            answers=built.answers,
            summary=(f"{len(rows)} captions, {ratings} ratings, closed.",),
        )
