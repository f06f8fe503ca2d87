"""HUMANr attention checks drawn for each worker when a group is served (issue 29, row 2).

A check shows an image with one of its human captions and a human caption of another
image. Built once per group, it was the same for every worker of the group, so scout ids
recorded it and a bot passed every check while answering junk. So a group's spec only
says *where* its check goes; *what* it shows is drawn for each lease:

* the pool: every image of the study with a human caption of purpose ``study``, also
  those outside the ``n_images`` draw (the larger the pool, the less a scout's record of
  some images says about the next id's check);
* the check image and the distractor image: the first two images of a permutation of the
  pool, skipping the images the worker met before this lease (its groups' images and its
  earlier checks' images) and this group's own images; so nobody meets an image twice;
* the correct caption and the distractor: one human caption of each, at random, from the
  captions no comparison of the study shows and no check answered before the lease was
  served showed (issue 45, row 6: scout ids in other browsers wrote down which image each
  caption they met belongs to, and a bot with their notes recognised the distractor; now a
  check's captions are ones nobody else has seen). An image with no such caption left is
  not drawn; when fewer than two are left, the draw falls back to every human caption (a
  study whose images have few human captions: docs/protocol-choices.md).

Nothing is stored: the draw is a function of (the site's secret, the study seed, the
lease's participant, the lease's item), of what the worker met in their earlier leases
(lower ids, which never change) and of the checks answered before the lease was served
(which never change either; a check the worker answered is read back from its judgment).
The secret (``salted_hmac`` over ``SECRET_KEY``) makes one id's draw unpredictable from
another's, also for someone who knows the study seed. The page, the scoring and the
exposure rule compute the same draw (the answer takes it from the page's form once the
server's tag and the study's captions verify it: ``shown_field``, ``posted_check``); the
judgment's ``result`` records what was shown, which is what the report and the exclusion
rule read.

A worker is a browser, as for exposure (``HumanrProtocol.eligible_items``): the leases of
every participant of the study sharing the lease participant's ``browser_id`` count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Q
from django.utils.crypto import constant_time_compare, salted_hmac

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, ItemImage, Judgment, Participant, Study
from annotation.models.rows import columns, converted, cursor
from rubrics.humanr import GROUP_SIZE

#: The two images a check needs besides its group's: the shown one and the distractor's.
CHECK_IMAGES = 2
_SALT = "capeval.humanr.attention-check"
_CHECK = "attention_check"


@dataclass(frozen=True)
class CheckDraw:
    """The two images of one lease's check: the one shown and the distractor's."""

    image_id: int
    distractor_image_id: int


@dataclass
class StudyCaptions:
    """What a study's checks may show that never changes once the study is open (captions
    and images land only in a draft, and its groups are built when it opens): ``human``
    (image -> its human captions of purpose ``study``, in id order), ``names`` (image -> its
    name, which a check's stored result records), ``texts`` (caption -> its text) and
    ``images`` (image -> ``IMAGE_FIELDS``' values) of those captions, which a check's page
    shows (issue 48: read with the captions, the page needs no read of its own after the
    draw), and ``spare`` (those no comparison shows, read on first use: only a lease whose
    check is not answered yet is drawn)."""

    study_id: int
    human: dict[int, list[int]]
    names: dict[int, str] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    images: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    @cached_property
    def image_of(self) -> dict[int, int]:
        """Caption -> its image, of the human captions."""
        return {caption: image for image, ids in self.human.items() for caption in ids}

    @cached_property
    def spare(self) -> dict[int, list[int]]:
        shown = comparison_captions(self.study_id)
        return {
            image: kept
            for image, ids in self.human.items()
            if (kept := [c for c in ids if c not in shown])
        }


#: ``StudyCaptions`` per study public id (random, never reused, unlike a test database's
#: pk), kept by the process for open studies: every claim's exposure rule and every check's
#: draw read them, and reading them was a query each (two on a check's page and answer).
#: Never stale: a study with items never goes back to draft (``study_reopen``), and only a
#: draft takes captions and images. Bounded: a process serving many studies reads them
#: again rather than grow (the texts are the bulk: a study of 1,000 images with 10 human
#: captions each keeps about 10,000 short strings).
_STUDY_CAPTIONS: dict[str, StudyCaptions] = {}
_STUDY_CAPTIONS_MAX = 256


@dataclass
class CheckCaptions:
    """The human captions of a study's checks: ``human`` and ``spare`` (``StudyCaptions``)
    and ``shown_at`` (caption -> when an answered check first showed it), which grows as
    checks are answered, so it is read per request, on first use (issue 48: the exposure
    rule of a claim usually finds every earlier check of the worker answered)."""

    study_id: int
    fixed: StudyCaptions

    @property
    def human(self) -> dict[int, list[int]]:
        return self.fixed.human

    @property
    def spare(self) -> dict[int, list[int]]:
        return self.fixed.spare

    @cached_property
    def shown_at(self) -> dict[int, datetime]:
        first: dict[int, datetime] = {}
        for created, reference, other in (
            Judgment.objects.filter(study_id=self.study_id, result__kind=_CHECK)
            .order_by("created_at")
            .values_list("created_at", "result__reference_caption_id", "result__other_caption_id")
        ):
            for caption in (reference, other):
                if isinstance(caption, int):
                    first.setdefault(caption, created)
        return first

    def unseen(self, served_at: datetime | None) -> dict[int, list[int]]:
        """Per image, the spare captions no check answered before ``served_at`` showed."""
        left: dict[int, list[int]] = {}
        for image, ids in self.spare.items():
            kept = [
                caption
                for caption in ids
                if caption not in self.shown_at
                or served_at is None
                or self.shown_at[caption] >= served_at
            ]
            if kept:
                left[image] = kept
        return left


def comparison_captions(study_id: int) -> set[int]:
    """Every caption a comparison (or a check built before issue 29) of the study shows: one
    query reading each group's trials (one JSON document per group: reading two keys of
    each of ``GROUP_SIZE`` trials was twenty values to decode per group, twice the CPU)."""
    shown: set[int] = set()
    for trials in Item.objects.filter(study_id=study_id).values_list("spec__trials", flat=True):
        for trial in (trials or [])[:GROUP_SIZE]:
            for side in ("reference_caption_id", "other_caption_id"):
                if isinstance(value := trial.get(side), int):
                    shown.add(value)
    return shown


#: What ``StudyCaptions.images`` keeps of an image: what a trial page shows of it
#: (``pages.IMAGE_FIELDS`` but the id).
IMAGE_FIELDS = ("display", "width", "height", "alt_text")


def check_captions(study: Study) -> CheckCaptions:
    """The study's ``CheckCaptions``: its human captions with their texts and images (one
    query, once per process for an open study), the rest on use."""
    key = str(study.public_id)
    fixed = _STUDY_CAPTIONS.get(key)
    if fixed is None:
        fixed = StudyCaptions(study_id=study.pk, human={})
        image_columns = tuple(f"image__{name}" for name in IMAGE_FIELDS)
        for caption_id, image_id, name, text, *image in (
            Caption.objects.filter(
                study_id=study.pk, purpose=Caption.Purpose.STUDY, system=Caption.HUMAN
            )
            .order_by("id")
            .values_list("id", "image_id", "image__name", "text", *image_columns)
        ):
            fixed.human.setdefault(image_id, []).append(caption_id)
            fixed.names[image_id] = name
            fixed.texts[caption_id] = text
            fixed.images[image_id] = tuple(image)
        if study.status != Study.Status.DRAFT:
            if len(_STUDY_CAPTIONS) >= _STUDY_CAPTIONS_MAX:
                _STUDY_CAPTIONS.clear()
            _STUDY_CAPTIONS[key] = fixed
    return CheckCaptions(study_id=study.pk, fixed=fixed)


def _generator(study_seed: int, participant_id: int, item_id: int) -> np.random.Generator:
    key = salted_hmac(_SALT, f"{int(study_seed)}:{int(participant_id)}:{int(item_id)}").digest()
    return np.random.default_rng(int.from_bytes(key[:16], "big"))


def _draw(rng: np.random.Generator, pool: list[int], barred: set[int]) -> CheckDraw | None:
    """The first two images of a permutation of ``pool`` outside ``barred`` (None if fewer)."""
    chosen: list[int] = []
    for index in rng.permutation(len(pool)):
        image = pool[int(index)]
        if image not in barred:
            chosen.append(image)
            if len(chosen) == CHECK_IMAGES:
                return CheckDraw(chosen[0], chosen[1])
    return None


def worker_query(participant: Participant) -> Q:
    """Participants who are one worker with ``participant`` for exposure: same browser."""
    same = Q(pk=participant.pk)
    if participant.browser_id:
        same |= Q(study_id=participant.study_id, browser_id=participant.browser_id)
    return same


@dataclass
class WorkerLease:
    """One lease of the worker as ``worker_checks`` reads it: its group's images and, once
    its check is answered, what the check's judgment stored (``answer``, else None)."""

    participant_id: int
    item_id: int
    served_at: datetime | None
    images: set[int] = field(default_factory=set)
    answer: dict[str, Any] | None = None


