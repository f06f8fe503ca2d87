"""THumB's crowd-integrity rules (issue 29, docs/protocol-choices.md "Crowd integrity,
round two: THumB and catch trials"):

- a server-measured minimum time per caption set for crowd workers (``CrowdPaceSettings``,
  ``crowd_min_seconds``);
- a crowd completion only once the two-sided catch rule has been applied and passed
  (``completion_earned``), and which answer a catch trial or control expects
  (``catch_answered_right``);
- a flag for an id linked to another annotator of the study (``linked_flag``); the serving
  rule itself is in ``protocol.py`` (``annotation.identities.linked_q``).

Like the modes, nothing here writes: the protocol returns these in its ``Outcome``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation.models import Assignment, Item, Judgment, Participant
from annotation.models.rows import cursor as _cursor
from annotation.modes import catch
from annotation.modes.base import CompletionProgress
from annotation.modes.settings import CHECKS, number
from rubrics import catch as catch_rules


@dataclass(frozen=True)
class CrowdPaceSettings(catch.CatchSettings):
    """The catch-trial settings and THumB's crowd minimum time."""

    # THumB's paper states no pace (its authors annotated themselves). 3 s is the minimum
    # PROTOCOLS.md sets per VICR rating, one caption judged against one image, applied here
    # per caption group, so a set of five captions takes at least 15 s. 0: none.
    seconds_per_caption: float = number(
        3,
        low=0,
        high=600,
        label="Crowd workers: least seconds per caption",
        group=CHECKS,
        doc="Crowd workers: minimum seconds per caption of a set before it may be sent (0: none).",
    )


def crowd_min_seconds(assignment: Assignment, config: CrowdPaceSettings) -> float:
    """``seconds_per_caption`` per caption group shown, for crowd workers only: registered
    annotators are the researchers' own team, as the paper's authors were."""
    if assignment.participant.user_id is not None:
        return 0.0
    return float(config.seconds_per_caption) * len(assignment.item.spec.get("groups") or ())


def catch_answered_right(kind: str, scores: dict[str, Any]) -> bool:
    """A control passes at high precision; an altered trial is caught at low precision (or
    for T_WP with a fluency error), see ``rubrics.catch``."""
    if kind == catch_rules.CONTROL:
        return catch_rules.thumb_control_passed(scores["precision"])
    return catch_rules.thumb_caught(kind, scores["precision"], scores.get("fluency_errors") or {})


#: The participant's state key that counts their judgments (``judged``).
JUDGED = "judged"


def kept_count(participant: Participant) -> int | None:
    """The count of the participant's judgments their state keeps, or None if it keeps none."""
    count = (participant.state or {}).get(JUDGED)
    return count if isinstance(count, int) else None


def judged(participant: Participant, counted: int | None = None) -> int:
    """How many judgments the participant has stored: kept in their state by ``after_submit``
    (``judged_state``), so a page and an answer need not count them (issue 48); for a state
    that keeps no count yet (a participant who has not answered since it is kept), counted:
    ``counted`` when a read already has it (``stages.judged_before``), else here. Every
    judgment of a THumB participant is stored through a submission, which keeps it."""
    count = kept_count(participant)
    if count is not None:
        return count
    if counted is not None:
        return counted
    return Judgment.objects.filter(participant_id=participant.pk).count()


def judged_state(participant: Participant, before: int) -> dict[str, Any]:
    """The participant's state once the judgment being submitted is stored: ``before``, the
    judgments they had, and this one (``after_submit`` is called before it is stored, with
    the state as locked)."""
    return {**(participant.state or {}), JUDGED: before + 1}


def completion_earned(participant: Participant, config: Any) -> bool:
    """Enough items judged and, when catch trials are on, the catch rule applied (at least
    ``catch_min_seen`` answered) and passed: junk earned a code before the rule had seen
    enough catch trials (issue 29, row 6). A flagged participant never earns it."""
    if judged(participant) < config.completion_images:
        return False
    if catch.is_flagged(participant):
        return False
    if not config.catch_rate:
        return True
    return catch.rule_passed(
        participant,
        min_seen=config.catch_min_seen,
        max_missed_share=config.catch_max_missed_share,
    )


def completion_progress(participant: Participant, config: Any) -> CompletionProgress:
    """Images judged toward ``completion_earned``, counted as it counts them (every
    judgment is one image's caption set)."""
    done = judged(participant)
    note = "and enough attention checks passed" if config.catch_rate else ""
    return CompletionProgress(done, config.completion_images, "images", note)


#: Flag of a participant linked to another annotator of the study (issue 29, row 3).
LINKED_FLAG = "linked_annotator"

#: The first five pseudonyms of the study's other ids linked to a participant
#: (``identities.linked_q``: the same browser or network; a NULL browser or network, for one
#: the participant has not, matches nothing) that judged an image of the study. Read from the
#: linked ids (browser and network are indexed) to their judgments: the other way round, from
#: the study's judgments, each submission read every judgment of the study. Written out as
#: the hot path's reads are (issue 48): through the ORM its building cost more than the
#: database its work. Params: study id, browser id, study id, network, participant id,
#: study id.
LINKED_OTHERS = f"""
SELECT p."pseudonym" FROM "{Participant._meta.db_table}" p
WHERE ((p."study_id" = %s AND p."browser_id" = %s) OR (p."study_id" = %s AND p."network" = %s))
  AND p."id" <> %s
  AND EXISTS (SELECT 1 FROM "{Judgment._meta.db_table}" j
              WHERE j."participant_id" = p."id" AND j."study_id" = %s)
ORDER BY p."pseudonym"
LIMIT 5
"""


def linked_needed(participant: Participant) -> bool:
    """Whether a submission must look for linked ids (``LINKED_OTHERS``): the participant
    is not flagged yet and has a browser or network to be linked through."""
    if any(
        isinstance(flag, dict) and flag.get("kind") == LINKED_FLAG
        for flag in participant.flags or []
    ):
        return False
    return bool(participant.browser_id or participant.network)


def linked_params(participant: Participant, study_id: int) -> list[Any]:
    """``LINKED_OTHERS``' params."""
    return [
        participant.study_id,
        participant.browser_id or None,
        participant.study_id,
        participant.network or None,
        participant.pk,
        study_id,
    ]


def linked_flag(
    participant: Participant, item: Item, names: list[str] | None = None
) -> dict[str, str] | None:
    """A ``linked_annotator`` flag, once, when an id linked to the participant (same browser
    or network, ``annotation.identities``) has judged an image of the study: the two are
    never served each other's stage 2 or check, and the researcher should know why.
    ``names``: ``LINKED_OTHERS``' pseudonyms when a read of this submission already has
    them (``stages.linked_names``), else read here."""
    if not linked_needed(participant):
        return None
    if names is None:
        with _cursor() as cursor:
            cursor.execute(LINKED_OTHERS, linked_params(participant, item.study_id))
            names = [name for (name,) in cursor.fetchall()]
    if not names:
        return None
    detail = (
        f"shares a browser or network with {', '.join(names)}: neither is served the other's "
        "stage 2 or check"
    )
    return {"kind": LINKED_FLAG, "detail": detail}
