"""The periodic crowd sync (``manage.py crowd_sync``, Celery beat ``crowd_sync_live``): read
the platforms' submission lists, record each worker's platform status, and reclaim the
leases of workers who left, for platforms or studies without webhooks.

Prolific: submissions RETURNED, TIMED-OUT or REJECTED. MTurk: assignments Rejected, and
workers whose assignment is not listed (returned or abandoned: ListAssignmentsForHIT lists
submitted, approved and rejected ones only) once the HIT's assignment duration has passed
since they arrived. Each reclaim is recorded as a ``CrowdEvent`` with its own key, so a
webhook and a sync (or two syncs) act once.
"""

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.crowd import mturk, prolific
from annotation.errors import Conflict
from annotation.models import Assignment, CrowdEvent, Participant, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.modes.settings import CrowdSettings
from annotation.services.crowd.credentials import mturk_client, prolific_client
from annotation.services.crowd.reclaim import (
    participant_match,
    participant_platform_status,
    participant_reclaim,
)

logger = logging.getLogger(__name__)


def hit_ids(config: CrowdSettings) -> list[str]:
    """The MTurk HIT ids of a study's settings ``config``."""
    raw = config.mturk_hit_ids
    return [part.strip() for part in raw.split(",") if part.strip()]


def crowd_sync(
    *, study: Study, now: datetime | None = None, mode: Mode | None = None
) -> dict[str, int]:
    """Sync one study with its linked Prolific study and MTurk HITs; counts of what was done.

    Raises Conflict (409) when the study is linked to no crowd study (its settings, not the
    request, are what is missing), InvalidInput when a credential is missing; PlatformError
    when a platform call fails (nothing half-done: each reclaim is its own transaction, and
    a later sync picks up where this one stopped). ``mode``: the study's, if the caller has it.
    """
    now = now or timezone.now()
    config = (mode or get_mode(study.mode)).settings(study)
    hits = hit_ids(config)
    if not config.prolific_study_id and not hits:
        raise Conflict(
            "This study is linked to no crowd study: set prolific_study_id or mturk_hit_ids.",
            field="settings",
        )
    counts = {"seen": 0, "matched": 0, "reclaimed": 0, "released": 0}
    if config.prolific_study_id:
        client = prolific_client(study)
        try:
            submissions = client.submissions(config.prolific_study_id)
        finally:
            client.close()
        for row in submissions:
            _one(
                study,
                counts,
                source=Participant.Source.PROLIFIC,
                worker=str(row.get("participant_id") or ""),
                submission=str(row.get("id") or ""),
                status=str(row.get("status") or ""),
                gone=str(row.get("status") or "") in prolific.RECLAIM_STATUSES,
            )
    if hits:
        client = mturk_client(study)
        for hit in hits:
            listed = client.assignments(hit)
            for row in listed:
                _one(
                    study,
                    counts,
                    source=Participant.Source.MTURK,
                    worker=str(row.get("WorkerId") or ""),
                    submission=str(row.get("AssignmentId") or ""),
                    status=str(row.get("AssignmentStatus") or ""),
                    gone=row.get("AssignmentStatus") in mturk.RECLAIM_STATUSES,
                )
            _abandoned(study, counts, hit, listed, client.assignment_seconds(hit), now)
    return counts


def _abandoned(study, counts, hit: str, listed: list, seconds: int, now: datetime) -> None:
    """Workers of this HIT absent from its list after the assignment duration: gone."""
    if seconds <= 0:
        return
    present = {str(row.get("AssignmentId") or "") for row in listed}
    holders = Participant.objects.filter(
        study=study,
        source=Participant.Source.MTURK,
        external_meta__hitId=hit,
        created_at__lte=now - timedelta(seconds=seconds),
        assignments__status=Assignment.Status.OPEN,
    ).distinct()
    for participant in holders:
        assignment_id = (participant.external_meta or {}).get("assignmentId", "")
        if assignment_id and assignment_id not in present:
            _reclaim_once(study, counts, participant, assignment_id, "Abandoned")


def _one(study, counts, *, source, worker, submission, status, gone) -> None:
    counts["seen"] += 1
    participant = participant_match(
        study=study, source=source, worker_id=worker, submission_id=submission
    )
    if participant is None:
        return
    counts["matched"] += 1
    if gone:
        _reclaim_once(study, counts, participant, submission, status)
    else:
        participant_platform_status(participant=participant, platform_status=status)


def _reclaim_once(study, counts, participant, submission: str, status: str) -> None:
    with transaction.atomic():
        try:
            with transaction.atomic():
                event = CrowdEvent.objects.create(
                    platform=participant.source,
                    key=f"{participant.source}:sync:{submission}:{status}"[:128],
                    kind="sync",
                    status=status,
                    study=study,
                    participant=participant,
                )
        except IntegrityError:
            return  # already reclaimed by an earlier sync
        released = participant_reclaim(
            participant=participant, platform_status=status, via=f"{participant.source} sync"
        )
        CrowdEvent.objects.filter(pk=event.pk).update(
            outcome=f"{status}: {released} lease(s) released"
        )
    counts["reclaimed"] += 1
    counts["released"] += released


def crowd_sync_live() -> int:
    """Sync every live study linked to a crowd study; returns how many were synced.

    A study whose sync fails is logged and skipped: one researcher's expired token must not
    stop the others' reclaim.
    """
    synced = 0
    for study in Study.objects.filter(status=Study.Status.LIVE):
        mode = get_mode(study.mode)
        config = mode.settings(study)
        if not (config.prolific_study_id or hit_ids(config)):
            continue
        try:
            crowd_sync(study=study, mode=mode)
            synced += 1
        except Exception as exc:  # noqa: BLE001 - logged per study, the loop goes on
            logger.warning("crowd sync of study %s failed: %s", study.pk, exc)
    return synced
