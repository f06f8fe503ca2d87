"""Leases: give a participant the next item, release expired leases.

Capacity is enforced by a conditional UPDATE (``judgment_count + open_lease_count < target``)
that only one transaction can win for the last slot, on SQLite and PostgreSQL alike; on
PostgreSQL the candidate rows are also read with ``SKIP LOCKED`` so that concurrent
participants spread over different items instead of queueing on the same row.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Assignment, Item, Participant
from annotation.modes import get_mode

CANDIDATES_PER_TRY = 8


def _with_capacity(items):
    return items.alias(taken=F("judgment_count") + F("open_lease_count")).filter(
        taken__lt=F("target")
    )


def assignment_next(*, participant: Participant, now: datetime | None = None) -> Assignment | None:
    """Return the participant's open lease, or lease them the next item that needs judgments.

    Never an item they already have an assignment for in this round, never beyond the
    item's target. Returns None when nothing is left for them.
    """
    now = now or timezone.now()
    mode = get_mode(participant.study.mode)
    with transaction.atomic():
        # Serialises one participant's concurrent requests (two tabs, a double click).
        Participant.objects.select_for_update().filter(pk=participant.pk).first()
        current = (
            Assignment.objects.select_related("item")
            .filter(participant=participant, status=Assignment.Status.OPEN, expires_at__gt=now)
            .order_by("served_at")
            .first()
        )
        if current is not None:
            return current
        round_number = mode.current_round(participant)
        candidates = (
            _with_capacity(mode.eligible_items(participant))
            .exclude(assignments__participant=participant, assignments__round=round_number)
            .order_by("judgment_count", "position", "id")
        )
        if connection.features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        for item_id in candidates.values_list("id", flat=True)[:CANDIDATES_PER_TRY]:
            claimed = _with_capacity(Item.objects.filter(pk=item_id)).update(
                open_lease_count=F("open_lease_count") + 1
            )
            if claimed:
                return Assignment.objects.select_related("item").create(
                    participant=participant,
                    item_id=item_id,
                    round=round_number,
                    served_at=now,
                    expires_at=now + timedelta(seconds=settings.CAPEVAL_LEASE_SECONDS),
                )
    return None


def assignment_release_expired(*, now: datetime | None = None) -> int:
    """Release open leases past their expiry so their items can be served again."""
    now = now or timezone.now()
    released = 0
    expired_ids = list(
        Assignment.objects.filter(status=Assignment.Status.OPEN, expires_at__lte=now).values_list(
            "id", flat=True
        )[:10_000]
    )
    for assignment_id in expired_ids:
        with transaction.atomic():
            assignment = (
                Assignment.objects.select_for_update()
                .filter(pk=assignment_id, status=Assignment.Status.OPEN)
                .first()
            )
            if assignment is None:
                continue
            assignment.status = Assignment.Status.RELEASED
            assignment.save(update_fields=["status"])
            Item.objects.filter(pk=assignment.item_id).update(
                open_lease_count=F("open_lease_count") - 1
            )
            released += 1
    return released
