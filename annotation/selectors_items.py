"""Reads of the data browser: a study's images, their captions by system, and every
judgment about each caption (``/studies/<id>/items/``, ``GET /api/studies/<id>/items/`` and
``GET /api/studies/<id>/judgments/``).

Which captions a judgment is about, and its answer in words, is the mode's to say
(``mode.browse.notes``, ``annotation/modes/browsing.py``); this module only loads rows.
A page costs the same few queries whatever its size: the page's images, their captions,
their published scores, the judgments of every item showing one of the images (with the
participant and the item joined), then the mode reads the judgments in memory. A test
counts the queries of one and of three pages' worth of data.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery

from annotation.errors import ServiceError
from annotation.models import Caption, Image, Item, ItemImage, Judgment, Participant, Study
from annotation.models.metric_lab import DatasetScore
from annotation.modes import get_mode
from annotation.registry import caption_purpose_choices
from annotation.text import shown, text_problem

#: Images per page of the browser: at a few captions each and a few judgments per caption,
#: a page a researcher can scan, well inside the 300 ms page budget (bench/pages.py).
IMAGES_PER_PAGE = 20
#: Judgments loaded per item on a page: a VICR tutorial pair is rated by every player
#: (thousands), which no page can list; the rest are a filtered API call away
#: (``/api/studies/<id>/judgments/?item=``), and the page says how many it leaves out.
JUDGMENTS_PER_ITEM = 20
#: The columns a page loads of a judgment, its participant and its item.
JUDGMENT_FIELDS = (
    "id", "item_id", "participant_id", "part", "payload", "result", "dwell_ms", "excluded",
    "exclusion_reason", "created_at", "participant__pseudonym", "participant__source",
    "item__kind", "item__spec", "item__image_id",
)  # fmt: skip
#: Longest search text, and longest system name (``Caption.system``'s length).
SEARCH_MAX_CHARS = 200
SYSTEM_MAX_CHARS = 100


@dataclass(frozen=True)
class BrowseFilters:
    """What the browser shows: captions of ``system`` and ``purpose`` ("": any), of images
    whose name or one of whose captions contains ``search`` (case-insensitive)."""

    system: str = ""
    purpose: str = ""
    search: str = ""

    def query(self) -> dict[str, str]:
        """The filters as query-string values (empty ones left out), for page links."""
        values = {"system": self.system, "purpose": self.purpose, "q": self.search}
        return {key: value for key, value in values.items() if value}


def browse_filters(params: Any) -> BrowseFilters:
    """The filters of a request's query ``params`` (``system``, ``purpose``, ``q``), or
    ServiceError naming the bad one: an unknown purpose, a text too long or holding a
    control character (PostgreSQL refuses NUL in a query)."""
    values = {}
    for key, limit in (("system", SYSTEM_MAX_CHARS), ("q", SEARCH_MAX_CHARS)):
        value = str(params.get(key) or "").strip()
        problem = text_problem(value, max_length=limit)
        if problem:
            name = "The search text" if key == "q" else "The system"
            raise ServiceError(f"{name} {problem}.", field=key)
        values[key] = value
    purpose = str(params.get("purpose") or "").strip()
    purposes = [value for value, _ in caption_purpose_choices()]
    if purpose and purpose not in purposes:
        choices = ", ".join(purposes)
        raise ServiceError(
            f"Unknown caption purpose {shown(purpose)!r}; choose {choices}.", field="purpose"
        )
    return BrowseFilters(system=values["system"], purpose=purpose, search=values["q"])


def _caption_filter(filters: BrowseFilters) -> Q:
    q = Q()
    if filters.system:
        q &= Q(system=filters.system)
    if filters.purpose:
        q &= Q(purpose=filters.purpose)
    return q


def browse_images(study: Study, filters: BrowseFilters) -> QuerySet[Image]:
    """The study's images the filters keep, in import order: with a system or purpose, those
    with such a caption; with a search text, those whose name or one of whose captions (as
    shown or as imported) contains it."""
    images = Image.objects.filter(study=study)
    kept = _caption_filter(filters)
    captions = Caption.objects.filter(kept, image=OuterRef("pk"))
    if filters.search:
        text = Q(text__icontains=filters.search) | Q(raw_text__icontains=filters.search)
        named = Q(name__icontains=filters.search)
        if kept:
            named &= Exists(captions)
        images = images.filter(named | Exists(captions.filter(text)))
    elif kept:
        images = images.filter(Exists(captions))
    return images.order_by("id")


def study_systems(study: Study) -> list[str]:
    """The systems of the study's captions, sorted (the browser's filter choices)."""
    return sorted(
        Caption.objects.filter(study=study).values_list("system", flat=True).distinct().order_by()
    )


#: What the browser says instead of a pseudonym in a study whose mode asks raters' vision.
UNNAMED_RATER = "a rater"
#: Why, as the page and the refused filter say it.
UNNAMED_WHY = (
    "This study asks raters whether they can see (their vision), and an item's kind says "
    "which group it was served to, so judgments here name no rater: a pseudonym beside a "
    "kind would tell that rater's vision to everyone who reads the study."
)


def names_raters(study: Study) -> bool:
    """Whether judgment rows may carry the participant's pseudonym: not when the study's
    mode asks raters' vision (``Mode.asks_vision``). Its items are served by group (a kind
    per group) and some parts only to one group, so a row's kind or part tells the rater's
    vision, and the dashboard, the crowd review and the exports tie a pseudonym to a crowd
    worker id: a named row would put a health attribute beside a worker id."""
    return not get_mode(study.mode).asks_vision


def _judgment_row(judgment: Judgment, kinds: dict[str, str], named: bool) -> dict[str, Any]:
    participant = judgment.participant
    return {
        "id": judgment.pk,
        "item": judgment.item_id,
        "kind": judgment.item.kind,
        "kind_label": kinds.get(judgment.item.kind, judgment.item.kind),
        "part": judgment.part,
        "participant": participant.pseudonym if named else None,
        "source": participant.get_source_display(),
        "created_at": judgment.created_at,
        "dwell_ms": judgment.dwell_ms,
        "excluded": judgment.excluded,
        "exclusion_reason": judgment.exclusion_reason,
    }


def _judgments_of_images(study: Study, image_ids: list[int]) -> tuple[list[Judgment], dict]:
    """The first ``JUDGMENTS_PER_ITEM`` judgments of every item showing one of the images
    (its own image, or an ``ItemImage`` link: HUMANr's groups), with the participant and
    the item, and ``{item id: judgments in all}`` of the items that have more. Two queries
    whatever the page's size.

    First the items, each with the id of its ``JUDGMENTS_PER_ITEM``-th judgment and its
    count (correlated subqueries walking the judgments' item index, a few entries per
    item); then the judgments up to that id per item. A window function (row number per
    item) did the same in one query but ranked every judgment of the page's items first:
    thousands for a VICR tutorial pair at 20,000 pairs.
    """
    per_item = Judgment.objects.filter(item_id=OuterRef("pk")).order_by()
    items = Item.objects.filter(
        Q(study=study, image_id__in=image_ids)
        | Q(pk__in=ItemImage.objects.filter(image_id__in=image_ids).values("item_id"))
    ).annotate(
        cutoff=Subquery(
            per_item.order_by("id").values("id")[JUDGMENTS_PER_ITEM - 1 : JUDGMENTS_PER_ITEM]
        ),
        total=Subquery(per_item.values("item_id").annotate(n=Count("id")).values("n")),
    )
    shown = Q(pk__in=[])
    capped = {}
    for item_id, cutoff, total in items.order_by().values_list("pk", "cutoff", "total"):
        if cutoff is None or total <= JUDGMENTS_PER_ITEM:
            shown |= Q(item_id=item_id)
        else:
            shown |= Q(item_id=item_id, id__lte=cutoff)
            capped[item_id] = total
    judgments = list(
        # No study filter: the items are the study's, and with one SQLite reads the
        # judgments by the (study, id) index, every judgment of the study, not by item.
        Judgment.objects.filter(shown)
        .select_related("participant", "item")
        # Not the participant's state and flags (JSON decoded per row, a VICR player's
        # state is long): what the rows show, and what the modes' notes read.
        .only(*JUDGMENT_FIELDS)
        .order_by("id")
    )
    return judgments, capped


def _human_scores(notes: list[tuple[dict[str, Any], Any]], order: tuple[str, ...]) -> list:
    """``[{name, mean, n}]`` over the notes of judgments not excluded, ``order`` first."""
    values: dict[str, list[float]] = defaultdict(list)
    for row, note in notes:
        if not row["excluded"]:
            for name, value in note.scores.items():
                values[name].append(value)
    names = [n for n in order if n in values] + sorted(set(values) - set(order))
    return [
        {"name": name, "mean": sum(values[name]) / len(values[name]), "n": len(values[name])}
        for name in names
    ]


def browse_rows(study: Study, filters: BrowseFilters, images: list[Image]) -> list[dict]:
    """One row per image of ``images`` (a page): its captions the filters keep, by system,
    each with its metric scores, published human scores, human scores (means of the
    judgments' scores, excluded judgments left out) and judgments; and the notes of
    judgments about the image as a whole (a mode that names no caption).

    Only the first ``JUDGMENTS_PER_ITEM`` judgments of an item are loaded (and averaged);
    a caption's ``left_out`` lists ``{item, judgments}`` (judgments in all) of its items with
    more.
    """
    mode = get_mode(study.mode)
    image_ids = [image.pk for image in images]
    captions = list(
        Caption.objects.filter(_caption_filter(filters), study=study, image_id__in=image_ids)
        .only("id", "image_id", "system", "text", "raw_text", "purpose", "metrics")
        .order_by("image_id", "system", "id")
    )
    published: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for caption_id, name, value in DatasetScore.objects.filter(
        study=study, caption_id__in=[caption.pk for caption in captions]
    ).values_list("caption_id", "name", "value"):
        published[caption_id].append({"name": name, "value": value})
    judgments, capped = _judgments_of_images(study, image_ids)
    kinds = mode.kind_labels
    named = not mode.asks_vision  # see names_raters
    by_caption: dict[int, list] = defaultdict(list)
    by_image: dict[int, list] = defaultdict(list)
    notes = mode.browse.notes(study, judgments)
    for judgment in judgments:
        row = _judgment_row(judgment, kinds, named)
        for note in notes.get(judgment.pk, []):
            if note.caption_id is None:
                by_image[judgment.item.image_id].append(({**row, "what": note.what}, note))
            else:
                by_caption[note.caption_id].append(({**row, "what": note.what}, note))
    by_image_captions: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for caption in captions:
        noted = by_caption.get(caption.pk, [])
        left_out = {
            row["item"]: capped[row["item"]] for row, _note in noted if row["item"] in capped
        }
        by_image_captions[caption.image_id].append(
            {
                "caption": caption,
                "left_out": [
                    {"item": item, "judgments": n} for item, n in sorted(left_out.items())
                ],
                "metrics": sorted((caption.metrics or {}).items()),
                "published": published.get(caption.pk, []),
                "human": _human_scores(noted, mode.browse.score_names),
                "judgments": [row for row, _note in noted],
            }
        )
    return [
        {
            "image": image,
            "captions": by_image_captions.get(image.pk, []),
            "image_judgments": [row for row, _note in by_image.get(image.pk, [])],
        }
        for image in images
    ]


def judgment_filters(params: Any) -> dict[str, Any]:
    """The judgment list's filters from query ``params``: ``item`` and ``caption`` (ids),
    ``participant`` (a pseudonym), ``excluded`` (true/false); ServiceError naming a bad
    one."""
    out: dict[str, Any] = {}
    for key in ("item", "caption"):
        value = str(params.get(key) or "").strip()
        if value:
            if not (value.isascii() and value.isdigit()) or len(value) > 18:
                raise ServiceError(f"{key} must be a whole number (an id).", field=key)
            out[key] = int(value)
    pseudonym = str(params.get("participant") or "").strip()
    if pseudonym:
        problem = text_problem(pseudonym, max_length=16)
        if problem:
            raise ServiceError(f"participant {problem}.", field="participant")
        out["participant"] = pseudonym
    excluded = str(params.get("excluded") or "").strip().lower()
    if excluded:
        if excluded not in ("true", "false"):
            raise ServiceError("excluded must be true or false.", field="excluded")
        out["excluded"] = excluded == "true"
    return out


def judgments_list(study: Study, filters: dict[str, Any]) -> QuerySet[Judgment]:
    """The study's judgments the filters keep, in the order they were stored. ``caption``
    keeps the judgments of items showing the caption's image (``judgment_rows`` then keeps
    those the mode says are about the caption)."""
    judgments = (
        Judgment.objects.filter(study=study)
        .select_related("participant", "item")
        .only(*JUDGMENT_FIELDS)
        .order_by("id")
    )
    if "item" in filters:
        judgments = judgments.filter(item_id=filters["item"])
    if "participant" in filters:
        if not names_raters(study):
            # The rows name no rater; a pseudonym's own rows would tell its kinds again.
            raise ServiceError(
                f"Judgments cannot be listed by participant in this study. {UNNAMED_WHY}",
                field="participant",
            )
        judgments = judgments.filter(
            participant__in=Participant.objects.filter(
                study=study, pseudonym=filters["participant"]
            )
        )
    if "excluded" in filters:
        judgments = judgments.filter(excluded=filters["excluded"])
    if "caption" in filters:
        image_id = (
            Caption.objects.filter(study=study, pk=filters["caption"])
            .values_list("image_id", flat=True)
            .first()
        )
        if image_id is None:
            return judgments.none()
        items = Item.objects.filter(study=study, image_id=image_id).values("pk")
        linked = ItemImage.objects.filter(image_id=image_id).values("item_id")
        judgments = judgments.filter(Q(item_id__in=items) | Q(item_id__in=linked))
    return judgments


def judgment_rows(
    study: Study, judgments: list[Judgment], *, caption: int | None = None
) -> list[dict[str, Any]]:
    """The API's rows of ``judgments`` (loaded with participant and item): the fields of the
    browser, the payload and result as stored, and the mode's notes (``caption``: only the
    judgments with a note about it, and only those notes)."""
    mode = get_mode(study.mode)
    kinds = mode.kind_labels
    named = not mode.asks_vision  # see names_raters
    notes = mode.browse.notes(study, judgments)
    rows = []
    for judgment in judgments:
        kept = [
            {"caption": note.caption_id, "what": note.what, "scores": note.scores}
            for note in notes.get(judgment.pk, [])
            if caption is None or note.caption_id == caption
        ]
        if caption is not None and not kept:
            continue
        rows.append(
            {
                **_judgment_row(judgment, kinds, named),
                "payload": judgment.payload,
                "result": judgment.result,
                "notes": kept,
            }
        )
    return rows