#: What ``worker_leases`` reads of an answered check's ``result``.
ANSWER_KEYS = ("image_id", "image_name", "reference_caption_id", "other_caption_id")


#: The worker's leases (``worker_query``: the participant and its browser-mates), in id order,
#: a row per lease and image of its group, with the lease's answered check (its judgment's
#: id and ``result``, NULL while unanswered; a lease has at most one check judgment, one
#: check per group and one judgment per part, so joining it keeps a row per image).
#: ``{kind}``: the judgment's ``result["kind"]`` in the vendor's JSON; ``{upto}``: empty, or
#: a bound on the lease id; ``{shown}``: empty, or ``SHOWN``. One fixed statement (issue 48):
#: built by the ORM (a filtered relation, JSON keys), this read cost a claim more CPU than
#: the rest of its reads. Params: participant id, study id, browser id or None, then the
#: bound if any, then ``SHOWN``'s if any.
WORKER_LEASES = f"""
SELECT {columns("a", Assignment, ("id", "participant_id", "item_id", "served_at"))},
       ii."image_id", j."id", j."result"
FROM "{Assignment._meta.db_table}" a
LEFT JOIN "{ItemImage._meta.db_table}" ii ON ii."item_id" = a."item_id"
LEFT JOIN "{Judgment._meta.db_table}" j ON j."assignment_id" = a."id" AND {{kind}} = '{_CHECK}'
WHERE a."participant_id" IN (
    SELECT p."id" FROM "{Participant._meta.db_table}" p
    WHERE p."id" = %s OR (p."study_id" = %s AND p."browser_id" = %s))
  {{upto}}
{{shown}}
ORDER BY 1, 4
"""
#: ``CheckCaptions.shown_at``'s read as rows of ``WORKER_LEASES`` (issue 48: a check's page
#: and answer drew their check with two reads, the worker's leases and this): the study's
#: answered checks, each with a NULL lease id, its time where a lease has ``served_at``
#: and its two captions where a lease has its image and its judgment's id (NULL when not
#: an integer, as ``shown_at`` skips them); ``ORDER BY 1, 4`` puts them in time order.
#: ``{kind}``, ``{reference}``, ``{other}``: the vendor's reads of ``result`` (alias
#: ``sj``). Params: study id.
SHOWN = f"""
UNION ALL
SELECT NULL, NULL, NULL, sj."created_at", {{reference}}, {{other}}, NULL
FROM "{Judgment._meta.db_table}" sj
WHERE sj."study_id" = %s AND {{kind}} = '{_CHECK}'
"""
#: ``WORKER_LEASES``'s ``{kind}`` per vendor.
RESULT_KIND = {
    "postgresql": """j."result" ->> 'kind'""",
    "sqlite": """json_extract(j."result", '$.kind')""",
}


