"""Match platform submissions to participants; give back the open leases of workers who left.

A Prolific submission is matched by the worker id (``PROLIFIC_PID``) and, when the arrival
recorded one, its session id (``SESSION_ID``, which is Prolific's submission id); an MTurk
assignment by ``workerId`` and ``assignmentId``. A worker who returned, timed out or was
rejected gets their open leases released at once, so the slot serves the next worker; their
judgments stay (never deleted) and are flagged as excluded with the reason.
"""

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, Judgment, Participant, Study
from annotation.models.crowd import CROWD_LEFT_FLAG
from annotation.services.assignments import assignment_release

logger = logging.getLogger(__name__)

#: The ``kind`` of the participant flag a reclaim adds.
RECLAIM_FLAG = CROWD_LEFT_FLAG


def participant_match(
    *, study: Study, source: str, worker_id: str, submission_id: str
) -> Participant | None:
    """The study's participant with this worker id whose recorded submission is this one.

    A participant whose arrival recorded no submission id matches by the worker id alone.
    """
    participant = Participant.objects.filter(
        study=study, source=source, external_id=worker_id
    ).first()
    if participant is None:
        return None
    key = "SESSION_ID" if source == Participant.Source.PROLIFIC else "assignmentId"
    recorded = (participant.external_meta or {}).get(key, "")
    return participant if not recorded or recorded == submission_id else None


def participant_reclaim(
    *, participant: Participant, platform_status: str, via: str, now: datetime | None = None
) -> int:
    """Release the participant's open leases (the worker left: ``platform_status``).

    Returns how many leases were released. Judgments are kept, marked excluded with the
    reason; the participant is flagged and their platform status recorded. Idempotent: a
    second call finds no open lease and adds no second flag for the same status.
    """
    now = now or timezone.now()
    reason = f"crowd submission {platform_status} ({via})"
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        open_ids = list(
            Assignment.objects.filter(
                participant=locked, status=Assignment.Status.OPEN
            ).values_list("id", flat=True)
        )
        released = sum(
            assignment_release(study=locked.study, assignment_id=pk, released_by=via)
            for pk in open_ids
        )
        Judgment.objects.filter(participant=locked, excluded=False).update(
            excluded=True, exclusion_reason=reason[:200]
        )
        meta = dict(locked.external_meta or {})
        if meta.get("platform_status") != platform_status:
            meta["platform_status"] = platform_status
            locked.external_meta = meta
            locked.flags = [
                *(locked.flags or []),
                {"kind": RECLAIM_FLAG, "at": now.isoformat(), "detail": reason[:200]},
            ]
            locked.save(update_fields=["external_meta", "flags"])
    logger.info(
        "crowd reclaim: participant %s %s via %s, %d lease(s) released",
        participant.pseudonym,
        platform_status,
        via,
        released,
    )
    return released


def participant_platform_status(*, participant: Participant, platform_status: str) -> None:
    """Record a platform status that needs no reclaim (AWAITING REVIEW, APPROVED...)."""
    meta = dict(participant.external_meta or {})
    if meta.get("platform_status") != platform_status:
        meta["platform_status"] = platform_status
        Participant.objects.filter(pk=participant.pk).update(external_meta=meta)
