"""THumB's catch trials (docs/protocol-choices.md, "Catch trials"): an image's caption set
whose human caption is altered, or shown untouched as a control.

The machinery every mode's catch trials share (the reserved ``catch`` items, the rule, the
report section) is ``annotation/modes/catch.py``; this module makes THumB's items.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from annotation.models import Caption, Item, Participant
from annotation.modes import catch
from rubrics import catch as rules
from rubrics import transformations as tf


def new_catch_item(
    participant: Participant, *, rate: float, gammas: tuple[float, ...], draw: int
) -> Item | None:
    """Maybe a new THumB catch trial for the participant (unsaved), drawn at ``rate``.

    An image the participant has never been shown is drawn among the stage-1 items; the
    catch trial is a copy of its stage-1 item (same caption groups, so it looks like any
    image's caption set) whose human caption group is altered: T_WP and T_RW transform
    that caption, T_RC replaces it by the human caption of another image the participant
    has never been shown. ``draw`` numbers the participant's judgments (see
    ``annotation.modes.catch.new_catch_item``).
    """
    study = participant.study
    rng = np.random.default_rng([study.seed, catch.worker_seed(participant), draw, 0xCA7C])
    if rng.random() >= rules.insert_probability(rate):
        return None
    if catch.pending(participant).exists():
        return None
    stage1 = list(
        Item.objects.filter(study_id=study.pk, kind="stage1")
        .order_by("position", "id")
        .values_list("image_id", "spec")
    )
    seen = catch.seen_images(participant)

    def human_group(spec: dict[str, Any]) -> dict[str, Any] | None:
        return next(
            (
                group
                for group in spec.get("groups", [])
                if any(c.get("system") == Caption.HUMAN for c in group.get("captions", []))
            ),
            None,
        )

    unseen = [(image_id, spec) for image_id, spec in stage1 if image_id not in seen]
    unseen = [(image_id, spec) for image_id, spec in unseen if human_group(spec)]
    if not unseen:
        return None
    image_id, spec = unseen[int(rng.integers(len(unseen)))]
    target = human_group(spec)
    assert target is not None
    shown = {key: value for key, value in spec.items() if key != "check_keys"}
    if catch.control_next(participant, rng):
        # The untouched caption set; the human group (the one an altered trial alters) is
        # judged, so telling the altered group by its key or place earns nothing.
        human = next(c for c in target["captions"] if c.get("system") == Caption.HUMAN)
        return catch.control_item(
            participant,
            image_id,
            shown,
            control_of=(human["id"], image_id, Caption.HUMAN, target["text"]),
            key=target["key"],
        )
    others = [(other_id, human_group(s)) for other_id, s in unseen if other_id != image_id]
    other = others[int(rng.integers(len(others)))] if others else None
    try:
        made = rules.make_catch(
            source=target["text"],
            others=[other[1]["text"]] if other else [],
            vocabulary=tf.vocabulary(
                [group["text"] for _, s in stage1 for group in s.get("groups", [])]
            ),
            gammas=gammas,
            rng=rng,
        )
    except ValueError:
        return None
    if made.kind == "T_RC" and other:
        source_image, source_group = other
    else:
        source_image, source_group = image_id, target
    human = next(c for c in source_group["captions"] if c.get("system") == Caption.HUMAN)
    groups = [
        {**group, "text": made.text} if group["key"] == target["key"] else group
        for group in spec["groups"]
    ]
    return Item(
        study_id=study.pk,
        kind=catch.CATCH,
        image_id=image_id,
        position=0,
        target=1,
        spec={
            **shown,
            "groups": groups,
            "catch": {
                "kind": made.kind,
                "gamma": made.gamma,
                "text": made.text,
                "key": target["key"],
                "source_caption_id": human["id"],
                "source_image_id": source_image,
                "participant_id": participant.pk,
            },
        },
    )
