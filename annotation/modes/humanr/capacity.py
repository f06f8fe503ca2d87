"""How many more distinct workers a HUMANr study's remaining groups need (issue 26, row 6).

Nobody meets an image twice (``protocol.eligible_items``), so the groups showing one image
need as many different workers as they have slots left, and a worker who met an image of a
group can never take that group. With registered annotators only, a study can stall for
good: each annotator did one group and the study stopped at 2 of 6. ``workers_needed``
states the lower bound of ``rubrics.capacity.workers_needed`` over the groups with room left
(their images as units, their ``target - judgment_count - open_lease_count`` as slots) and
the participants who may still be served (their met images: those of the groups they
finished). What it leaves out only makes the true number larger: the two images each
group's attention check uses up, a lease's images before it is finished, browser-mates.
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import F

from annotation.models import Assignment, Item, ItemImage, Participant, Study
from annotation.modes.base import WorkersNeeded, get_mode, screen_out_reason
from annotation.modes.humanr.protocol import GROUP, adaptive_settled_groups
from rubrics import capacity


def workers_needed(study: Study) -> WorkersNeeded | None:
    """The bound for ``study`` with its reason; None when no group has room left."""
    config = get_mode(study.mode).settings(study)
    slots = dict(
        Item.objects.filter(study_id=study.pk, kind=GROUP)
        .annotate(left=F("target") - F("judgment_count") - F("open_lease_count"))
        .filter(left__gt=0)
        .values_list("id", "left")
    )
    if config.adaptive_target_half_width:
        # Groups of settled systems are no longer served: they need nobody.
        for item_id in adaptive_settled_groups(study.pk, config.adaptive_target_half_width):
            slots.pop(item_id, None)
    if not slots:
        return None
    # Every group's images (those finished included, for what each participant met): one
    # query of (item, image) rows, as eligible_items reads them.
    images: dict[int, set[int]] = defaultdict(set)
    names: dict[int, str] = {}
    for item_id, image_id, name in ItemImage.objects.filter(item__study_id=study.pk).values_list(
        "item_id", "image_id", "image__name"
    ):
        images[item_id].add(image_id)
        names[image_id] = name
    limit = config.max_failed_checks
    able = [
        pk
        for pk, flags, state in Participant.objects.filter(study_id=study.pk).values_list(
            "id", "flags", "state"
        )
        if not screen_out_reason(flags)
        and (limit is None or (state or {}).get("groups_failed", 0) < limit)
    ]
    met: dict[int, set[int]] = {pk: set() for pk in able}
    for participant_id, item_id in Assignment.objects.filter(
        participant_id__in=able, status=Assignment.Status.SUBMITTED
    ).values_list("participant_id", "item_id"):
        met[participant_id] |= images.get(item_id, set())
    bound = capacity.workers_needed(
        [(images.get(item_id, set()), left) for item_id, left in slots.items()],
        list(met.values()),
    )
    if bound.needed <= 0:
        return WorkersNeeded(0, "")
    slots_word = "slot" if bound.slots == 1 else "slots"
    shown = (
        f"Nobody meets an image twice: image “{names.get(bound.unit, bound.unit)}” is still "
        f"to be shown in {bound.slots} group {slots_word}, each to a different worker"
    )
    if not able:
        return WorkersNeeded(bound.needed, f"{shown}, and nobody has started yet.")
    return WorkersNeeded(
        bound.needed,
        f"{shown}, and {bound.able or 'none'} of the {len(able)} participant"
        f"{'s' if len(able) != 1 else ''} so far can still take one.",
    )
