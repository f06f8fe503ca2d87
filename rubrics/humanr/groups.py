"""Groups of HUMANr trials: comparisons of distinct images and an attention check (4.2)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rubrics import checks, resampling
from rubrics.humanr.scoring import GROUP_SIZE


@dataclass(frozen=True)
class Trial:
    """One trial of a group (section 4.2): a comparison, or the group's attention check.

    Comparison: ``comparison_id`` and its ``image_id``; which caption is shown
    left is decided by the caller at presentation. Attention check:
    ``image_id`` is the shown image, ``correct_caption_id`` a human caption of
    it, ``distractor_caption_id`` a human caption of ``distractor_image_id``
    (a different image), and ``correct_on_left`` the random side of the
    correct caption.
    """

    position: int
    kind: Literal["comparison", "attention_check"]
    image_id: Hashable
    comparison_id: Hashable | None = None
    correct_caption_id: Hashable | None = None
    distractor_caption_id: Hashable | None = None
    distractor_image_id: Hashable | None = None
    correct_on_left: bool | None = None


@dataclass(frozen=True)
class Group:
    """A group of trials served together (section 4.2); ``is_short`` for a leftover group."""

    index: int
    trials: tuple[Trial, ...]
    is_short: bool

    @property
    def check_position(self) -> int:
        """Position (0-based) of the attention check in the group (section 4.2)."""
        return next(t.position for t in self.trials if t.kind == "attention_check")

    @property
    def comparison_ids(self) -> list[Hashable]:
        """Comparison ids of the group in serving order (section 4.2)."""
        return [t.comparison_id for t in self.trials if t.kind == "comparison"]


def build_groups(
    comparisons: Iterable[tuple[Hashable, Hashable]],
    human_captions: Mapping[Hashable, Sequence[Hashable]],
    seed: int | np.random.Generator,
    group_size: int = GROUP_SIZE,
) -> list[Group]:
    """Split comparisons into groups of distinct images plus one attention check (section 4.2).

    ``comparisons``: ``(comparison_id, image_id)`` pairs, each comparison id
    once. ``human_captions``: image id -> ids of its human captions (at least
    three images must have one); attention checks are drawn from it.

    Each group holds ``group_size - 1`` comparisons of different images and
    one attention check at a random position. No image is met twice in a group
    (the paper's "groups of 10 with 10 distinct images"): the check's image is
    not one of the group's images, and its distractor caption comes from a
    third image that is neither the check image nor one of the group's images.
    So a group needs two images with human captions outside its comparisons:
    with fewer than ``group_size + 1`` such images, groups hold at most that
    many minus 2 comparisons (all groups are then short). Comparisons are
    assigned largest-remaining-image-first with random ties, which forms as many
    full groups as the image counts allow (every image's comparisons spread over
    different groups).

    Leftovers: when fewer than ``group_size - 1`` distinct images still have
    comparisons, the rest go into short groups (``is_short=True``) of distinct
    images, each with its own attention check, so every comparison is used
    exactly once. The same seed gives the same groups.
    """
    group_size = checks.integer(group_size, "group_size", 2)
    rng = resampling.as_generator(seed)
    need = group_size - 1
    by_image = _comparisons_by_image(comparisons)
    check_images = [img for img, caps in human_captions.items() if len(caps) > 0]
    if len(check_images) < 3:
        raise ValueError(
            "human_captions: attention checks need human captions of at least three images "
            "(a comparison's image, the check's image and the distractor's must differ)"
        )
    # Two check candidates must stay outside every group's images, whichever images the
    # group holds; only studies of fewer than group_size + 1 such images are limited.
    per_group = min(need, len(check_images) - 2)
    # The picks are drawn lazily, so each group's check is drawn right after its
    # comparisons, from the one generator: that order is what a seed reproduces.
    groups: list[Group] = []
    for picked in _picks(by_image, per_group, rng):
        groups.append(_with_check(len(groups), picked, need, check_images, human_captions, rng))
    return groups


def _comparisons_by_image(
    comparisons: Iterable[tuple[Hashable, Hashable]],
) -> dict[Hashable, list[Hashable]]:
    """Image id -> its comparison ids, in the given order; ValueError on a bad pair."""
    by_image: dict[Hashable, list[Hashable]] = {}
    seen: set[Hashable] = set()
    for item in comparisons:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ValueError(f"comparisons: expected (comparison_id, image_id) pairs, got {item!r}")
        cid, image = item
        if cid is None or image is None:
            raise ValueError(f"comparisons: missing id in {item!r}")
        if cid in seen:
            raise ValueError(f"comparisons: comparison id {cid!r} occurs twice")
        seen.add(cid)
        by_image.setdefault(image, []).append(cid)
    if not by_image:
        raise ValueError("comparisons: empty")
    return by_image


def _picks(
    by_image: dict[Hashable, list[Hashable]], per_group: int, rng: np.random.Generator
) -> Iterator[list[tuple[Hashable, Hashable]]]:
    """Each group's ``(image_id, comparison_id)`` pairs, largest-remaining-image first."""
    images = list(by_image)
    queues: list[list[Hashable]] = []
    for img in images:
        ids = by_image[img]
        queues.append([ids[i] for i in rng.permutation(len(ids))])
    # buckets[c] = indices of images with c comparisons left (random order within a bucket).
    max_count = max(len(q) for q in queues)
    buckets: list[list[int]] = [[] for _ in range(max_count + 1)]
    for i in rng.permutation(len(images)):
        buckets[len(queues[i])].append(int(i))
    top = max_count
    while True:
        while top > 0 and not buckets[top]:
            top -= 1
        if top == 0:
            return
        chosen: list[int] = []
        c = top
        while c > 0 and len(chosen) < per_group:
            bucket = buckets[c]
            while bucket and len(chosen) < per_group:
                k = int(rng.integers(len(bucket)))
                bucket[k], bucket[-1] = bucket[-1], bucket[k]
                chosen.append(bucket.pop())
            c -= 1
        order = [chosen[i] for i in rng.permutation(len(chosen))]
        picked = [(images[i], queues[i].pop()) for i in order]
        for i in chosen:
            if queues[i]:
                buckets[len(queues[i])].append(i)
        yield picked


def build_system_groups(
    comparisons: Iterable[tuple[Hashable, Hashable, Hashable]],
    human_captions: Mapping[Hashable, Sequence[Hashable]],
    seed: int | np.random.Generator,
    group_size: int = GROUP_SIZE,
) -> list[Group]:
    """Groups of one system each, interleaved across systems, for adaptive allocation.

    ``comparisons``: ``(comparison_id, image_id, system)`` triples. Each system's
    comparisons are split by ``build_groups`` (so ``group_size - 1`` comparisons of
    different images and one attention check per group, leftovers in short groups); the
    groups are then numbered round-robin over the systems in name order, so a server
    taking the lowest index first gives every open system its next group in turn.

    Why one system per group: a group serves one worker whole, so a group mixing systems
    keeps costing judgments of systems whose intervals are settled (as mixed, adaptive
    allocation saved 1.8%; issue 27). With one system per group, the groups of a settled
    system are simply no longer served.
    """
    by_system: dict[Hashable, list[tuple[Hashable, Hashable]]] = {}
    for item in comparisons:
        if not isinstance(item, tuple | list) or len(item) != 3:
            raise ValueError(
                f"comparisons: expected (comparison_id, image_id, system) triples, got {item!r}"
            )
        cid, image, system = item
        by_system.setdefault(system, []).append((cid, image))
    if not by_system:
        raise ValueError("comparisons: empty")
    rng = resampling.as_generator(seed)
    queues = [
        build_groups(by_system[system], human_captions, rng, group_size)
        for system in sorted(by_system, key=str)
    ]
    groups: list[Group] = []
    for rank in range(max(len(queue) for queue in queues)):
        for queue in queues:
            if rank < len(queue):
                group = queue[rank]
                groups.append(Group(len(groups), group.trials, group.is_short))
    return groups


def _with_check(
    index: int,
    picked: list[tuple[Hashable, Hashable]],
    need: int,
    check_images: list[Hashable],
    human_captions: Mapping[Hashable, Sequence[Hashable]],
    rng: np.random.Generator,
) -> Group:
    group_images = {img for img, _ in picked}
    check_image = _draw_image(check_images, group_images, rng)
    # The distractor caption must not belong to an image the group shows: a worker who saw
    # that caption with its own image a few trials earlier would recognise it as foreign
    # and pass the check without reading (build_groups leaves room for both draws).
    distractor_image = _draw_image(check_images, group_images | {check_image}, rng)
    correct = human_captions[check_image]
    distractor = human_captions[distractor_image]
    position = int(rng.integers(len(picked) + 1))
    check = Trial(
        position=position,
        kind="attention_check",
        image_id=check_image,
        correct_caption_id=correct[int(rng.integers(len(correct)))],
        distractor_caption_id=distractor[int(rng.integers(len(distractor)))],
        distractor_image_id=distractor_image,
        correct_on_left=bool(rng.random() < 0.5),
    )
    trials: list[Trial] = []
    for img, cid in picked:
        if len(trials) == position:
            trials.append(check)
        trials.append(
            Trial(position=len(trials), kind="comparison", image_id=img, comparison_id=cid)
        )
    if len(trials) == position:
        trials.append(check)
    return Group(index=index, trials=tuple(trials), is_short=len(picked) < need)


def _draw_image(
    candidates: list[Hashable], avoid: set[Hashable], rng: np.random.Generator
) -> Hashable:
    """A random candidate not in ``avoid``; build_groups sizes groups so that one is left."""
    # ``avoid`` may hold images that are no candidates (no human caption), so its size alone
    # does not tell whether a candidate is left; the scan below decides in small studies.
    for _ in range(64):
        img = candidates[int(rng.integers(len(candidates)))]
        if img not in avoid:
            return img
    allowed = [img for img in candidates if img not in avoid]
    if not allowed:  # unreachable through build_groups: a group leaves two candidates out
        raise ValueError("no image left for an attention check outside the group's images")
    return allowed[int(rng.integers(len(allowed)))]
