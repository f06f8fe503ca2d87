"""Prolific's webhook: signature and freshness checked first, each event processed once.

Prolific signs with the subscription's secret, which the researcher stores with their
credentials; the event names the Prolific study, so the secrets tried are those of the
owners of the CapEval studies linked to it (``prolific_study_id``). A request no secret
signed, or signed too long ago, is refused (401) before anything is written.
"""

import hashlib
import json
import logging
import time

from django.conf import settings
from django.db import IntegrityError, transaction

from annotation.crowd.prolific import RECLAIM_STATUSES
from annotation.crowd.signature import prolific_refusal
from annotation.models import CrowdEvent, Participant, Study
from annotation.services.crowd.credentials import webhook_secrets
from annotation.services.crowd.reclaim import (
    participant_match,
    participant_platform_status,
    participant_reclaim,
)

logger = logging.getLogger(__name__)

STATUS_EVENT = "submission.status.change"
MAX_BODY_BYTES = 64 * 1024


class WebhookRefused(Exception):
    """The request is not from Prolific (or is stale): answer 401, change nothing."""


def event_key(payload: dict, signed_by: set[int] | frozenset[int] = frozenset()) -> str:
    """The event's id when Prolific sends one, else a digest of what makes it one event
    (type, submission, status): a submission reaches each status once.

    Scoped by the owners whose secret signed it: a rival's forged copy of an event (signed
    with their own secret, acting on nothing of the owner's) must not take its key and have
    the owner's real event dropped as a duplicate.
    """
    given = payload.get("id") or payload.get("event_id")
    if isinstance(given, str) and 0 < len(given) <= 100:
        base = f"id|{given}"
    else:
        base = "|".join(str(payload.get(k, "")) for k in ("event_type", "resource_id", "status"))
    scope = ",".join(str(owner) for owner in sorted(signed_by))
    return "prolific:" + hashlib.sha256(f"{base}|{scope}".encode()).hexdigest()[:64]


def prolific_webhook_receive(
    *, body: bytes, timestamp: str, signature: str, now: float | None = None
) -> str:
    """Check and process one webhook request; returns what was done (for the log and 200).

    Raises ``WebhookRefused`` (nothing written) for a bad signature or a stale timestamp.
    """
    now = time.time() if now is None else now
    try:
        payload = json.loads(body) if len(body) <= MAX_BODY_BYTES else None
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise WebhookRefused("not a JSON object")
    prolific_study = str(payload.get("study_id") or "")[:64]
    studies = (
        list(Study.objects.filter(settings__prolific_study_id=prolific_study))
        if prolific_study
        else []
    )
    # Each owner's secrets are checked apart: the event may act only on the studies of the
    # owners whose secret signed it, never on another researcher's study linked to the same
    # Prolific id (a rival could store a secret they know and sign for its workers).
    refusal = "bad signature"
    signed_by = set()
    for owner, owner_secrets in webhook_secrets(studies).items():
        refusal = prolific_refusal(
            secrets=owner_secrets,
            timestamp=timestamp,
            signature=signature,
            body=body,
            now=now,
            max_age=settings.CAPEVAL_CROWD_WEBHOOK_MAX_AGE,
        )
        if refusal in ("missing or malformed timestamp", "stale timestamp"):
            break
        if not refusal:
            signed_by.add(owner)
    if not signed_by:
        logger.warning("prolific webhook refused: %s", refusal or "bad signature")
        raise WebhookRefused(refusal or "bad signature")
    studies = [study for study in studies if study.owner_id in signed_by]
    kind = str(payload.get("event_type") or "")[:64]
    status = str(payload.get("status") or "")[:32]
    # One transaction: the event row and what it did commit together, so an event whose
    # processing failed is not marked done (Prolific sends it again).
    with transaction.atomic():
        try:
            with transaction.atomic():
                event = CrowdEvent.objects.create(
                    platform="prolific",
                    key=event_key(payload, signed_by),
                    kind=kind,
                    status=status,
                    study=studies[0] if len(studies) == 1 else None,
                )
        except IntegrityError:
            logger.info(
                "prolific webhook: event %s already processed", event_key(payload, signed_by)
            )
            return "duplicate"
        if kind != STATUS_EVENT:
            outcome = f"ignored: unknown event {kind!r}"
            logger.info("prolific webhook %s", outcome)
        else:
            outcome = _status_change(event, studies, payload, status)
        CrowdEvent.objects.filter(pk=event.pk).update(outcome=outcome[:200])
    return outcome


def _status_change(event: CrowdEvent, studies: list[Study], payload: dict, status: str) -> str:
    worker = str(payload.get("participant_id") or "")[:128]
    submission = str(payload.get("resource_id") or "")[:128]
    for study in studies:
        participant = participant_match(
            study=study,
            source=Participant.Source.PROLIFIC,
            worker_id=worker,
            submission_id=submission,
        )
        if participant is None:
            continue
        CrowdEvent.objects.filter(pk=event.pk).update(study=study, participant=participant)
        if status in RECLAIM_STATUSES:
            released = participant_reclaim(
                participant=participant, platform_status=status, via="prolific webhook"
            )
            return f"{status}: {released} lease(s) released"
        participant_platform_status(participant=participant, platform_status=status)
        return f"{status}: recorded"
    logger.info("prolific webhook: no participant for submission %s", submission)
    return "no matching participant"
