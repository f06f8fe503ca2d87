"""Completion codes held for the researcher's review, and the one-click decision on them.

A mode may hold a crowd worker's completion code (``Outcome.hold``; VICR does when a
player's gates look replayed, issue 45 row 6): the submission service adds a
``review_hold`` flag and stamps no completion while it is undecided. The study's owner (who
pays) or staff decide on the crowd review page, one click per worker:

- **release**: the hold is lifted; if the worker has done the work that earns the code
  (``Mode.completion_earned``) it is stamped now, and their page shows it;
- **return**: the worker's page asks them to return the submission (Prolific's and MTurk's
  return path, nothing paid); their open leases go back, their judgments are excluded with
  the reason (never deleted) and they are served nothing more (``participant_reclaim``).

Each decision is a flag with who decided, so the dashboard and the export show it.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from annotation.errors import Conflict, NotFound, ServiceError
from annotation.models import Participant, Study, User
from annotation.models.crowd import crowd_left
from annotation.modes import get_mode
from annotation.modes.base import (
    HELD,
    HOLD_RELEASED_FLAG,
    HOLD_RETURNED_FLAG,
    hold_state,
    screen_out_reason,
)
from annotation.services.crowd.reclaim import participant_reclaim

RELEASE, RETURN = "release", "return"
DECISIONS = {RELEASE: HOLD_RELEASED_FLAG, RETURN: HOLD_RETURNED_FLAG}
#: The platform status a return records (Prolific calls the request a "return request").
RETURN_STATUS = "RETURN REQUESTED"


def held_participants(study: Study) -> list[Participant]:
    """The study's crowd workers whose completion code waits for a decision, oldest first.

    Flags are read in Python: a JSON containment lookup is not available on SQLite, and only
    participants with a flag at all are read.
    """
    flagged = (
        Participant.objects.filter(study=study)
        .exclude(source=Participant.Source.ACCOUNT)
        .exclude(flags=[])
        .order_by("created_at", "pk")
    )
    return [person for person in flagged if hold_state(person.flags)[0] == HELD]


def participant_hold_decide(
    *,
    study: Study,
    participant_id: int,
    decision: str,
    user: User,
    now: datetime | None = None,
) -> Participant:
    """Release or return one held worker (``decision``: ``release`` or ``return``).

    Raises ServiceError naming ``decision`` for another value, NotFound for a participant
    of another study, Conflict when the worker is not held (never held, or decided
    already: a second click, or two researchers at once, changes nothing).
    """
    if decision not in DECISIONS:
        raise ServiceError("Choose release or return.", field="decision")
    now = now or timezone.now()
    with transaction.atomic():
        locked = (
            Participant.objects.select_for_update(of=("self",))
            .select_related("study")
            .filter(pk=participant_id, study=study)
            .first()
        )
        if locked is None:
            raise NotFound("No such worker in this study.")
        if hold_state(locked.flags)[0] != HELD:
            raise Conflict(
                f"{locked.pseudonym}'s completion code is not waiting for a review "
                "(it may have been decided already)."
            )
        flag = {"kind": DECISIONS[decision], "detail": f"by {user.get_username()}"[:200]}
        locked.flags = [*(locked.flags or []), {**flag, "at": now.isoformat()}]
        fields = ["flags"]
        if (
            decision == RELEASE
            and locked.completed_at is None
            and not screen_out_reason(locked.flags)
            and not crowd_left(locked.flags)
            and get_mode(study.mode).completion_earned(locked)
        ):
            locked.completed_at = now
            fields.append("completed_at")
        locked.save(update_fields=fields)
        if decision == RETURN:
            # The reclaim's own lock is on the row already held here; it releases the open
            # leases, excludes the judgments with the reason and stops serving the worker.
            participant_reclaim(
                participant=locked,
                platform_status=RETURN_STATUS,
                via=f"review by {user.get_username()}",
                now=now,
            )
            locked.refresh_from_db()
    return locked