def int_key(alias: str, key: str) -> str:
    """The vendor's read of ``result[key]`` of judgment ``alias`` when it is an integer (a
    stored caption id), else NULL."""
    if connection.vendor == "postgresql":
        text = f"""({alias}."result" ->> '{key}')"""
        return (
            f"""CASE WHEN jsonb_typeof({alias}."result" -> '{key}') = 'number'"""
            f""" AND {text} ~ '^-?[0-9]+$' THEN {text}::bigint END"""
        )
    return (
        f"""CASE WHEN json_type({alias}."result", '$.{key}') = 'integer'"""
        f""" THEN json_extract({alias}."result", '$.{key}') END"""
    )


def result_kind(alias: str) -> str:
    """The vendor's read of ``result["kind"]`` of judgment ``alias``."""
    return RESULT_KIND[connection.vendor].replace("j.", f"{alias}.", 1)


def _shown_sql() -> str:
    return SHOWN.format(
        kind=result_kind("sj"),
        reference=int_key("sj", "reference_caption_id"),
        other=int_key("sj", "other_caption_id"),
    )


def worker_leases(
    participant: Participant, *, upto: int | None = None, shown: bool = False
) -> tuple[dict[int, WorkerLease], dict[int, datetime] | None]:
    """The worker's leases by id, in id order (up to lease ``upto``, included), with their
    groups' images and their answered checks: one query (``WORKER_LEASES``). With
    ``shown``, the same query also reads ``CheckCaptions.shown_at`` (returned second; else
    None)."""
    sql = WORKER_LEASES.format(
        kind=RESULT_KIND[connection.vendor],
        upto="" if upto is None else 'AND a."id" <= %s',
        shown=_shown_sql() if shown else "",
    )
    # As ``worker_query``: an empty browser id names no browser.
    params = [participant.pk, participant.study_id, participant.browser_id or None]
    if upto is not None:
        params.append(upto)
    if shown:
        params.append(participant.study_id)
    with cursor() as reading:
        reading.execute(sql, params)
        rows = reading.fetchall()
    found: dict[int, WorkerLease] = {}
    first: dict[int, datetime] | None = {} if shown else None
    for lease_id, participant_id, item_id, served_at, image_id, answer_id, result in rows:
        if lease_id is None:  # a row of ``SHOWN``: an answered check's time and captions
            (created,) = converted(Judgment, ("created_at",), (served_at,))
            for caption in (image_id, answer_id):
                if caption is not None and first is not None:
                    first.setdefault(int(caption), created)
            continue
        lease = found.get(lease_id)
        if lease is None:
            (served_at,) = converted(Assignment, ("served_at",), (served_at,))
            lease = found[lease_id] = WorkerLease(participant_id, item_id, served_at)
            if answer_id is not None:
                stored = converted(Judgment, ("result",), (result,))[0] or {}
                lease.answer = {key: stored.get(key) for key in ANSWER_KEYS}
        if image_id is not None:
            lease.images.add(image_id)
    return found, first


