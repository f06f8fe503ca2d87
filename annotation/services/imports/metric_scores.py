"""Per-caption scores of a learned metric or a published judge, added to an existing study.

``metric_scores_import`` writes one named column of ``Caption.metrics`` (the column the
metric lab reads beside the metrics it computes) from a file of scores released with a
paper, matched to the study's captions by image and caption text:

- ``fleur``: FLEUR's released score files (Lee et al., ACL 2024; github.com/Yebin46/FLEUR),
  one entry per caption (Flickr8k-Expert)::

      image file : Flickr8k_Dataset/1056338697_4f7d7ce270.jpg
      caption : A young child is wearing blue goggles ...
      model score : 0.0
      our score : 0.00751495361328125

  or per pair (Pascal-50S): ``image file``, ``label``, then two ``caption`` / ``model
  score`` / ``our score`` groups, and at the end of the file FLEUR's own ``true count`` and
  ``tie count`` (not scores; ignored). Each ``image file`` line starts an entry. The column
  is ``our score`` (FLEUR's final score; ``model score`` is the LLaVA answer before its
  smoothing).
- ``csv``: UTF-8 CSV with ``image``, ``caption`` and one number column ``score``.

Matching. An image matches by its file name without folder and extension, against the
study image's name or source (a Flickr8k-Expert study names its images ``1056338697_...``,
FLEUR writes ``Flickr8k_Dataset/1056338697_....jpg``). A caption matches by its text,
surrounding whitespace ignored. A pair file's pair matches the study's pair (``PairJudgment``)
with the same image and the same two caption texts (in either order: each score goes to
the caption with its text). When the same key occurs several times (one caption text in
two pairs of one image), the k-th occurrence in the file goes to the k-th caption in the
study's import order.

Nothing is written unless every entry of the file matches a caption: a file with any
unmatched or malformed entry is refused with every problem listed. Study captions the file
does not score are counted, not refused (a metric may score a subset).

Human labels in a pair file are kept beside the study's own, never over them: each matched
pair's ``PairJudgment.labels[name]`` (turned to the study's caption order), which the
metric lab scores against when asked (``labels``: FLEUR's published Pascal-50S accuracy is
against its files' labels, which differ from pascal_50s.json's in 35 pairs; issue 47). The
summary counts the pairs whose label in the file differs from the study's.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db import transaction

from annotation.errors import ServiceError
from annotation.models import Caption, PairJudgment, Study
from annotation.services.imports.captions import METRIC_NAME_MAX
from annotation.services.metrics_labels import DATASET
from annotation.text import shown, text_problem
from rubrics.metrics import METRICS

FORMATS = ("fleur", "csv")
_FIELD = re.compile(
    r"^\s*(image file|caption|model score|our score|label|true count|tie count)\s*:\s?(.*)$"
)
#: The summary lines closing a FLEUR pair file (its own accuracy count): not scores.
_SUMMARY = ("true count", "tie count")


@dataclass
class ScoreEntry:
    """One scored caption, or one scored pair (two captions), of the file."""

    source: str
    line: int
    image: str
    captions: list[str]
    scores: list[float]
    label: int | None = None


@dataclass
class MetricScoresSummary:
    """What ``metric_scores_import`` did."""

    name: str
    scored: int
    unscored: int
    pairs: int = 0
    label_differs: int = 0
    files: list[str] = field(default_factory=list)


def _image_key(value: str) -> str:
    return PurePosixPath(value.strip().replace("\\", "/")).stem


def _number(text: str, where: str, errors: list[str]) -> float:
    try:
        value = float(text)
    except ValueError:
        errors.append(f"{where}: {shown(text)!r} is not a number")
        return math.nan
    if not math.isfinite(value):
        errors.append(f"{where}: {shown(text)!r} is not a finite number")
    return value


def read_fleur(text: str, source: str, errors: list[str]) -> list[ScoreEntry]:
    """The entries of a FLEUR score file; every problem goes to ``errors`` with its line.

    Each ``image file`` line starts an entry (a pair's entry has blank lines inside).
    """
    entries: list[ScoreEntry] = []
    block: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        found = _FIELD.match(line)
        if found is None:
            errors.append(f"{source} line {number}: not 'field : value' ({shown(line)})")
            continue
        if found.group(1) in _SUMMARY:
            continue
        if found.group(1) == "image file" and block:
            entries.append(_fleur_block(block, source, errors))
            block = []
        block.append((number, found.group(1), found.group(2).strip()))
    if block:
        entries.append(_fleur_block(block, source, errors))
    return [entry for entry in entries if entry is not None]


def _fleur_block(block: list[tuple[int, str, str]], source: str, errors: list[str]):
    first = block[0][0]
    where = f"{source} line {first}"
    keys = [key for _, key, _ in block]
    image = [value for _, key, value in block if key == "image file"]
    captions = [value for _, key, value in block if key == "caption"]
    scores = [(n, value) for n, key, value in block if key == "our score"]
    labels = [value for _, key, value in block if key == "label"]
    if len(image) != 1 or not image[0]:
        errors.append(f"{where}: an entry needs one 'image file'")
        return None
    if len(captions) not in (1, 2) or len(scores) != len(captions):
        errors.append(
            f"{where}: an entry needs one or two captions, each with an 'our score' "
            f"(found {keys.count('caption')} captions, {len(scores)} scores)"
        )
        return None
    if any(text_problem(c, max_length=None) or not c for c in captions):
        errors.append(f"{where}: a caption is empty or holds a control character")
        return None
    values = [_number(value, f"{source} line {n}", errors) for n, value in scores]
    label = None
    if len(captions) == 2:
        if len(labels) != 1 or labels[0] not in ("0", "1"):
            errors.append(f"{where}: a pair needs 'label : 0' or 'label : 1'")
            return None
        label = int(labels[0])
    return ScoreEntry(source, first, image[0], captions, values, label)


def read_csv(text: str, source: str, errors: list[str]) -> list[ScoreEntry]:
    """The rows of a CSV ``image,caption,score``; every problem goes to ``errors``."""
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    try:
        columns = {c.strip().lower() for c in reader.fieldnames or []}
    except csv.Error as exc:
        errors.append(f"{source} line 1: {exc}")
        return []
    if not {"image", "caption", "score"} <= columns:
        errors.append(f"{source} line 1: the header must have image, caption and score")
        return []
    entries = []
    try:
        for row in reader:
            cells = {(k or "").strip().lower(): (v or "") for k, v in row.items()}
            where = f"{source} line {reader.line_num}"
            image, caption = cells["image"].strip(), cells["caption"].strip()
            if not image or not caption:
                errors.append(f"{where}: empty image or caption")
                continue
            value = _number(cells["score"].strip(), where, errors)
            entries.append(ScoreEntry(source, reader.line_num, image, [caption], [value]))
    except csv.Error as exc:
        errors.append(f"{source} line {reader.line_num}: {exc}")
    return entries


READERS = {"fleur": read_fleur, "csv": read_csv}


def metric_scores_import(
    *, study: Study, paths: list[Path | str], name: str, fmt: str
) -> MetricScoresSummary:
    """Store the scores of ``paths`` (one format) as the column ``name`` of the study's captions,
    and a pair file's labels as the pairs' labels ``name``.

    All or nothing, in one transaction. ServiceError for an unknown format, a bad metric
    name, a name the metric lab computes itself or gives the pairs' own labels
    (``dataset``), an unreadable file, a malformed entry or one that matches no caption of
    the study (every problem listed in ``details["errors"]``, at most
    ``CAPEVAL_MAX_IMPORT_ROWS`` entries in all).
    """
    if fmt not in READERS:
        raise ServiceError(
            f"Unknown scores format {fmt!r}; choose one of {', '.join(FORMATS)}.", field="format"
        )
    name = name.strip()
    problem = text_problem(name, max_length=METRIC_NAME_MAX)
    if not name or problem:
        raise ServiceError(f"The metric name {problem or 'is empty'}.", field="name")
    if name in METRICS:
        raise ServiceError(
            f"{name} is a metric the lab computes; name the imported column otherwise "
            "(for example after the paper and the file).",
            field="name",
        )
    if name == DATASET:  # a pair file's labels go by the column's name
        raise ServiceError(
            f"{DATASET!r} is the metric lab's name for the pairs' own labels; name the "
            "imported column otherwise (for example after the paper).",
            field="name",
        )
    errors: list[str] = []
    entries: list[ScoreEntry] = []
    for path in map(Path, paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ServiceError(f"{path.name}: not a readable UTF-8 file ({exc})") from None
        entries += READERS[fmt](text, path.name, errors)
    limit = settings.CAPEVAL_MAX_IMPORT_ROWS
    if len(entries) > limit:
        raise ServiceError(
            f"{len(entries)} entries; the limit per import is {limit} (CAPEVAL_MAX_IMPORT_ROWS)."
        )
    if not entries and not errors:
        errors.append("no score in the file(s)")
    values, labels, label_differs = _match(study, entries, errors)
    if errors:
        raise ServiceError(
            f"Nothing was imported: {len(errors)} problem(s).", details={"errors": errors[:200]}
        )
    with transaction.atomic():
        rows = list(
            Caption.objects.select_for_update()
            .filter(study=study, purpose=Caption.Purpose.STUDY)
            .only("id", "metrics")
        )
        for row in rows:
            if row.pk in values:
                row.metrics = {**(row.metrics or {}), name: values[row.pk]}
        Caption.objects.bulk_update([r for r in rows if r.pk in values], ["metrics"], 1000)
        judged = list(PairJudgment.objects.filter(pk__in=labels).only("id", "labels"))
        for pair in judged:
            if labels[pair.pk] is not None:
                pair.labels = {**pair.labels, name: labels[pair.pk]}
        PairJudgment.objects.bulk_update(judged, ["labels"], 1000)
    return MetricScoresSummary(
        name=name,
        scored=len(values),
        unscored=len(rows) - len(values),
        pairs=len(labels),
        label_differs=label_differs,
        files=[Path(p).name for p in paths],
    )


def _match(
    study: Study, entries: list[ScoreEntry], errors: list[str]
) -> tuple[dict[int, float], dict[int, int | None], int]:
    """Caption id -> score for every entry (problems to ``errors``), matched pair id -> the
    file's label in the study's caption order (None: the file gives none), and the number
    of pairs whose file label differs from the study's."""
    images: dict[int, set[str]] = {}
    for caption_image, name, source in study.images.values_list("id", "name", "source"):
        images[caption_image] = {_image_key(name), _image_key(source)} - {""}
    captions: dict[tuple[str, str], list[int]] = defaultdict(list)
    text_of: dict[int, str] = {}
    for pk, image_id, text in (
        Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
        .order_by("line", "id")
        .values_list("id", "image_id", "raw_text")
    ):
        text_of[pk] = text.strip()
        for key in images.get(image_id, ()):
            captions[(key, text.strip())].append(pk)
    pairs: dict[tuple[str, frozenset[str]], list[tuple[int, int, int, int]]] = defaultdict(list)
    for pk, a, b, choice, image_id in (
        PairJudgment.objects.filter(study=study)
        .order_by("category", "line", "id")
        .values_list("id", "caption_a_id", "caption_b_id", "choice", "image_id")
    ):
        for key in images.get(image_id, ()):
            texts = frozenset((text_of.get(a, ""), text_of.get(b, "")))
            pairs[(key, texts)].append((pk, a, b, choice))
    used: dict[tuple, int] = defaultdict(int)
    values: dict[int, float] = {}
    labels: dict[int, int | None] = {}
    label_differs = 0
    for entry in entries:
        image = _image_key(entry.image)
        if len(entry.captions) == 1:
            key: tuple = (image, entry.captions[0])
            found = captions.get(key, [])
            if used[key] >= len(found):
                errors.append(
                    f"{entry.source} line {entry.line}: no caption "
                    f"{shown(entry.captions[0])!r} of image {shown(image)} in {study.name}"
                    + (" (or fewer than the file has)" if found else "")
                )
                continue
            values[found[used[key]]] = entry.scores[0]
            used[key] += 1
            continue
        key = (image, frozenset(entry.captions))
        found_pairs = pairs.get(key, [])
        if used[key] >= len(found_pairs):
            errors.append(
                f"{entry.source} line {entry.line}: no pair of image {shown(image)} with these "
                f"two captions in {study.name}"
            )
            continue
        pk, a, b, choice = found_pairs[used[key]]
        used[key] += 1
        if entry.captions[0] == entry.captions[1]:
            values[a], values[b] = entry.scores  # same text twice: the file's order
            file_label = entry.label
        elif entry.captions[0] == text_of[a]:
            values[a], values[b] = entry.scores
            file_label = entry.label
        else:  # the file lists the pair the other way round
            values[b], values[a] = entry.scores
            file_label = None if entry.label is None else 1 - entry.label
        labels[pk] = file_label
        label_differs += int(file_label is not None and file_label != choice)
    return values, labels, label_differs
