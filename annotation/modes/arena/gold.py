"""Gold battles: a system caption against a Cui et al. alteration of it (never writes).

Built like ``annotation.modes.catch.new_catch_item`` builds VICR's catch trials, and stored
the same way (an ``Item`` of kind ``catch`` reserved for one worker, ``spec["catch"]``), so
the catch-trial exclusion rule and report section read them unchanged. Unlike the rating
protocols there are no *controls* (a known-good caption shown untouched): a battle is
already two-sided, since the real caption is shown left or right at random, so a worker
who always answers "A" misses about half of the gold battles, and one who always answers
"B" too. A control would be a caption against itself, which has no right answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from annotation.models import Caption, Item, Participant
from annotation.modes import catch
from annotation.modes.arena import serving, shown
from annotation.modes.catch import worker_seed
from rubrics import catch as rules


def new_gold_item(
    participant: Participant,
    *,
    rate: float,
    gammas: tuple[float, ...],
    caption_ids_of: Any,
    draw: int,
    due: bool = False,
) -> Item | None:
    """Maybe a new gold battle for the worker (unsaved), drawn at ``rate``; ``due``: one
    the schedule wants now (``integrity.gold_due``), made whatever the draw.

    ``draw`` numbers the worker's battles, so one study seed, worker and count give one
    decision and one battle. The source is a study caption of an image the worker was never
    shown (``caption_ids_of`` maps an item spec to the captions of its image), a human one
    when there is one; T_RC's text is a caption of another such image, also human if any.
    """
    study = participant.study
    rng = np.random.default_rng([study.seed, worker_seed(participant), draw, 0xCA7C])
    # Drawn even when due: one seed, one sequence for the choices below.
    if rng.random() >= rules.insert_probability(rate) and not due:
        return None
    # The reserved gold battle, the captions' key, the leases and the images with room,
    # in one statement (``serving.GOLD_VIEW``; five ORM queries before).
    view = serving.gold_view(participant)
    if view.reserved:
        return None
    known = catch.study_captions_counted(study, *view.captions)
    captions = known.with_text
    # ``catch.seen_captions`` over the leases read: every caption of an image shown, and
    # the caption a gold battle's altered text came from.
    seen: set[int] = set()
    for spec in view.specs:
        seen.update(caption_ids_of(spec))
        if spec.get("catch"):
            seen.add(int(spec["catch"]["source_caption_id"]))
    unseen = [row for row in captions if row[0] not in seen]
    if not unseen:
        return None
    # A gold battle uses its image up for the worker (nobody sees an image twice), so it
    # goes to an image whose battles are all taken where there is one: near the end of a
    # study, a gold battle on the image of one of the last battles cost the worker that
    # battle and the study its answer (issue 46, row 2).
    unseen = [row for row in unseen if row[1] not in view.with_room] or unseen
    # A human caption where the study has one: a gold battle's real caption must be one an
    # honest worker prefers. A wrong system caption against its alteration is fairly
    # answered "both bad", and now that the code waits for the gold rule (issue 45) that
    # would cost an honest worker the code.
    sources = [row for row in unseen if row[2] == Caption.HUMAN] or unseen
    source = sources[int(rng.integers(len(sources)))]
    if source[1] in view.seen:
        return None  # never an image the worker was shown (their own leases, as read)
    others = [row for row in unseen if row[1] != source[1] and row[2] == Caption.HUMAN]
    if not others:
        others = [row for row in unseen if row[1] != source[1]]
    other = others[int(rng.integers(len(others)))] if others else None
    # Kept by the process while no admin change comes (``shown``): a read of its own before.
    texts = shown.caption_texts(known.key, view.stamp, source, other)
    try:
        made = rules.make_catch(
            source=texts[source[0]],
            others=[texts[other[0]]] if other else [],
            vocabulary=known.vocabulary,
            gammas=gammas,
            rng=rng,
        )
    except ValueError:
        return None
    origin = other if made.kind == "T_RC" and other else source
    return Item(
        study_id=study.pk,
        kind=catch.CATCH,
        image_id=source[1],
        position=0,
        target=1,
        spec={
            "caption_id": source[0],
            "catch": {
                "kind": made.kind,
                "gamma": made.gamma,
                "text": made.text,
                "source_caption_id": origin[0],
                "participant_id": participant.pk,
            },
        },
    )
