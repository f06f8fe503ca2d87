"""Participants: registered annotators and crowd workers arriving with signed study links."""

from typing import Any

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction

from annotation.models import Participant, Study, User

LINK_SALT = "capeval.crowd-link"

PROLIFIC_KEYS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
MTURK_KEYS = ("workerId", "assignmentId", "hitId", "turkSubmitTo")
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"


class CrowdLinkError(Exception):
    """A crowd link that is forged, expired, or lacks the worker's id."""


def crowd_link_token(study: Study) -> str:
    """The signed part of a study's crowd link (it names the study and cannot be forged)."""
    return signing.TimestampSigner(salt=LINK_SALT).sign(str(study.public_id))


def study_from_crowd_token(token: str) -> Study:
    try:
        public_id = signing.TimestampSigner(salt=LINK_SALT).unsign(
            token, max_age=settings.CAPEVAL_LINK_MAX_AGE
        )
    except signing.SignatureExpired as exc:
        raise CrowdLinkError("This study link has expired.") from exc
    except signing.BadSignature as exc:
        raise CrowdLinkError("This study link is not valid.") from exc
    study = Study.objects.filter(public_id=public_id, status=Study.Status.LIVE).first()
    if study is None:
        raise CrowdLinkError("This study is not open.")
    return study


def crowd_identity(params: dict[str, str]) -> tuple[str, str, dict[str, str]]:
    """Return (source, external id, metadata) from Prolific or MTurk query parameters."""
    # Surrounding spaces (a pasted id) must not turn a returning worker into a new one.
    clean = {k: v.strip()[:128] for k, v in params.items() if isinstance(v, str) and v.strip()}
    if clean.get("PROLIFIC_PID"):
        meta = {k: clean[k] for k in PROLIFIC_KEYS if k in clean}
        return Participant.Source.PROLIFIC, clean["PROLIFIC_PID"], meta
    if clean.get("workerId"):
        meta = {k: clean[k] for k in MTURK_KEYS if k in clean}
        return Participant.Source.MTURK, clean["workerId"], meta
    raise CrowdLinkError("The link lacks a worker id (PROLIFIC_PID or workerId).")


def is_mturk_preview(params: dict[str, str]) -> bool:
    return params.get("assignmentId") == MTURK_PREVIEW


def participant_for_user(*, study: Study, user: User) -> Participant:
    """The registered user's participant in the study, created on first visit."""
    try:
        with transaction.atomic():
            participant, _ = Participant.objects.get_or_create(
                study=study, user=user, defaults={"source": Participant.Source.ACCOUNT}
            )
    except IntegrityError:
        participant = Participant.objects.get(study=study, user=user)
    return participant


def participant_for_crowd_worker(
    *, study: Study, source: str, external_id: str, meta: dict[str, Any]
) -> tuple[Participant, bool]:
    """One participant per external id and study: a returning worker resumes.

    The platform details of the latest visit win: a returning MTurk worker arrives with the
    assignmentId of a new HIT, and the completion form must post that one.
    """
    try:
        with transaction.atomic():
            participant, created = Participant.objects.get_or_create(
                study=study,
                source=source,
                external_id=external_id,
                defaults={"external_meta": meta},
            )
    except IntegrityError:
        participant, created = (
            Participant.objects.get(study=study, source=source, external_id=external_id),
            False,
        )
    if not created and meta and {**participant.external_meta, **meta} != participant.external_meta:
        participant.external_meta = {**participant.external_meta, **meta}
        participant.save(update_fields=["external_meta"])
    return participant, created
