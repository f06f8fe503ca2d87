"""Load published judgment datasets as closed studies, so their reports can be computed.

THumB 1.0 release (``dataset_import_thumb_release``): JSON Lines with ``SYS``, ``seg_id``,
``hyp``, ``image``, ``P``, ``R``, ``Fl``, ``Con``, ``Inc`` (penalties <= 0). It becomes a
thumb study with one ``stage1`` item per image and one virtual participant whose judgments
carry the release's final scores.

Rating datasets (``dataset_import_ratings``, see ../shared/datasets/README.md):

- ``flickr8k-expert``: ``{image_id: {human_judgement: [{image_id, image_path, caption,
  rating}]}}``, 3 consecutive entries per caption, ratings 1-4. Scale levels 4.
- ``vicr-csv``: columns ``image`` (URL), ``caption``, ``ratings``, ``rating_2`` ..
  ``rating_7`` (blank when absent). Scale levels 5.

Each rated caption becomes one game ``Item`` of a VICR study; each rating position (first,
second, ... rating of a caption) becomes one ``Participant`` standing for a virtual rater, in
good standing, so every rating is in the report's final view. The datasets do not identify
their raters (Flickr8k-Expert even stores each caption's ratings sorted), so these
participants are positions, not people.

The images are never downloaded: each ``Image`` row keeps the dataset's path, URL or id in
``source`` with empty file fields. A file is read and checked completely before anything is
written, and everything is written in one transaction: a file with any bad row writes nothing.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.errors import Forbidden, ServiceError
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
from annotation.modes.thumb.protocol import SCORE_FIELDS, STAGE1
from annotation.services.imports import limits
from annotation.services.studies import study_create
from annotation.text import shown, text_problem
from rubrics import thumb as thumb_rubric

_BATCH = 2000


def _format_error(message: str, errors: list[str] | None = None) -> ServiceError:
    """A dataset file that cannot be imported; ``details["errors"]`` lists its bad lines."""
    return ServiceError(message, field="file", details={"errors": errors or []})


# ---------------------------------------------------------------------- shared writes


def fileless_image(*, study: Study, name: str, source: str = "", alt_text: str = "") -> Image:
    """An unsaved image row that cites an image instead of holding its file (published
    datasets, benchmarks)."""
    return Image(
        study=study,
        name=name,
        sha256="",
        file="",
        display="",
        width=0,
        height=0,
        format="",
        source=source,
        alt_text=alt_text,
    )


def _submitted_judgments(
    *,
    study: Study,
    judgments: list[tuple[Item, Participant, dict[str, Any]]],
    now: datetime,
    result: dict[str, Any] | None = None,
) -> None:
    """Write each (item, participant, payload) as a submitted assignment with its judgment."""
    assignments = Assignment.objects.bulk_create(
        [
            Assignment(
                participant=participant,
                item=item,
                status=Assignment.Status.SUBMITTED,
                served_at=now,
                expires_at=now,
                submitted_at=now,
            )
            for item, participant, _ in judgments
        ],
        batch_size=_BATCH,
    )
    if any(assignment.pk is None for assignment in assignments):
        # A backend that does not return ids from bulk inserts: the study is new, so its
        # assignments in id order are exactly the ones just written.
        assignments = list(Assignment.objects.filter(item__study=study).order_by("id"))
    Judgment.objects.bulk_create(
        [
            Judgment(
                study=study,
                item=item,
                participant=participant,
                assignment=assignment,
                part=0,
                payload=payload,
                result=dict(result or {}),
                dwell_ms=0,
            )
            for (item, participant, payload), assignment in zip(judgments, assignments, strict=True)
        ],
        batch_size=_BATCH,
    )


# ---------------------------------------------------------------------- THumB 1.0 release

THUMB_RELEASE_KEYS = ("SYS", "seg_id", "hyp", "image", "P", "R", "Fl", "Con", "Inc")


def _read_thumb_release(path: Path) -> list[dict[str, Any]]:
    rows, errors = [], []
    seen: set[tuple[str, str]] = set()
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = limits.loads(line)  # refuses deep nesting (RecursionError) first
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
                missing = [k for k in THUMB_RELEASE_KEYS if k not in row]
                if missing:
                    raise ValueError(f"missing {', '.join(missing)}")
                # The release stores penalties as values <= 0; the platform stores deductions.
                scores = thumb_rubric.validate_caption_scores(
                    row["P"], row["R"], None, -row["Con"], -row["Inc"]
                ).as_dict()
                # rubrics.thumb checks the fluency total (range, 0.1 grid) inside total().
                scores["fluency"] = round(-row["Fl"], 1) + 0.0
                scores["total"] = thumb_rubric.total(
                    scores["precision"],
                    scores["recall"],
                    scores["fluency"],
                    scores["conciseness"],
                    scores["inclusive"],
                )
                # Stored as text: no NUL (PostgreSQL), half surrogate or override (issue 45).
                for key in ("SYS", "seg_id", "image", "hyp"):
                    problem = text_problem(str(row[key]), max_length=None, multiline=key == "hyp")
                    if problem:
                        raise ValueError(f"{key} {problem}")
                cell = (str(row["seg_id"]), str(row["SYS"]))
                if cell in seen:
                    raise ValueError(f"second row for system {row['SYS']!r} of image {cell[0]}")
                seen.add(cell)
                rows.append(
                    {
                        "line": line_number,
                        "seg_id": cell[0],
                        "image": str(row["image"]),
                        "system": cell[1],
                        "raw_text": str(row["hyp"]),
                        "text": thumb_rubric.normalise(str(row["hyp"])),
                        "scores": scores,
                    }
                )
            except (ValueError, TypeError) as exc:
                errors.append(f"line {line_number}: {exc}")
    if errors:
        raise _format_error(
            f"{len(errors)} bad line(s) in {path.name}; nothing imported.", errors[:100]
        )
    if not rows:
        raise _format_error(f"{path.name} holds no judgments; nothing imported.")
    return rows


def dataset_import_thumb_release(*, owner: User, path: Path | str, name: str = "") -> Study:
    """Load THumB 1.0-format judgments into a new CLOSED thumb study, in one transaction.

    Images get no files (empty file/display/sha256); ``source`` is the COCO image id. Each
    image gets a ``stage1`` item whose groups join identical texts only when the release
    gave them identical scores (it does not always), and one virtual participant's judgment
    carries the release's final scores. The release has no fluency error types, so the
    imported fluency penalty has an empty ``fluency_errors``.

    Raises ServiceError (with the bad lines in ``details["errors"]``) for a bad file and
    ServiceError (403) for an owner who is not a researcher; nothing is written then.
    """
    path = Path(path)
    rows = _read_thumb_release(path)
    now = timezone.now()
    with transaction.atomic():
        study = study_create(
            owner=owner,
            name=name or f"THumB 1.0 release ({path.name})",
            mode="thumb",
            settings={"stage2": False, "require_native_fluency": False},
            description="Imported final THumB 1.0 judgments (Kasai et al. 2022).",
        )
        image_rows: dict[str, Image] = {}
        for row in rows:
            if row["seg_id"] not in image_rows:
                image_rows[row["seg_id"]] = fileless_image(
                    study=study, name=row["image"], source=row["seg_id"]
                )
        Image.objects.bulk_create(image_rows.values())
        image_ids = dict(Image.objects.filter(study=study).values_list("source", "id"))
        captions = Caption.objects.bulk_create(
            [
                Caption(
                    study=study,
                    image_id=image_ids[row["seg_id"]],
                    system=row["system"],
                    raw_text=row["raw_text"],
                    text=row["text"],
                    line=row["line"],
                )
                for row in rows
            ]
        )
        if any(caption.pk is None for caption in captions):
            captions = list(Caption.objects.filter(study=study).order_by("id"))
        by_image: dict[str, list[tuple[dict[str, Any], Caption]]] = defaultdict(list)
        for row, caption in zip(rows, captions, strict=True):
            by_image[row["seg_id"]].append((row, caption))
        items, payloads = [], []
        for position, (seg_id, members) in enumerate(by_image.items()):
            groups: dict[tuple, dict[str, Any]] = {}
            for row, caption in members:
                scores = row["scores"]
                group_key = (row["text"], *(scores[f] for f in SCORE_FIELDS))
                group = groups.setdefault(
                    group_key,
                    {
                        "text": row["text"],
                        "captions": [],
                        "scores": scores,
                    },
                )
                group["captions"].append(
                    {"id": caption.pk, "system": caption.system, "raw_text": caption.raw_text}
                )
            keyed = [(f"c{n}", g) for n, g in enumerate(groups.values(), start=1)]
            spec = {
                "image_name": members[0][0]["image"],
                "groups": [
                    {"key": k, "text": g["text"], "captions": g["captions"]} for k, g in keyed
                ],
            }
            items.append(
                Item(
                    study=study,
                    kind=STAGE1,
                    image_id=image_ids[seg_id],
                    position=position,
                    spec=spec,
                    target=1,
                    judgment_count=1,
                )
            )
            payloads.append(
                {
                    "source": "THumB 1.0 release",
                    "captions": {
                        k: {"caption_ids": [c["id"] for c in g["captions"]], **g["scores"]}
                        for k, g in keyed
                    },
                }
            )
        items = Item.objects.bulk_create(items)
        if any(item.pk is None for item in items):
            items = list(Item.objects.filter(study=study).order_by("position"))
        participant = Participant.objects.create(
            study=study,
            source=Participant.Source.ACCOUNT,
            external_id="thumb-1.0-release",
            external_meta={"note": "virtual participant: the THumB 1.0 release's final scores"},
        )
        _submitted_judgments(
            study=study,
            judgments=[
                (item, participant, payload) for item, payload in zip(items, payloads, strict=True)
            ],
            now=now,
        )
        Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
        study.status = Study.Status.CLOSED
    return study


# ---------------------------------------------------------------------- rating datasets

_RATING_COLUMNS = ["ratings"] + [f"rating_{i}" for i in range(2, 8)]

_RatedRow = tuple[str, str, str, list[int]]  # image name, image source, caption, ratings


def _rating(value: Any, levels: int, where: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _format_error(f"{where}: rating {value!r} is not a number") from None
    if not number.is_integer() or not 1 <= number <= levels:
        raise _format_error(f"{where}: rating {value!r} is not a whole number from 1 to {levels}")
    return int(number)


def _storable(where: str, fields: dict[str, Any]) -> None:
    """Refuse a row whose stored text ``annotation.text`` refuses, naming where and the field
    (a caption may span lines)."""
    for name, value in fields.items():
        problem = text_problem(str(value), max_length=None, multiline=name == "caption")
        if problem:
            raise _format_error(f"{where}: {name} {problem}")


def _read_flickr8k_expert(path: Path) -> list[_RatedRow]:
    try:
        data = limits.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _format_error(f"{path.name}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise _format_error(f"{path.name}: line 1: a JSON object of images is expected")
    rows: list[_RatedRow] = []
    for image_id, entry in data.items():
        judgements = entry.get("human_judgement") if isinstance(entry, dict) else None
        if not isinstance(judgements, list) or len(judgements) % 3:
            raise _format_error(f"{image_id}: human_judgement must hold 3 entries per caption")
        for start in range(0, len(judgements), 3):
            triple = judgements[start : start + 3]
            where = f"{image_id}, entries {start + 1}-{start + 3}"
            if len({item.get("caption") for item in triple}) != 1:
                raise _format_error(f"{where}: 3 consecutive entries must share one caption")
            source = str(triple[0].get("image_path") or image_id)
            _storable(
                shown(where),
                {"image id": str(image_id), "image_path": source, "caption": triple[0]["caption"]},
            )
            ratings = [_rating(item.get("rating"), 4, where) for item in triple]
            rows.append((str(image_id), source, str(triple[0]["caption"]), ratings))
    return rows


def _read_vicr_csv(path: Path) -> list[_RatedRow]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            records = []
            try:
                _ = reader.fieldnames  # reads the header now, so line_num counts it
            except csv.Error as exc:
                raise _format_error(limits.csv_problem(exc, 1)) from None
            while True:
                # An error stops the reader inside the line after the last one it finished.
                start = reader.line_num + 1
                try:
                    records.append(next(reader))
                except StopIteration:
                    break
                except csv.Error as exc:
                    raise _format_error(limits.csv_problem(exc, start)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _format_error(f"{path}: not a readable UTF-8 CSV file ({exc})") from None
    missing = {"image", "caption", "ratings"} - set(records[0] if records else {})
    if missing:
        raise _format_error(f"{path}: missing columns {', '.join(sorted(missing))}")
    rows: list[_RatedRow] = []
    for number, record in enumerate(records, start=2):
        where = f"line {number}"
        url = (record.get("image") or "").strip()
        caption = (record.get("caption") or "").strip()
        if not url or not caption:
            raise _format_error(f"{where}: empty image or caption")
        _storable(where, {"image": url, "caption": caption})
        ratings = [
            _rating(record[column], 5, where)
            for column in _RATING_COLUMNS
            if (record.get(column) or "").strip()
        ]
        if not ratings:
            raise _format_error(f"{where}: no rating")
        rows.append((PurePosixPath(url).name, url, caption, ratings))
    return rows


# Format name -> (reader, number of scale levels).
RATING_FORMATS: dict[str, tuple[Callable[[Path], list[_RatedRow]], int]] = {
    "flickr8k-expert": (_read_flickr8k_expert, 4),
    "vicr-csv": (_read_vicr_csv, 5),
}


def dataset_import_ratings(*, owner: User, path: Path | str, fmt: str, name: str = "") -> Study:
    """Load a rating dataset (one of ``RATING_FORMATS``) as a new CLOSED vicr study.

    The study is named ``name``, or after the file. Raises ServiceError (403) for an owner who
    is not a researcher and ServiceError for an unknown format or a bad or empty file;
    nothing is written then.
    """
    path = Path(path)
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden(f"{owner.username} is not a researcher")
    if fmt not in RATING_FORMATS:
        raise _format_error(
            f"unknown format {fmt!r}; choose one of {', '.join(sorted(RATING_FORMATS))}"
        )
    reader, levels = RATING_FORMATS[fmt]
    rows = reader(path)
    if not rows:
        raise _format_error(f"{path}: no rated caption")
    now = timezone.now()
    with transaction.atomic():
        study = study_create(
            owner=owner,
            name=name or path.name,
            mode="vicr",
            settings={"scale_levels": levels, "collapse_top": levels == 5},
        )
        images: dict[str, Image] = {}
        for image_name, source, _, _ in rows:
            if image_name not in images:
                images[image_name] = fileless_image(
                    study=study, name=image_name[:255], source=source[:500]
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
                    state={"imported": True},
                )
                for k in range(1, positions + 1)
            ]
        )
        _submitted_judgments(
            study=study,
            judgments=[
                (item, raters[k], {"rating": rating})
                for item, row in zip(items, rows, strict=True)
                for k, rating in enumerate(row[3])
            ],
            now=now,
            result={"imported": True},
        )
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status", "updated_at"])
    return study