@dataclass
class WorkerChecks:
    """Every lease's check of one worker, and every image the worker met; ``choices``: per
    lease, the captions its check may show of its image and of the distractor's;
    ``answers``: per lease whose check is answered, what its judgment stored
    (``ANSWER_KEYS``)."""

    draws: dict[int, CheckDraw | None]
    met: set[int]
    pool: list[int]
    rngs: dict[int, np.random.Generator]
    names: dict[int, str] = field(default_factory=dict)
    choices: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def check_images(self) -> set[int]:
        return {
            image
            for draw in self.draws.values()
            if draw is not None
            for image in (draw.image_id, draw.distractor_image_id)
        }

    @property
    def unmet_in_pool(self) -> int:
        return len(set(self.pool) - self.met)


def worker_checks(
    participant: Participant, study_seed: int, *, upto: int | None = None, shown: bool = False
) -> WorkerChecks:
    """Draw the checks of the worker's leases in id order (up to lease ``upto``, included).

    Each lease's draw bars what the worker met in the leases before it, so the draws chain:
    a query (the leases with their images and answered checks; the study's human captions
    are read once per process), more only when a lease's check is not answered yet (the
    captions comparisons show, once per process, and the checks answered before), then
    plain Python. ``shown``: read the checks answered before in the leases' query (issue 48:
    ``served_check``, whose lease's check is unanswered, saves a statement), else on use.
    """
    leases, first = worker_leases(participant, upto=upto, shown=shown)
    captions = check_captions(participant.study)
    if first is not None:
        captions.__dict__["shown_at"] = first  # ``CheckCaptions.shown_at``, read already
    pool = sorted(captions.human)
    image_of = {c: image for image, ids in captions.human.items() for c in ids}
    checks = WorkerChecks(draws={}, met=set(), pool=pool, rngs={}, names=captions.fixed.names)
    for lease_id, lease in leases.items():
        if lease.answer is not None:
            # A check the worker answered is what its judgment says (a lease reopened later
            # has a new ``served_at``, so drawing it again could name other images).
            reference = lease.answer["reference_caption_id"]
            other = lease.answer["other_caption_id"]
            draw = CheckDraw(image_of.get(reference, 0), image_of.get(other, 0))
            checks.answers[lease_id] = lease.answer
        else:
            rng = _generator(study_seed, lease.participant_id, lease.item_id)
            unseen = captions.unseen(lease.served_at)
            draw = _draw(rng, sorted(unseen), checks.met | lease.images)
            if draw is not None:
                checks.choices[lease_id] = (unseen[draw.image_id], unseen[draw.distractor_image_id])
            else:  # too few unseen captions left: any human caption (module docstring)
                draw = _draw(rng, pool, checks.met | lease.images)
            checks.rngs[lease_id] = rng
        checks.draws[lease_id] = draw
        checks.met |= lease.images
        if draw is not None:
            checks.met |= {draw.image_id, draw.distractor_image_id}
    return checks


