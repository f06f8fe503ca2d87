"""THumB's importer: the THumB 1.0 release (Kasai et al. 2022) as a closed thumb study.

The release (``thumb-1.0``, ``manage.py import_thumb``) is JSON Lines with ``SYS``,
``seg_id``, ``hyp``, ``image``, ``P``, ``R``, ``Fl``, ``Con``, ``Inc`` (penalties <= 0).
Images get no files (empty file/display/sha256); ``source`` is the COCO image id. Each
image gets a ``stage1`` item whose groups join identical texts only when the release gave
them identical scores (it does not always), and one virtual participant's judgment carries
the release's final scores. The release has no fluency error types, so the imported
fluency penalty has an empty ``fluency_errors``.
"""

from __future__ import annotations

from collections import defaultdict
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
from annotation.modes.thumb.protocol import SCORE_FIELDS, STAGE1
from annotation.text import text_problem
from rubrics import thumb as thumb_rubric

THUMB_RELEASE = "thumb-1.0"
THUMB_RELEASE_KEYS = ("SYS", "seg_id", "hyp", "image", "P", "R", "Fl", "Con", "Inc")


def _release_row(row: Any, line_number: int, seen: set[tuple[str, str]]) -> dict[str, Any]:
    """One checked line of the release; ValueError or TypeError saying what is wrong."""
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
    return {
        "line": line_number,
        "seg_id": cell[0],
        "image": str(row["image"]),
        "system": cell[1],
        "raw_text": str(row["hyp"]),
        "text": thumb_rubric.normalise(str(row["hyp"])),
        "scores": scores,
    }


def read_thumb_release(path: Path) -> list[dict[str, Any]]:
    """The release's checked rows; ServiceError listing every bad line."""
    rows, errors = [], []
    seen: set[tuple[str, str]] = set()
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = filelimits.loads(line)  # refuses deep nesting (RecursionError) first
                rows.append(_release_row(row, line_number, seen))
            except (ValueError, TypeError) as exc:
                errors.append(f"line {line_number}: {exc}")
    if errors:
        raise format_error(
            f"{len(errors)} bad line(s) in {path.name}; nothing imported.", errors[:100]
        )
    if not rows:
        raise format_error(f"{path.name} holds no judgments; nothing imported.")
    return rows


class _ReleaseRows:
    """The release's rows for a new study, step by step (each once the previous is saved)."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows
        self.images: dict[str, Image] = {}
        self.captions: list[Caption] = []
        self.items: list[Item] = []
        self.payloads: list[dict[str, Any]] = []
        self.participant: Participant | None = None

    def image_rows(self, study: Study) -> list[Image]:
        for row in self.rows:
            if row["seg_id"] not in self.images:
                self.images[row["seg_id"]] = fileless_image(
                    study=study, name=row["image"], source=row["seg_id"]
                )
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        self.captions = [
            Caption(
                study=study,
                image=self.images[row["seg_id"]],
                system=row["system"],
                raw_text=row["raw_text"],
                text=row["text"],
                line=row["line"],
            )
            for row in self.rows
        ]
        return self.captions

    def item_rows(self, study: Study) -> list[Item]:
        by_image: dict[str, list[tuple[dict[str, Any], Caption]]] = defaultdict(list)
        for row, caption in zip(self.rows, self.captions, strict=True):
            by_image[row["seg_id"]].append((row, caption))
        for position, (seg_id, members) in enumerate(by_image.items()):
            keyed = _groups(members)
            spec = {
                "image_name": members[0][0]["image"],
                "groups": [
                    {"key": k, "text": g["text"], "captions": g["captions"]} for k, g in keyed
                ],
            }
            self.items.append(
                Item(
                    study=study,
                    kind=STAGE1,
                    image=self.images[seg_id],
                    position=position,
                    spec=spec,
                    target=1,
                    judgment_count=1,
                )
            )
            self.payloads.append(
                {
                    "source": "THumB 1.0 release",
                    "captions": {
                        k: {"caption_ids": [c["id"] for c in g["captions"]], **g["scores"]}
                        for k, g in keyed
                    },
                }
            )
        return self.items

    def participant_rows(self, study: Study) -> list[Participant]:
        self.participant = Participant(
            study=study,
            source=Participant.Source.ACCOUNT,
            external_id="thumb-1.0-release",
            external_meta={"note": "virtual participant: the THumB 1.0 release's final scores"},
        )
        return [self.participant]

    def answers(self, study: Study) -> list[Answer]:
        return [
            Answer(item, self.participant, payload)
            for item, payload in zip(self.items, self.payloads, strict=True)
        ]


def _groups(members: list[tuple[dict[str, Any], Caption]]) -> list[tuple[str, dict[str, Any]]]:
    """The image's caption groups keyed ``c1``, ``c2``...: one per text and scores."""
    groups: dict[tuple, dict[str, Any]] = {}
    for row, caption in members:
        scores = row["scores"]
        group_key = (row["text"], *(scores[f] for f in SCORE_FIELDS))
        group = groups.setdefault(
            group_key, {"text": row["text"], "captions": [], "scores": scores}
        )
        group["captions"].append(
            {"id": caption.pk, "system": caption.system, "raw_text": caption.raw_text}
        )
    return [(f"c{n}", g) for n, g in enumerate(groups.values(), start=1)]


class ThumbReleaseImporter(Importer):
    """The THumB 1.0 release: one ``stage1`` item per image, its final scores judged."""

    formats = (THUMB_RELEASE,)

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        rows = read_thumb_release(path)
        built = _ReleaseRows(rows)
        return ImportRows(
            study=NewStudy(
                name=f"THumB 1.0 release ({path.name})",
                settings={"stage2": False, "require_native_fluency": False},
                description="Imported final THumB 1.0 judgments (Kasai et al. 2022).",
            ),
            steps=(
                built.image_rows,
                built.caption_rows,
                built.item_rows,
                built.participant_rows,
            ),
            answers=built.answers,
            summary=(
                f"{len({row['seg_id'] for row in rows})} images, {len(rows)} captions, closed.",
            ),
        )
