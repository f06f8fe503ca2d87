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
exposure rule compute the same draw; the judgment's ``result`` records what was shown,
which is what the report and the exclusion rule read.

A worker is a browser, as for exposure (``HumanrProtocol.eligible_items``): the leases of
every participant of the study sharing the lease participant's ``browser_id`` count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Q
from django.utils.crypto import salted_hmac

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, ItemImage, Judgment, Participant
from rubrics.humanr import GROUP_SIZE

#: The two images a check needs besides its group's: the shown one and the distractor's.
CHECK_IMAGES = 2
_SALT = "capeval.humanr.attention-check"


@dataclass(frozen=True)
class CheckDraw:
    """The two images of one lease's check: the one shown and the distractor's."""

    image_id: int
    distractor_image_id: int


@dataclass(frozen=True)
class CheckCaptions:
    """The human captions of a study's checks: ``human`` (image -> its human captions of
    purpose ``study``, in id order), ``spare`` (those no comparison shows) and ``shown_at``
    (caption -> when an answered check first showed it)."""

    human: dict[int, list[int]]
    spare: dict[int, list[int]]
    shown_at: dict[int, datetime]

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
    query reading two keys of each trial of each group."""
    keys = [
        f"spec__trials__{index}__{side}"
        for index in range(GROUP_SIZE)
        for side in ("reference_caption_id", "other_caption_id")
    ]
    shown: set[int] = set()
    for row in Item.objects.filter(study_id=study_id).values_list(*keys):
        shown.update(int(value) for value in row if isinstance(value, int))
    return shown


def check_captions(study_id: int) -> CheckCaptions:
    """The study's ``CheckCaptions``: three queries (captions, groups, answered checks)."""
    human: dict[int, list[int]] = {}
    for caption_id, image_id in (
        Caption.objects.filter(
            study_id=study_id, purpose=Caption.Purpose.STUDY, system=Caption.HUMAN
        )
        .order_by("id")
        .values_list("id", "image_id")
    ):
        human.setdefault(image_id, []).append(caption_id)
    shown = comparison_captions(study_id)
    spare = {
        image: kept for image, ids in human.items() if (kept := [c for c in ids if c not in shown])
    }
    shown_at: dict[int, datetime] = {}
    for created, reference, other in (
        Judgment.objects.filter(study_id=study_id, result__kind="attention_check")
        .order_by("created_at")
        .values_list("created_at", "result__reference_caption_id", "result__other_caption_id")
    ):
        for caption in (reference, other):
            if isinstance(caption, int):
                shown_at.setdefault(caption, created)
    return CheckCaptions(human=human, spare=spare, shown_at=shown_at)


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
class WorkerChecks:
    """Every lease's check of one worker, and every image the worker met; ``choices``: per
    lease, the captions its check may show of its image and of the distractor's."""

    draws: dict[int, CheckDraw | None]
    met: set[int]
    pool: list[int]
    rngs: dict[int, np.random.Generator]
    choices: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)

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
    participant: Participant, study_seed: int, *, upto: int | None = None
) -> WorkerChecks:
    """Draw the checks of the worker's leases in id order (up to lease ``upto``, included).

    Each lease's draw bars what the worker met in the leases before it, so the draws chain:
    three queries (the leases, their groups' images, the pool), then plain Python.
    """
    leases = Assignment.objects.filter(
        participant__in=Participant.objects.filter(worker_query(participant)).values("pk")
    )
    if upto is not None:
        leases = leases.filter(pk__lte=upto)
    rows = list(leases.order_by("pk").values_list("pk", "participant_id", "item_id", "served_at"))
    images: dict[int, set[int]] = {}
    for item_id, image_id in ItemImage.objects.filter(
        item_id__in={row[2] for row in rows}
    ).values_list("item_id", "image_id"):
        images.setdefault(item_id, set()).add(image_id)
    captions = check_captions(participant.study_id)
    pool = sorted(captions.human)
    image_of = {c: image for image, ids in captions.human.items() for c in ids}
    # A check the worker answered is what its judgment says (a lease reopened later has a
    # new ``served_at``, so drawing it again could name other images).
    answered = {
        lease: CheckDraw(image_of.get(reference, 0), image_of.get(other, 0))
        for lease, reference, other in Judgment.objects.filter(
            assignment_id__in=[row[0] for row in rows], result__kind="attention_check"
        ).values_list("assignment_id", "result__reference_caption_id", "result__other_caption_id")
    }
    met: set[int] = set()
    draws: dict[int, CheckDraw | None] = {}
    rngs: dict[int, np.random.Generator] = {}
    choices: dict[int, tuple[list[int], list[int]]] = {}
    for lease_id, participant_id, item_id, served_at in rows:
        group = images.get(item_id, set())
        rng = _generator(study_seed, participant_id, item_id)
        unseen = captions.unseen(served_at)
        draw = _draw(rng, sorted(unseen), met | group)
        if draw is not None:
            choices[lease_id] = (unseen[draw.image_id], unseen[draw.distractor_image_id])
        else:  # too few unseen captions left: any human caption (module docstring)
            draw = _draw(rng, pool, met | group)
        if lease_id in answered:
            draw = answered[lease_id]
            choices.pop(lease_id, None)
        draws[lease_id], rngs[lease_id] = draw, rng
        met |= group
        if draw is not None:
            met |= {draw.image_id, draw.distractor_image_id}
    return WorkerChecks(draws=draws, met=met, pool=pool, rngs=rngs, choices=choices)


