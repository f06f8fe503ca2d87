"""Load published battle logs as closed arena studies, so their leaderboards can be computed.

Two formats (readers in ``rubrics/battles.py``):

- ``battles``: JSON Lines with LMArena's schema (``model_a``, ``model_b``, ``winner`` in
  ``model_a|model_b|tie|tie (bothbad)``, optional ``judge``, ``caption_a``, ``caption_b``,
  ``image``). ``model_a`` is the side that was shown left, as in LMArena's logs.
- ``iiw-sxs``: an ImageInWords side-by-side file (``DCI_Test.jsonl``, ``DOCCI_Test.jsonl``,
  ``IIW-400.jsonl``, named so); each comparison is a battle with its five per-criterion
  labels and no overall verdict (the release has none), so it enters the report's
  per-criterion table and not the leaderboard.

Each battle is one ``Item`` of kind ``battle`` in the arena's canonical order (the system
whose name sorts first is ``a``), answered once; each judge is one ``Participant`` (one
"dataset-judge" when the log names none). What a file lacks is kept as missing, never
invented: an image is cited by its id (no file), a missing description is an empty caption,
and the summary and the study's description say so. A file is read and checked completely
before anything is written, and everything is written in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.errors import Forbidden, InvalidInput
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study, User
from annotation.modes.arena.protocol import BATTLE, IIW_NAMES
from annotation.services.datasets import fileless_image
from annotation.services.imports import limits
from annotation.services.studies import study_create
from rubrics import battles as readers

BATTLE_FORMATS = ("battles", "iiw-sxs")
_BATCH = 2000
#: LMArena's winner, as shown (model_a on the left), to the arena page's outcome.
_SHOWN = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "bothbad"}
_SWAP = {"model_a": "model_b", "model_b": "model_a"}
_CRITERION_KEYS = {iiw: key for key, iiw in IIW_NAMES.items()}


@dataclass(frozen=True)
class BattleImport:
    study: Study
    battles: int
    missing: tuple[str, ...]


@dataclass(frozen=True)
class _Row:
    image: str
    system_a: str  # as in the file (a: shown left)
    system_b: str
    text_a: str | None
    text_b: str | None
    judge: str
    winner: str | None  # LMArena's name from the file's view; None: no overall verdict
    criteria: dict[str, int]  # our keys, from the file's A view
    line: int = 0
    # The stored fields as a reader names them: one-line names, and texts (captions).
    names: dict[str, str | None] = field(default_factory=dict)
    texts: dict[str, str | None] = field(default_factory=dict)


def _read(path: Path, fmt: str) -> tuple[list[_Row], list[str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path.name}: cannot read the file ({exc})", field="file") from exc
    try:
        if fmt == "battles":
            battles = readers.read_battles_jsonl(lines)
            rows = [
                _Row(
                    b.image or f"battle-{b.line}",
                    b.model_a,
                    b.model_b,
                    b.caption_a,
                    b.caption_b,
                    b.judge or "dataset-judge",
                    b.winner,
                    {},
                    b.line,
                    {
                        "image": b.image,
                        "model_a": b.model_a,
                        "model_b": b.model_b,
                        "judge": b.judge,
                    },
                    {"caption_a": b.caption_a, "caption_b": b.caption_b},
                )
                for b in battles
            ]
        else:
            comparisons = readers.read_iiw_sxs(lines, path.stem)
            rows = [
                _Row(
                    c.image,
                    c.system_a,
                    c.system_b,
                    c.caption_a,
                    c.caption_b,
                    "dataset-judge",
                    None,
                    {_CRITERION_KEYS[name]: value for name, value in c.labels.items()},
                    c.line,
                    {"image": c.image},
                    {
                        f"the {c.system_a} description": c.caption_a,
                        f"the {c.system_b} description": c.caption_b,
                    },
                )
                for c in comparisons
            ]
    except ValueError as exc:
        raise InvalidInput(f"{path.name}: {exc}", field="file") from exc
    # What is stored must be storable: a NUL (PostgreSQL), half a surrogate pair (UTF-8).
    problems = [
        problem
        for row in rows
        for problem in limits.field_problems(
            f"line {row.line}", {**row.names, **row.texts}, multiline=row.texts
        )
    ]
    if problems:
        raise InvalidInput(
            f"{path.name}: " + "; ".join(problems[:20]),
            field="file",
            details={"errors": problems},
        )
    missing = ["image files: the file cites images by id only"]
    if any(row.image.startswith("battle-") for row in rows):
        missing.append("the image of some battles (each gets a placeholder id, battle-<line>)")
    for side in ("a", "b"):
        systems = sorted(
            {getattr(row, f"system_{side}") for row in rows if getattr(row, f"text_{side}") is None}
        )
        if systems:
            missing.append(f"caption texts of {', '.join(systems)} (not in the file)")
    if fmt == "iiw-sxs":
        missing.append(
            "an overall verdict: ImageInWords' SxS has per-criterion labels only, so these "
            "battles enter the per-criterion results and not the leaderboard"
        )
    return rows, missing


def dataset_import_battles(
    *, owner: User, path: Path | str, fmt: str, name: str = ""
) -> BattleImport:
    """Load a battle log (``battles``) or an ImageInWords SxS file (``iiw-sxs``) as a new
    CLOSED arena study; nothing is written when the file or the owner is refused."""
    path = Path(path)
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden(f"{owner.username} is not a researcher")
    if fmt not in BATTLE_FORMATS:
        raise InvalidInput(
            f"unknown format {fmt!r}; choose one of {', '.join(BATTLE_FORMATS)}", field="format"
        )
    rows, missing = _read(path, fmt)
    now = timezone.now()
    with transaction.atomic():
        study = study_create(
            owner=owner,
            name=name or path.name,
            mode="arena",
            settings={"catch_rate": 0, "min_seconds": 0, "criteria": fmt == "iiw-sxs"},
        )
        study.description = ("Imported; missing: " + "; ".join(missing) + ".")[:2000]
        images: dict[str, Image] = {}
        for row in rows:
            if row.image not in images:
                images[row.image] = fileless_image(
                    study=study, name=row.image[:255], source=row.image[:500]
                )
        Image.objects.bulk_create(images.values(), batch_size=1000)
        # One caption per (image, system, text): a system's text of an image is shared by
        # its battles there.
        captions: dict[tuple[str, str, str], Caption] = {}
        for row in rows:
            for system, text in ((row.system_a, row.text_a), (row.system_b, row.text_b)):
                key = (row.image, system, text or "")
                if key not in captions:
                    captions[key] = Caption(
                        study=study,
                        image=images[row.image],
                        system=system[:100],
                        raw_text=text or "",
                        text=text or "",
                        purpose=Caption.Purpose.STUDY,
                        line=len(captions) + 1,
                    )
        Caption.objects.bulk_create(captions.values(), batch_size=1000)
        judges = {
            judge: Participant(
                study=study,
                source=Participant.Source.ACCOUNT,
                external_id=judge[:200],
                state={"imported": True},
            )
            for judge in sorted({row.judge for row in rows})
        }
        Participant.objects.bulk_create(judges.values())
        items, answers = [], []
        for position, row in enumerate(rows):
            caption_a = captions[(row.image, row.system_a, row.text_a or "")]
            caption_b = captions[(row.image, row.system_b, row.text_b or "")]
            swap = row.system_a > row.system_b
            if swap:
                caption_a, caption_b = caption_b, caption_a
            items.append(
                Item(
                    study=study,
                    kind=BATTLE,
                    image=images[row.image],
                    position=position,
                    target=1,
                    judgment_count=1,
                    spec={
                        "caption_a": caption_a.pk,
                        "caption_b": caption_b.pk,
                        "system_a": caption_a.system,
                        "system_b": caption_b.system,
                        "image_id": images[row.image].pk,
                    },
                )
            )
            payload: dict[str, Any] = {"left": "b" if swap else "a"}
            result: dict[str, Any] = {"imported": True, "pair_probability": 1.0}
            if row.winner is not None:
                payload["outcome"] = _SHOWN[row.winner]
                result["winner"] = _SWAP.get(row.winner, row.winner) if swap else row.winner
            else:
                result["winner"] = None
            if row.criteria:
                payload["criteria"] = row.criteria
                sign = -1 if swap else 1
                result["criteria"] = {k: sign * v for k, v in row.criteria.items()}
            answers.append((judges[row.judge], payload, result))
        items = Item.objects.bulk_create(items, batch_size=_BATCH)
        leases = Assignment.objects.bulk_create(
            [
                Assignment(
                    participant=judge,
                    item=item,
                    status=Assignment.Status.SUBMITTED,
                    served_at=now,
                    expires_at=now,
                    submitted_at=now,
                )
                for item, (judge, _, _) in zip(items, answers, strict=True)
            ],
            batch_size=_BATCH,
        )
        Judgment.objects.bulk_create(
            [
                Judgment(
                    study=study,
                    item=item,
                    participant=judge,
                    assignment=lease,
                    part=0,
                    payload=payload,
                    result=result,
                    dwell_ms=0,
                )
                for item, lease, (judge, payload, result) in zip(
                    items, leases, answers, strict=True
                )
            ],
            batch_size=_BATCH,
        )
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status", "description", "updated_at"])
    return BattleImport(study, len(rows), tuple(missing))
