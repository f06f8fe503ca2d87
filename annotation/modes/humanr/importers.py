"""HUMANr's importers: published human judgments the metric lab reads, as closed studies
of the pairwise mode whose items are none (no rater answers in them).

- ``pascal-50s`` (Vedantam et al. 2015): its pairwise judgments as ``PairJudgment`` rows
  whose references belong to their pair, for the metric lab's pairwise accuracy. Each pair
  becomes two captions (system = the pair's category, HC/HI/HM/MM), a ``PairJudgment``
  with the humans' choice (the file's majority ``label``) and the pair's own references.
- ``nebula`` (Polaris, Wada et al. CVPR 2024; ``nebula_test.json`` of
  github.com/hjkim811/EXPERT): a JSON list of ``{"imgid", "mt" (the caption), "refs": [5-10
  references], "score" (the human score in [0, 1])}``. The score is the mean over the
  caption's raters and the ratings are not released, so it is stored as a
  ``DatasetScore`` named ``human score`` (not as judgments of a mode). Each entry's
  references become its image's ``Reference`` rows, so the metric lab scores the caption
  against them.

Images are cited, not stored. A file with any bad entry writes nothing; every bad entry is
listed with its position.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from django.conf import settings

from annotation import filelimits
from annotation.errors import ServiceError
from annotation.filelimits import REFERENCE_MAX
from annotation.models import Caption, DatasetScore, Image, PairJudgment, Reference, Study
from annotation.modes.importing import Importer, ImportRows, NewStudy, fileless_image
from annotation.text import text_problem

PASCAL_50S = "pascal-50s"
PASCAL_CATEGORIES = ("HC", "HI", "HM", "MM")
NEBULA = "nebula"
SCORE_NAME = "human score"
SYSTEM = "Nebula"


def _read_json(path: Path) -> Any:
    try:
        # Nesting, syntax and an integer too long to read are named with their line.
        return filelimits.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ServiceError(f"{path.name}: not a readable JSON file ({exc})", field="file") from None


# ---------------------------------------------------------------------- Pascal-50S


def read_pascal50s(path: Path) -> list[dict[str, Any]]:
    """The pairs of a Pascal-50S file, ``{HC|HI|HM|MM: [{image, captions: [c0, c1], label,
    references: [...]}]}``; ServiceError listing every bad pair (category and position)."""
    data = _read_json(path)
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
            problem = _pascal_problem(entry)
            if problem:
                errors.append(f"{category}[{index}]: {problem}")
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


class _PairRows:
    """The pairs' rows for a new study, step by step (each once the previous is saved)."""

    def __init__(self, pairs: list[dict[str, Any]], source: str):
        self.pairs = pairs
        self.source = source
        self.images: dict[str, Image] = {}
        self.captions: list[Caption] = []
        self.judged: list[PairJudgment] = []

    def image_rows(self, study: Study) -> list[Image]:
        for pair in self.pairs:
            if pair["image"] not in self.images:
                self.images[pair["image"]] = fileless_image(
                    study=study, name=pair["image"], source=pair["image"]
                )
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        self.captions = [
            Caption(
                study=study,
                image=self.images[pair["image"]],
                system=pair["category"],
                raw_text=text,
                text=text,
                line=pair["position"] + 1,
            )
            for pair in self.pairs
            for text in pair["captions"]
        ]
        return self.captions

    def pair_rows(self, study: Study) -> list[PairJudgment]:
        self.judged = [
            PairJudgment(
                study=study,
                image=self.images[pair["image"]],
                caption_a=self.captions[2 * k],
                caption_b=self.captions[2 * k + 1],
                choice=pair["label"],
                category=pair["category"],
                source=self.source,
                line=pair["position"] + 1,
            )
            for k, pair in enumerate(self.pairs)
        ]
        return self.judged

    def reference_rows(self, study: Study) -> list[Reference]:
        return [
            Reference(
                study=study,
                image=self.images[pair["image"]],
                pair=judgment,
                text=text,
                source=self.source,
                line=pair["position"] + 1,
            )
            for pair, judgment in zip(self.pairs, self.judged, strict=True)
            for text in pair["references"]
        ]


class Pascal50sImporter(Importer):
    """Pascal-50S: a study without items whose judgments are the imported pairs."""

    formats = (PASCAL_50S,)

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        pairs = read_pascal50s(path)
        built = _PairRows(pairs, path.name[:200])
        references = sum(len(pair["references"]) for pair in pairs)
        return ImportRows(
            study=NewStudy(
                name=f"Pascal-50S ({path.name})",
                settings={},
                description="Imported Pascal-50S pairwise judgments (Vedantam et al. 2015).",
            ),
            steps=(built.image_rows, built.caption_rows, built.pair_rows, built.reference_rows),
            summary=(
                f"{len(pairs)} pairs, {2 * len(pairs)} captions, {references} references, "
                "closed. Compute its metrics on the Metrics page or with compute_metrics.",
            ),
        )


# ---------------------------------------------------------------------- Nebula