def shown_trial(assignment: Assignment, part: int) -> dict[str, Any]:
    """Trial ``part`` as ``assignment`` shows it: the spec's, with the check drawn for it."""
    trial = assignment.item.spec["trials"][part]
    return served_check(assignment, trial) if trial["kind"] == "attention_check" else trial


def served_check(assignment: Assignment, trial: dict[str, Any]) -> dict[str, Any]:
    """The check trial ``assignment`` shows: ``trial`` (the spec's placeholder) filled in.

    The same keys as a comparison trial plus ``distractor_image_id``; the reference caption
    is the correct one. When the worker has met so much of the pool that two images are not
    left (the exposure rule serves no group then; only a race gets here), the draw may use
    images they met: a check is never left out.
    """
    stored = (
        Judgment.objects.filter(assignment_id=assignment.pk, result__kind="attention_check")
        .values_list("result", flat=True)
        .first()
    )
    if stored:  # answered: what it showed (a reopened lease would draw anew)
        keys = ("image_id", "image_name", "reference_caption_id", "other_caption_id")
        return {**trial, **{key: stored.get(key) for key in keys}, "system": ""}
    participant = assignment.participant
    seed = assignment.item.spec["seed"]
    worker = worker_checks(participant, seed, upto=assignment.pk)
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
    own, foreign = worker.choices.get(assignment.pk) or _human_captions(draw)
    correct = own[int(rng.integers(len(own)))]
    distractor = foreign[int(rng.integers(len(foreign)))]
    name = Caption.objects.filter(pk=correct).values_list("image__name", flat=True).first() or ""
    return {
        **trial,
        "image_id": draw.image_id,
        "image_name": name,
        "system": "",
        "reference_caption_id": correct,
        "other_caption_id": distractor,
        "distractor_image_id": draw.distractor_image_id,
    }


def _human_captions(draw: CheckDraw) -> tuple[list[int], list[int]]:
    """Every human caption of the draw's two images, in id order (the fallback's choice)."""
    captions: dict[int, list[int]] = {}
    for image_id, caption_id in (
        Caption.objects.filter(
            image_id__in=[draw.image_id, draw.distractor_image_id],
            purpose=Caption.Purpose.STUDY,
            system=Caption.HUMAN,
        )
        .order_by("id")
        .values_list("image_id", "id")
    ):
        captions.setdefault(image_id, []).append(caption_id)
    return captions[draw.image_id], captions[draw.distractor_image_id]
