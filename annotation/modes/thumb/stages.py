"""THumB's stages, the kinds of its items, and what an answer reads (issue 48): an image's
stage-1 and stage-2 judgments, which a review's page and its answer share, with the answer's
other reads in the same statement (the linked ids, the count of the participant's judgments,
the image's fluency round and check when its last stage was judged before).

An image's caption set is scored in stage 1, reviewed by a second annotator in stage 2, maybe
read again for fluency by a native speaker, and for a sample of its captions checked by a
third annotator; each is an item of its own kind. ``protocol.py`` holds the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation.models import Assignment, Item, Judgment, Participant, rows
from annotation.modes.thumb.integrity import (
    LINKED_OTHERS,
    judged,
    kept_count,
    linked_needed,
    linked_params,
)
from annotation.modes.thumb.models import Rater

STAGE1 = "stage1"
STAGE2 = "stage2"
FLUENCY = "fluency"
CHECK = "check"
KINDS = (STAGE1, STAGE2, FLUENCY, CHECK)
#: The stage each review kind starts from and may change.
REVIEWS = {STAGE2: STAGE1, CHECK: STAGE2}
#: Where a lease keeps its image's stages for the rest of its request, and the linked ids'
#: pseudonyms read with them.
_KEPT = "_thumb_stages"
_LINKED = "_thumb_linked"
_COUNT = "_thumb_judged"
_LATER = "_thumb_later"
#: The kinds that may be an image's last stage (stage 1 when the study has no stage 2):
#: storing its judgment makes the image's fluency round and check (``protocol.after_submit``).
LAST_STAGES = (STAGE1, STAGE2)


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


#: The judgments of stages 1 and 2 of an image, oldest first: their id, kind, payload and
#: exclusion, whether by an id linked to the participant (``identities.linked_q``: itself,
#: or the same study's browser or network; NULL for a browser or network it has not, which
#: matches nothing) and whether by a registered native English speaker (a crowd worker's
#: user id is NULL: no Rater row matches). Written out (issue 48): built by the ORM, this
#: read cost a review's page and answer more than the database its work. In two parts, so
#: a page and an answer join them to their own reads (``pages.PAGE``, ``submission_reads``):
#: ``STAGE_COLUMNS`` (params: the participant's id, study id and browser id, study id and
#: network) and ``STAGE_ROWS`` (study id, image id, the two stages).
STAGE_COLUMNS = f"""j."id" AS sid, i."kind" AS skind, j."payload" AS spayload,
       j."excluded" AS sexcluded,
       (j."participant_id" = %s OR (p."study_id" = %s AND p."browser_id" = %s)
        OR (p."study_id" = %s AND p."network" = %s)) AS slinked,
       EXISTS (SELECT 1 FROM "{Rater._meta.db_table}" r
               WHERE r."user_id" = p."user_id" AND r."native_english") AS snative"""
STAGE_ROWS = f"""FROM "{Judgment._meta.db_table}" j
JOIN "{Item._meta.db_table}" i ON i."id" = j."item_id"
JOIN "{Participant._meta.db_table}" p ON p."id" = j."participant_id"
WHERE i."study_id" = %s AND i."image_id" = %s AND i."kind" IN (%s, %s)"""
#: A submission's reads in one statement, each a part of a UNION ALL with the stages'
#: columns, as far as the submission still needs them (``submission_reads``): the stages
#: (a review's validation and score, after_submit's native-speaker rule); the pseudonyms of
#: linked ids that judged in the study (``integrity.LINKED_OTHERS``, the linked-id flag: a
#: NULL judgment id, the pseudonym in the kind's column); and the participant's judgments
#: counted (``integrity.judged``, for a state that does not keep the count yet: the count in
#: the id's column, a NULL kind); and the kinds of the image's fluency round and check made
#: so far (``later_kinds``: a NULL judgment id, the kind in the kind's column and FALSE,
#: not NULL, in the linked column). Rows are told apart by those NULLs, not by their place
#: (NULLs sort last on PostgreSQL, first on SQLite). Params: each part's, in this order
#: (``_LATER_PART``: study id, image id, the two kinds).
_STAGES_PART = f"SELECT {STAGE_COLUMNS}\n{STAGE_ROWS}"
_LINKED_PART = f"""SELECT NULL AS sid, o."pseudonym" AS skind, NULL AS spayload,
       NULL AS sexcluded, NULL AS slinked, NULL AS snative FROM ({LINKED_OTHERS}) o"""
_COUNT_PART = f"""SELECT COUNT(*) AS sid, NULL AS skind, NULL AS spayload, NULL AS sexcluded,
       NULL AS slinked, NULL AS snative
FROM "{Judgment._meta.db_table}" cj WHERE cj."participant_id" = %s"""
_LATER_PART = f"""SELECT NULL AS sid, li."kind" AS skind, NULL AS spayload, NULL AS sexcluded,
       FALSE AS slinked, NULL AS snative