def shown_trial(assignment: Assignment, part: int, *, named: bool = True) -> dict[str, Any]:
    """Trial ``part`` as ``assignment`` shows it: the spec's, with the check drawn for it.

    ``named=False``: a check not answered yet is left without its ``image_name`` (a query
    of its own, which only the stored result needs; the page does not show it)."""
    trial = assignment.item.spec["trials"][part]
    if trial["kind"] != _CHECK:
        return trial
    return served_check(assignment, trial, named=named)


def served_check(
    assignment: Assignment, trial: dict[str, Any], *, named: bool = True
) -> dict[str, Any]:
    """The check trial ``assignment`` shows: ``trial`` (the spec's placeholder) filled in.

    The same keys as a comparison trial plus ``distractor_image_id``; the reference caption
    is the correct one. When the worker has met so much of the pool that two images are not
    left (the exposure rule serves no group then; only a race gets here), the draw may use
    images they met: a check is never left out. ``named``: see ``shown_trial``.
    """
    participant = assignment.participant
    seed = assignment.item.spec["seed"]
    # The lease's own check is unanswered (else its judgment is read back): its draw needs
    # the checks answered before, read with the leases.
    worker = worker_checks(participant, seed, upto=assignment.pk, shown=True)
    stored = worker.answers.get(assignment.pk)
    if stored is not None:  # answered: what it showed (a reopened lease would draw anew)
        return {**trial, **stored, "system": ""}
    draw = worker.draws.get(assignment.pk)
    rng = worker.rngs.get(assignment.pk)
    if draw is None or rng is None:
        rng = _generator(seed, assignment.participant_id, assignment.item_id)
        group = set(
            ItemImage.objects.filter(item_id=assignment.item_id).values_list("image_id", flat=True)
        )
        draw = _draw(rng, worker.pool, group) or _draw(rng, worker.pool, set())
        if draw is None:  # a pool of fewer than two images: the build refuses such a study
            raise ServiceError("This study has too few images for an attention check.")
    own, foreign = worker.choices.get(assignment.pk) or _human_captions(participant.study, draw)
    correct = own[int(rng.integers(len(own)))]
    distractor = foreign[int(rng.integers(len(foreign)))]
    name = ""
    if named:
        # The correct caption is one of the check image's: its name as read with the study's
        # human captions (``StudyCaptions.names``), else by a query.
        name = worker.names.get(draw.image_id)
        if name is None:
            found = Caption.objects.filter(pk=correct).values_list("image__name", flat=True)
            name = found.first() or ""
    return {
        **trial,
        "image_id": draw.image_id,
        "image_name": name,
        "system": "",
        "reference_caption_id": correct,
        "other_caption_id": distractor,
        "distractor_image_id": draw.distractor_image_id,
    }


