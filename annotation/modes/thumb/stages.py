"""THumB's stages, the kinds of its items, and the read of an image's stage-1 and stage-2
judgments that a review's page and its answer share (issue 48).

An image's caption set is scored in stage 1, reviewed by a second annotator in stage 2, maybe
read again for fluency by a native speaker, and for a sample of its captions checked by a
third annotator; each is an item of its own kind. ``protocol.py`` holds the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from annotation.models import Assignment, Item, Judgment, Participant, rows
from annotation.modes.thumb.models import Rater

STAGE1 = "stage1"
STAGE2 = "stage2"
FLUENCY = "fluency"
CHECK = "check"
KINDS = (STAGE1, STAGE2, FLUENCY, CHECK)
#: The stage each review kind starts from and may change.
REVIEWS = {STAGE2: STAGE1, CHECK: STAGE2}


@dataclass(frozen=True)
class StageJudgment:
    """A judgment of stage 1 or stage 2 of the lease's image, as a submission reads it."""

    kind: str
    payload: dict[str, Any]
    excluded: bool
    #: By the lease's participant or an id linked to them (browser or network).
    linked: bool
    #: By a registered annotator who is a native English speaker.
    native: bool


#: The judgments of stages 1 and 2 of an image, oldest first: their kind, payload and
#: exclusion, whether by an id linked to the participant (``identities.linked_q``: itself,
#: or the same study's browser or network; NULL for a browser or network it has not, which
#: matches nothing) and whether by a registered native English speaker (a crowd worker's
#: user id is NULL: no Rater row matches). Written out (issue 48): built by the ORM, this
#: read cost a review's page and answer more than the database its work. Params: the
#: participant's id, study id and browser id, study id and network; study id, image id, the
#: two stages.
STAGES = f"""
SELECT i."kind", j."payload", j."excluded",
       (j."participant_id" = %s OR (p."study_id" = %s AND p."browser_id" = %s)
        OR (p."study_id" = %s AND p."network" = %s)),
       EXISTS (SELECT 1 FROM "{Rater._meta.db_table}" r
               WHERE r."user_id" = p."user_id" AND r."native_english")
FROM "{Judgment._meta.db_table}" j
JOIN "{Item._meta.db_table}" i ON i."id" = j."item_id"
JOIN "{Participant._meta.db_table}" p ON p."id" = j."participant_id"
WHERE i."study_id" = %s AND i."image_id" = %s AND i."kind" IN (%s, %s)
ORDER BY j."id"
"""


def image_stages(assignment: Assignment) -> list[StageJudgment]:
    """The judgments of stages 1 and 2 of the lease's image, oldest first (``STAGES``).

    One read for what a submission asks of them (issue 48): validate (did the participant or
    a linked id judge the stage this one reviews), score (what the review changed) and
    after_submit (did a native speaker judge the image); the page starts a review from it.
    Kept on the lease, which is one request's: nothing writes these rows between those calls
    (the judgment being submitted is stored after them, and a stage's item is locked while
    its one judgment is stored).
    """
    stages = assignment.__dict__.get("_thumb_stages")
    if stages is None:
        item, participant = assignment.item, assignment.participant
        study_id, browser, network = (
            participant.study_id,
            participant.browser_id or None,
            participant.network or None,
        )
        linked = [participant.pk, study_id, browser, study_id, network]
        params = [*linked, item.study_id, item.image_id, STAGE1, STAGE2]
        with connection.cursor() as cursor:
            cursor.execute(STAGES, params)
            found = cursor.fetchall()
        stages = [
            StageJudgment(
                kind=kind,
                payload=rows.converted(Judgment, ("payload",), (payload,))[0],
                excluded=bool(excluded),
                linked=bool(linked),
                native=bool(native),
            )
            for kind, payload, excluded, linked, native in found
        ]
        assignment.__dict__["_thumb_stages"] = stages
    return stages


def reviewed_payload(assignment: Assignment) -> dict[str, Any] | None:
    """What a review item starts from (stage 1 for stage 2, stage 2 for the check): the
    reviewed stage's first judgment not excluded, the one the report counts (the export's
    ``first_stage1`` picks the same stage-1 judgment). None for any other item."""
    reviewed = REVIEWS.get(assignment.item.kind)
    if reviewed is None:
        return None
    return next(
        (s.payload for s in image_stages(assignment) if s.kind == reviewed and not s.excluded),
        None,
    )
