"""Load a published rating dataset as a closed VICR study, so its report can be computed.

    manage.py import_ratings --format flickr8k-expert flickr8k_expert.json [--owner rita]
    manage.py import_ratings --format vicr-csv VICR_Sample250.csv --name "VICR sample"

Formats (see ../shared/datasets/README.md):

- ``flickr8k-expert``: ``{image_id: {human_judgement: [{image_id, image_path, caption,
  rating}]}}``, 3 consecutive entries per caption, ratings 1-4. Scale levels 4.
- ``vicr-csv``: columns ``image`` (URL), ``caption``, ``ratings``, ``rating_2`` ..
  ``rating_7`` (blank when absent). Scale levels 5.

The images are not downloaded: each ``Image`` row keeps the dataset's path or URL in
``source`` with empty file fields. Each rated caption becomes one game ``Item``; each rating
position (first, second, ... rating of a caption) becomes one ``Participant`` standing for a
virtual rater, in good standing, so every rating is in the report's final view. The
datasets do not identify their raters (Flickr8k-Expert even stores each caption's ratings
sorted), so these participants are positions, not people. Everything is written in one
transaction; a file with any bad row writes nothing.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path, PurePosixPath
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    Assignment,
    Caption,
    Image,
    Item,
    Judgment,
    Participant,
    Study,
    User,
)
from annotation.services.studies import study_create

FORMATS = {"flickr8k-expert": 4, "vicr-csv": 5}
RATING_COLUMNS = ["ratings"] + [f"rating_{i}" for i in range(2, 8)]

Row = tuple[str, str, str, list[int]]  # image name, image source, caption, ratings


def _rating(value: Any, levels: int, where: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise CommandError(f"{where}: rating {value!r} is not a number") from None
    if not number.is_integer() or not 1 <= number <= levels:
        raise CommandError(f"{where}: rating {value!r} is not a whole number from 1 to {levels}")
    return int(number)


def read_flickr8k_expert(path: Path) -> list[Row]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommandError(f"{path}: not a readable JSON file ({exc})") from None
    rows: list[Row] = []
    for image_id, entry in data.items():
        judgements = entry.get("human_judgement") if isinstance(entry, dict) else None
        if not isinstance(judgements, list) or len(judgements) % 3:
            raise CommandError(f"{image_id}: human_judgement must hold 3 entries per caption")
        for start in range(0, len(judgements), 3):
            triple = judgements[start : start + 3]
            where = f"{image_id}, entries {start + 1}-{start + 3}"
            if len({item.get("caption") for item in triple}) != 1:
                raise CommandError(f"{where}: 3 consecutive entries must share one caption")
            source = str(triple[0].get("image_path") or image_id)
            ratings = [_rating(item.get("rating"), 4, where) for item in triple]
            rows.append((str(image_id), source, str(triple[0]["caption"]), ratings))
    return rows


def read_vicr_csv(path: Path) -> list[Row]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            records = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: not a readable UTF-8 CSV file ({exc})") from None
    missing = {"image", "caption", "ratings"} - set(records[0] if records else {})
    if missing:
        raise CommandError(f"{path}: missing columns {', '.join(sorted(missing))}")
    rows: list[Row] = []
    for number, record in enumerate(records, start=2):
        where = f"line {number}"
        url = (record.get("image") or "").strip()
        caption = (record.get("caption") or "").strip()
        if not url or not caption:
            raise CommandError(f"{where}: empty image or caption")
        ratings = [
            _rating(record[column], 5, where)
            for column in RATING_COLUMNS
            if (record.get(column) or "").strip()
        ]
        if not ratings:
            raise CommandError(f"{where}: no rating")
        rows.append((PurePosixPath(url).name, url, caption, ratings))
    return rows


def import_rated_study(*, owner: User, name: str, rows: list[Row], levels: int) -> Study:
    """Create the closed study with its images, captions, items, raters and ratings."""
    now = timezone.now()
    with transaction.atomic():
        study = study_create(
            owner=owner,
            name=name,
            mode="vicr",
            settings={"scale_levels": levels, "collapse_top": levels == 5},
        )
        images: dict[str, Image] = {}
        for image_name, source, _, _ in rows:
            if image_name not in images:
                images[image_name] = Image(
                    study=study,
                    name=image_name[:255],
                    sha256="",
                    file="",
                    display="",
                    width=0,
                    height=0,
                    format="",
                    source=source[:500],
                )
        Image.objects.bulk_create(images.values(), batch_size=1000)
        captions = Caption.objects.bulk_create(
            [
                Caption(
                    study=study,
                    image=images[image_name],
                    system="Dataset",
                    raw_text=text,
                    text=text,
                    purpose=Caption.Purpose.STUDY,
                    line=line,
                )
                for line, (image_name, _, text, _) in enumerate(rows, start=1)
            ],
            batch_size=1000,
        )
        items = Item.objects.bulk_create(
            [
                Item(
                    study=study,
                    kind="game",
                    image_id=caption.image_id,
                    position=position,
                    spec={"caption_id": caption.pk},
                    target=len(row[3]),
                    judgment_count=len(row[3]),
                )
                for position, (caption, row) in enumerate(zip(captions, rows, strict=True))
            ],
            batch_size=1000,
        )
        positions = max(len(row[3]) for row in rows)
        raters = Participant.objects.bulk_create(
            [
                Participant(
                    study=study,
                    source=Participant.Source.ACCOUNT,
                    external_id=f"dataset-rater-{k}",
                    status="game",
                    state={"player": {"phase": "game"}, "imported": True},
                )
                for k in range(1, positions + 1)
            ]
        )
        leases = Assignment.objects.bulk_create(
            [
                Assignment(
                    participant=raters[k],
                    item=item,
                    status=Assignment.Status.SUBMITTED,
                    served_at=now,
                    expires_at=now,
                    submitted_at=now,
                )
                for item, row in zip(items, rows, strict=True)
                for k in range(len(row[3]))
            ],
            batch_size=2000,
        )
        ratings = [
            (item, k, rating)
            for item, row in zip(items, rows, strict=True)
            for k, rating in enumerate(row[3])
        ]
        Judgment.objects.bulk_create(
            [
                Judgment(
                    study=study,
                    item=item,
                    participant=raters[k],
                    assignment=lease,
                    phase="game",
                    payload={"rating": rating},
                    result={"imported": True},
                    dwell_ms=0,
                )
                for (item, k, rating), lease in zip(ratings, leases, strict=True)
            ],
            batch_size=2000,
        )
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status", "updated_at"])
    return study


class Command(BaseCommand):
    help = "Load a published rating dataset (Flickr8k-Expert, VICR CSV) as a closed VICR study."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--format", required=True, choices=sorted(FORMATS))
        parser.add_argument(
            "--owner", help="Researcher who owns the study (default: the first superuser)."
        )
        parser.add_argument("--name", help="Study name (default: the file name).")

    def handle(
        self, *args, file: Path, format: str, owner: str | None, name: str | None, **options
    ):
        if owner:
            user = User.objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user called {owner!r}")
        else:
            user = User.objects.filter(is_superuser=True).order_by("pk").first()
            if user is None:
                raise CommandError("no superuser exists; name the owner with --owner")
        if not (user.is_researcher or user.is_staff):
            raise CommandError(f"{user.username} is not a researcher")
        reader = read_flickr8k_expert if format == "flickr8k-expert" else read_vicr_csv
        rows = reader(file)
        if not rows:
            raise CommandError(f"{file}: no rated caption")
        study = import_rated_study(
            owner=user, name=name or file.name, rows=rows, levels=FORMATS[format]
        )
        total = sum(len(row[3]) for row in rows)
        self.stdout.write(
            f"Study {study.pk} ({study.name}): {len(rows)} captions, {total} ratings, closed."
        )