def _nebula_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "not an object"
    imgid, caption, refs, score = (entry.get(k) for k in ("imgid", "mt", "refs", "score"))
    if not isinstance(imgid, str) or not imgid.strip() or len(imgid) > 255:
        return "imgid must be a non-empty id of at most 255 characters"
    if text_problem(imgid, max_length=None):
        return f"imgid {text_problem(imgid, max_length=None)}"
    if not isinstance(caption, str) or not caption.strip():
        return "mt (the caption) must be a non-empty text"
    if text_problem(caption, max_length=REFERENCE_MAX):
        return f"mt {text_problem(caption, max_length=REFERENCE_MAX)}"
    if not isinstance(refs, list) or not refs:
        return "refs must be a non-empty list of reference captions"
    for ref in refs:
        if not isinstance(ref, str) or not ref.strip():
            return "every reference must be a non-empty text"
        # Some Nebula references hold a line break; metrics tokenize it as a space.
        problem = text_problem(ref, max_length=REFERENCE_MAX, multiline=True)
        if problem:
            return f"a reference {problem}"
    if isinstance(score, bool) or not isinstance(score, int | float):
        return "score must be a number"
    if not (math.isfinite(score) and 0 <= score <= 1):
        return f"score {score!r} is not in [0, 1]"
    return None


def read_nebula(path: Path) -> list[dict[str, Any]]:
    data = _read_json(path)
    if not isinstance(data, list) or not data:
        raise ServiceError(f"{path.name}: expected a non-empty JSON list of captions", field="file")
    if len(data) > settings.CAPEVAL_MAX_IMPORT_ROWS:
        raise ServiceError(
            f"{path.name}: {len(data)} entries; the limit per import is "
            f"{settings.CAPEVAL_MAX_IMPORT_ROWS} (CAPEVAL_MAX_IMPORT_ROWS).",
            field="file",
        )
    errors = []
    refs_of: dict[str, list[str]] = {}
    for index, entry in enumerate(data):
        problem = _nebula_problem(entry)
        if problem is None:
            refs = [r.strip() for r in entry["refs"]]
            # References belong to the image: one image's entries must agree on them.
            if refs_of.setdefault(entry["imgid"].strip(), refs) != refs:
                problem = f"imgid {entry['imgid']!r} appears before with other refs"
        if problem:
            errors.append(f"entry {index}: {problem}")
    if errors:
        raise ServiceError(
            f"{path.name}: nothing was imported: {len(errors)} bad entr"
            f"{'y' if len(errors) == 1 else 'ies'}.",
            field="file",
            details={"errors": errors[:200]},
        )
    return data


class _ScoredRows:
    """Nebula's rows for a new study, step by step (each once the previous is saved)."""

    def __init__(self, entries: list[dict[str, Any]], source: str):
        self.entries = entries
        self.source = source
        self.images: dict[str, Image] = {}
        self.captions: list[Caption] = []

    def image_rows(self, study: Study) -> list[Image]:
        for entry in self.entries:
            imgid = entry["imgid"].strip()
            if imgid not in self.images:
                self.images[imgid] = fileless_image(study=study, name=imgid, source=imgid)
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        self.captions = [
            Caption(
                study=study,
                image=self.images[e["imgid"].strip()],
                system=SYSTEM,
                raw_text=e["mt"].strip(),
                text=e["mt"].strip(),
                line=index + 1,
            )
            for index, e in enumerate(self.entries)
        ]
        return self.captions

    def reference_rows(self, study: Study) -> list[Reference]:
        seen: set[str] = set()
        references = []
        for index, entry in enumerate(self.entries):
            imgid = entry["imgid"].strip()
            if imgid in seen:
                continue
            seen.add(imgid)
            references += [
                Reference(
                    study=study,
                    image=self.images[imgid],
                    text=r.strip(),
                    source=self.source,
                    line=index + 1,
                )
                for r in entry["refs"]
            ]
        return references

    def score_rows(self, study: Study) -> list[DatasetScore]:
        return [
            DatasetScore(
                study=study,
                caption=caption,
                name=SCORE_NAME,
                value=float(entry["score"]),
                source=self.source,
                line=index + 1,
            )
            for index, (caption, entry) in enumerate(zip(self.captions, self.entries, strict=True))
        ]


class NebulaImporter(Importer):
    """Nebula: captions, their images' references and the released human scores."""

    formats = (NEBULA,)

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        entries = read_nebula(path)
        built = _ScoredRows(entries, path.name[:200])
        images = {entry["imgid"].strip(): len(entry["refs"]) for entry in entries}
        return ImportRows(
            study=NewStudy(
                name=f"Nebula ({path.name})",
                settings={},
                description="Imported Nebula captions, references and human scores (Polaris).",
            ),
            steps=(built.image_rows, built.caption_rows, built.reference_rows, built.score_rows),
            summary=(
                f"{len(entries)} captions, {sum(images.values())} references, "
                f"{len(entries)} human scores, closed. Compute its metrics on the Metrics page "
                "or with compute_metrics.",
            ),
        )