def _human_captions(study: Study, draw: CheckDraw) -> tuple[list[int], list[int]]:
    """Every human caption of the draw's two images, in id order (the fallback's choice), as
    read with the study's (``StudyCaptions.human``: the draw's images come from its pool)."""
    human = check_captions(study).human
    return human[draw.image_id], human[draw.distractor_image_id]


# ---------------------------------------------------------------------- the page's form

#: A trial page's ``shown`` field (issue 48): what lets the answer to a check go without
#: drawing it again, a read of the worker's leases. The page sends back its left caption's
#: id (``left``); ``shown`` adds the right one's, masked, and a tag over both: 16 hex digits
#: of the right caption's id XOR a pad, then ``_TAG_HEX`` of the tag. Pad and tag are HMACs
#: of the site's secret (``salted_hmac``) over the lease (id, token, ``served_at``) and the
#: part, so a worker can neither read the right caption's id (the pad is used for one
#: presentation only: a reload sends the same value) nor make a field for captions the
#: server did not show them on that presentation. Every trial's page has it, so it does
#: not tell a check from a comparison. ``posted_check`` then checks the captions against
#: what the server keeps (the study's human captions, the group's images); a field that
#: does not verify, or none, falls back to drawing the check again (``served_check``).
_PAD_SALT = "capeval.humanr.shown-pad"
_TAG_SALT = "capeval.humanr.shown-tag"
_ID_HEX = 16
_TAG_HEX = 32


def _presentation(assignment: Assignment, part: int) -> str:
    served = assignment.served_at.isoformat() if assignment.served_at else ""
    return f"{int(assignment.pk or 0)}:{assignment.token}:{served}:{int(part)}"


def _pad(presentation: str) -> int:
    digest = salted_hmac(_PAD_SALT, presentation, algorithm="sha256").digest()
    return int.from_bytes(digest[: _ID_HEX // 2], "big")


def _tag(presentation: str, left: int, right: int) -> str:
    text = f"{presentation}:{int(left)}:{int(right)}"
    return salted_hmac(_TAG_SALT, text, algorithm="sha256").hexdigest()[:_TAG_HEX]


def shown_field(assignment: Assignment, part: int, left: int, right: int) -> str:
    """The ``shown`` field of the page showing ``left`` and ``right`` for ``part``."""
    presentation = _presentation(assignment, part)
    masked = int(right) ^ _pad(presentation)
    return f"{masked:0{_ID_HEX}x}{_tag(presentation, left, right)}"


def posted_right(assignment: Assignment, part: int, left: Any, shown: Any) -> int | None:
    """The right caption's id of the page whose form sent ``left`` and ``shown``, or None
    when the field is missing or was not made by the server for this presentation (another
    lease, part or ``served_at``, an edited id or tag)."""
    if not isinstance(shown, str) or len(shown) != _ID_HEX + _TAG_HEX:
        return None
    left_text = str(left)
    if not (left_text.isascii() and left_text.isdigit()):
        return None
    try:
        masked = int(shown[:_ID_HEX], 16)
    except ValueError:
        return None
    presentation = _presentation(assignment, part)
    right = masked ^ _pad(presentation)
    if not constant_time_compare(_tag(presentation, int(left_text), right), shown[_ID_HEX:]):
        return None
    return right


def posted_check(
    assignment: Assignment, trial: dict[str, Any], reference: int, other: int
) -> dict[str, Any] | None:
    """The check trial ``assignment`` showed with ``reference`` (the correct caption) and
    ``other`` (the distractor), as ``served_check`` gives it, from what a verified ``shown``
    field says; None when the captions are not what a check of this lease may show: a
    human caption of purpose ``study`` each, of two images, neither of the group's."""
    captions = check_captions(assignment.participant.study).fixed
    image = captions.image_of.get(reference)
    distractor = captions.image_of.get(other)
    group = {
        shown["image_id"] for shown in assignment.item.spec["trials"] if shown["kind"] != _CHECK
    }
    if image is None or distractor is None or image == distractor or {image, distractor} & group:
        return None
    return {
        **trial,
        "image_id": image,
        "image_name": captions.names.get(image, ""),
        "system": "",
        "reference_caption_id": reference,
        "other_caption_id": other,
        "distractor_image_id": distractor,
    }
