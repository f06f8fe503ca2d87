"""Pascal-50S (Vedantam et al. 2015): its pairwise judgments stored as a closed HUMANr study
of ``PairJudgment`` rows whose references belong to their pair, for the metric lab's
pairwise accuracy. An importer of a published release: it creates a study of that
release's mode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import transaction

from annotation.errors import Forbidden, ServiceError
from annotation.models import Caption, Image, PairJudgment, Reference, Study, User
from annotation.services.datasets import fileless_image
from annotation.services.imports import limits
from annotation.services.imports.references import REFERENCE_MAX
from annotation.services.studies import study_create
from annotation.text import text_problem

PASCAL_CATEGORIES = ("HC", "HI", "HM", "MM")


def _read_pascal50s(path: Path) -> list[dict[str, Any]]:
    """The pairs of a Pascal-50S file, ``{HC|HI|HM|MM: [{image, captions: [c0, c1], label,
    references: [...]}]}``; ServiceError listing every bad pair (category and position)."""
    try:
        # Nesting, syntax and an integer too long to read are named with their line.
        data = limits.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ServiceError(f"{path.name}: not a readable JSON file ({exc})", field="file") from None
    if not isinstance(data, dict) or not data:
        raise ServiceError(
            f"{path.name}: expected an object of pair lists by category "
            f"({', '.join(PASCAL_CATEGORIES)})",
            field="file",
        )
    pairs, errors = [], []
    for category, entries in data.items():
        if category not in PASCAL_CATEGORIES or not isinstance(entries, list):
            errors.append(f"{category!r}: not a list of pairs of a Pascal-50S category")
            continue
        for index, entry in enumerate(entries):
            where = f"{category}[{index}]"
            problem = _pascal_problem(entry)
            if problem:
                errors.append(f"{where}: {problem}")
                continue
            pairs.append(
                {
                    "category": category,
                    "position": index,
                    "image": entry["image"].strip(),
                    "captions": [c.strip() for c in entry["captions"]],
                    "label": entry["label"],
                    "references": [r.strip() for r in entry["references"]],
                }
            )
    if errors:
        raise ServiceError(
            f"{len(errors)} bad pair(s) in {path.name}; nothing imported.",
            field="file",
            details={"errors": errors[:200]},
        )
    if not pairs:
        raise ServiceError(f"{path.name} holds no pairs; nothing imported.", field="file")
    return pairs


def _pascal_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "not an object"
    image, captions, refs = entry.get("image"), entry.get("captions"), entry.get("references")
    if not isinstance(image, str) or not image.strip() or text_problem(image, max_length=255):
        return "image must be a file path of at most 255 characters"
    if not isinstance(captions, list) or len(captions) != 2:
        return "captions must be a list of two captions"
    if entry.get("label") not in (0, 1) or isinstance(entry.get("label"), bool):
        return "label must be 0 or 1 (the index of the caption people preferred)"
    if not isinstance(refs, list) or not refs:
        return "references must be a non-empty list"
    for what, text in [*(("caption", c) for c in captions), *(("reference", r) for r in refs)]:
        if not isinstance(text, str) or not text.strip():
            return f"a {what} is empty or not text"
        problem = text_problem(text.strip(), max_length=REFERENCE_MAX)
        if problem:
            return f"a {what} {problem}"
    return None


def dataset_import_pascal50s(*, owner: User, path: Path | str, name: str = "") -> Study:
    """Load Pascal-50S pairwise judgments as a new CLOSED study for the metric lab.

    Each pair becomes two captions (system = the pair's category, HC/HI/HM/MM), a
    ``PairJudgment`` with the humans' choice (the file's majority ``label``) and the pair's
    own references. The study is a HUMANr study (the pairwise mode) without items: its
    judgments are the imported pairs. Images are cited, not stored. All or nothing.
    """
    path = Path(path)
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden(f"{owner.username} is not a researcher")
    pairs = _read_pascal50s(path)
    from_file = path.name[:200]
    with transaction.atomic():
        study = study_create(
            owner=owner,
            name=name or f"Pascal-50S ({path.name})",
            mode="humanr",
            settings={},
            description="Imported Pascal-50S pairwise judgments (Vedantam et al. 2015).",
        )
        images: dict[str, Image] = {}
        for pair in pairs:
            if pair["image"] not in images:
                images[pair["image"]] = fileless_image(
                    study=study, name=pair["image"], source=pair["image"]
                )
        Image.objects.bulk_create(images.values(), batch_size=2000)
        captions = Caption.objects.bulk_create(
            [
                Caption(
                    study=study,
                    image=images[pair["image"]],
                    system=pair["category"],
                    raw_text=text,
                    text=text,
                    line=pair["position"] + 1,
                )
                for pair in pairs
                for text in pair["captions"]
            ],
            batch_size=2000,
        )
        judged = PairJudgment.objects.bulk_create(
            [
                PairJudgment(
                    study=study,
                    image=images[pair["image"]],
                    caption_a=captions[2 * k],
                    caption_b=captions[2 * k + 1],
                    choice=pair["label"],
                    category=pair["category"],
                    source=from_file,
                    line=pair["position"] + 1,
                )
                for k, pair in enumerate(pairs)
            ],
            batch_size=2000,
        )
        Reference.objects.bulk_create(
            [
                Reference(
                    study=study,
                    image=images[pair["image"]],
                    pair=judgment,
                    text=text,
                    source=from_file,
                    line=pair["position"] + 1,
                )
                for pair, judgment in zip(pairs, judged, strict=True)
                for text in pair["references"]
            ],
            batch_size=2000,
        )
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status", "updated_at"])
    return study