FROM "{Item._meta.db_table}" li
WHERE li."study_id" = %s AND li."image_id" = %s AND li."kind" IN (%s, %s)"""
SUBMISSION_ORDER = "ORDER BY sid, skind"


def image_stages(assignment: Assignment) -> list[StageJudgment]:
    """The judgments of stages 1 and 2 of the lease's image, oldest first (``STAGE_COLUMNS``).

    One read for what a submission asks of them (issue 48): validate (did the participant or
    a linked id judge the stage this one reviews), score (what the review changed) and
    after_submit (did a native speaker judge the image); the page starts a review from it.
    Kept on the lease, which is one request's: nothing writes these rows between those calls
    (the judgment being submitted is stored after them, and a stage's item is locked while
    its one judgment is stored).
    """
    stages = assignment.__dict__.get(_KEPT)
    if stages is None:
        submission_reads(assignment, stages=True)
        stages = assignment.__dict__[_KEPT]
    return stages


def linked_names(assignment: Assignment) -> list[str]:
    """The pseudonyms of ids linked to the lease's participant that judged in its study
    (``integrity.LINKED_OTHERS``), read with the submission's other reads; [] when the
    participant need not be looked at (``integrity.linked_needed``)."""
    if not linked_needed(assignment.participant):
        return []
    if _LINKED not in assignment.__dict__:
        submission_reads(assignment, stages=False)
    return assignment.__dict__[_LINKED]


def judged_before(assignment: Assignment) -> int:
    """The participant's stored judgments before this submission (``integrity.judged``),
    read with the submission's other reads when their state does not keep the count."""
    participant = assignment.participant
    if kept_count(participant) is None and _COUNT not in assignment.__dict__:
        submission_reads(assignment, stages=False)
    return judged(participant, assignment.__dict__.get(_COUNT))


def later_kinds(assignment: Assignment) -> set[str]:
    """The kinds of the image's fluency round and check made so far, for the submission of
    its last stage (``LAST_STAGES``), read with the submission's other reads. They are made
    only by that item's submissions, under its lock (``protocol.after_submit``): before its
    first judgment, the common case (its row is locked with its counters), there are none
    and nothing is read."""
    if not _later_needed(assignment):
        return set()
    if _LATER not in assignment.__dict__:
        submission_reads(assignment, stages=False)
    return assignment.__dict__[_LATER]


def _later_needed(assignment: Assignment) -> bool:
    """Whether ``later_kinds`` must read: a last-stage kind judged before (its counters as
    locked with it)."""
    item = assignment.item
    return item.kind in LAST_STAGES and bool(item.judgment_count)


def submission_reads(assignment: Assignment, *, stages: bool) -> None:
    """Read what the submission still needs in one statement, a UNION ALL of the parts
    above (the stages if ``stages``; the linked ids, the count and the later kinds if
    needed and not read yet), and keep it on the lease for the rest of its request."""
    kept, participant = assignment.__dict__, assignment.participant
    parts: list[str] = []
    params: list[Any] = []
    if stages:
        parts.append(_STAGES_PART)
        params += stage_params(assignment)
    linked = _LINKED not in kept and linked_needed(participant)
    if linked:
        parts.append(_LINKED_PART)
        params += linked_params(participant, assignment.item.study_id)
    count = _COUNT not in kept and kept_count(participant) is None
    if count:
        parts.append(_COUNT_PART)
        params.append(participant.pk)
    later = _LATER not in kept and _later_needed(assignment)
    if later:
        item = assignment.item
        parts.append(_LATER_PART)
        params += [item.study_id, item.image_id, FLUENCY, CHECK]
    if not parts:
        return
    with rows.cursor() as cursor:
        cursor.execute("\nUNION ALL\n".join(parts) + "\n" + SUBMISSION_ORDER, params)
        found = cursor.fetchall()
    if stages:
        keep_stages(assignment, found)
    if linked:
        kept[_LINKED] = [row[1] for row in found if row[0] is None and row[4] is None]
    if count:
        kept[_COUNT] = next(int(row[0]) for row in found if row[1] is None)
    if later:
        kept[_LATER] = {row[1] for row in found if row[0] is None and row[4] is not None}


def stage_params(assignment: Assignment) -> list[Any]:
    """``STAGE_COLUMNS``'s params, then ``STAGE_ROWS``'s, for the lease."""
    item, participant = assignment.item, assignment.participant
    study_id = participant.study_id
    linked = [
        participant.pk,
        study_id,
        participant.browser_id or None,
        study_id,
        participant.network or None,
    ]
    return [*linked, item.study_id, item.image_id, STAGE1, STAGE2]


def keep_stages(assignment: Assignment, found) -> list[StageJudgment]:
    """The stages of ``STAGE_COLUMNS`` rows (a statement's, oldest first; a row with a NULL
    judgment id or kind, a LEFT JOIN's that found none or another part's of
    ``submission_reads``, is skipped), kept on the lease."""
    stages = [
        StageJudgment(
            kind=kind,
            payload=rows.converted(Judgment, ("payload",), (payload,))[0],
            excluded=bool(excluded),
            linked=bool(linked),
            native=bool(native),
        )
        for judgment_id, kind, payload, excluded, linked, native in found
        if judgment_id is not None and kind is not None
    ]
    assignment.__dict__[_KEPT] = stages
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
