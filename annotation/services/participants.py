"""Participants: registered annotators and crowd workers arriving with signed study links.

A crowd worker is a browser, not a typed id: the first arrival binds the participant to the
browser's id (a signed, HttpOnly cookie the view sets), so someone who knows a worker's
``PROLIFIC_PID`` cannot resume that worker from another browser. Arrivals are limited per
client network (an IPv4 address or an IPv6 /64), so throwaway ids cannot take every
lease of a study.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.addresses import UNPARSED_NETWORK
from annotation.errors import Conflict, Forbidden, Gone, ServiceError, TooFast
from annotation.identities import network_of
from annotation.models import CrowdRefusal, LinkGroup, Participant, Study, User, Vision
from annotation.modes import catch, get_mode
from annotation.modes.base import HELD, RETURNED, Mode, hold_state, screen_out_reason
from annotation.modes.settings import completion_hosts, url_on_hosts
from annotation.selectors import PROLIFIC_COMPLETE

LINK_SALT = "capeval.crowd-link"

PROLIFIC_KEYS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
MTURK_KEYS = ("workerId", "assignmentId", "hitId", "turkSubmitTo")
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
#: Hosts a worker's browser may post the MTurk completion form to (never a host taken from
#: the query string as is: that would make the page post to any site).
MTURK_HOSTS = ("www.mturk.com", "workersandbox.mturk.com")


@dataclass(frozen=True)
class Arrival:
    """``reentry``: a worker already paid, back from another browser with the same platform
    submission; the page shows their code again and the browser does not take over the
    participant (issue 46, row 3)."""

    participant: Participant
    created: bool
    reentry: bool = False


#: Salt of the stable crowd links (a signature of the public id alone). Its own salt, so a
#: stable token can never pass for a timestamped one or the other way round.
STABLE_LINK_SALT = "capeval.crowd-link.stable"


def crowd_link_token(study: Study) -> str:
    """The signed part of a study's crowd link: it names the study and cannot be forged.

    Stable: the same on every page load and across closing and reopening, because a
    researcher pastes it into Prolific or MTurk once. It therefore carries no time; how long
    it is accepted is decided when it is used (``crowd_link_expires_at``).
    """
    return signing.Signer(salt=STABLE_LINK_SALT).sign(str(study.public_id))


def crowd_link_expires_at(study: Study) -> datetime:
    """When the study's crowd link stops being accepted.

    ``CAPEVAL_LINK_MAX_AGE_DAYS`` after the study last changed (``updated_at``: opening,
    reopening, closing), so reopening a study renews its link without changing it. The
    study model keeps no separate opening time; a study must be live as well.
    """
    return study.updated_at + timedelta(seconds=settings.CAPEVAL_LINK_MAX_AGE)


def study_from_crowd_token(token: str, *, now: datetime | None = None) -> Study:
    """The live study a crowd link names; ServiceError if forged, expired or not open.

    Accepts the stable links (``crowd_link_token``) and, until they expire, the older
    timestamped ones (signed at each page load, valid ``CAPEVAL_LINK_MAX_AGE`` from then),
    so links already pasted into a platform keep working.
    """
    now = now or timezone.now()
    try:
        public_id = signing.Signer(salt=STABLE_LINK_SALT).unsign(token)
        stable = True
    except signing.BadSignature:
        stable = False
        try:
            public_id = signing.TimestampSigner(salt=LINK_SALT).unsign(
                token, max_age=settings.CAPEVAL_LINK_MAX_AGE
            )
        except signing.SignatureExpired as exc:
            raise ServiceError("This study link has expired.", field="link") from exc
        except signing.BadSignature as exc:
            raise ServiceError("This study link is not valid.", field="link") from exc
    study = Study.objects.filter(public_id=public_id, status=Study.Status.LIVE).first()
    if study is None:
        # 410 Gone: the link was real, but the study takes no answers (closed or not open yet).
        raise Gone(
            "This study is not open: it has closed, or has not started yet.",
            field="link",
        )
    if stable and crowd_link_expires_at(study) <= now:
        raise ServiceError("This study link has expired.", field="link")
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
    raise ServiceError("The link lacks a worker id (PROLIFIC_PID or workerId).", field="link")


def crowd_link_group(params: dict[str, str]) -> str:
    """The group a crowd link requires (its ``group`` parameter: "blv" or "sighted"), ""
    when it names none. A recruiter's screener (Prolific's) can send blind and low-vision
    workers to a link of their own; a value the platform does not know is the link's
    mistake, refused with ServiceError rather than read as "any group"."""
    raw = params.get("group", "")
    value = raw.strip().lower() if isinstance(raw, str) else ""
    if not value:
        return LinkGroup.ANY
    if value not in (LinkGroup.BLV, LinkGroup.SIGHTED):
        raise ServiceError(
            "This study link names an unknown group; the researcher's link should say "
            "group=blv or group=sighted.",
            field="group",
        )
    return value


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
    """One participant per external id and study, with no browser or address checks.

    For loaders, benchmarks and tests that stand in for workers; the crowd entry page uses
    ``crowd_arrive``, which enforces the checks.
    """
    try:
        with transaction.atomic():
            return Participant.objects.get_or_create(
                study=study,
                source=source,
                external_id=external_id,
                defaults={"external_meta": meta},
            )
    except IntegrityError:
        return Participant.objects.get(study=study, source=source, external_id=external_id), False


def _flag(participant: Participant, kind: str, detail: str, now: datetime) -> None:
    """Append an integrity event to the participant (never removes one)."""
    participant.flags = [
        *(participant.flags or []),
        {"kind": kind, "at": now.isoformat(), "detail": detail[:200]},
    ]
    participant.save(update_fields=["flags"])


def _refuse(
    *,
    study: Study,
    reason: str,
    message: str,
    source: str,
    external_id: str,
    address: str | None,
    participant: Participant | None = None,
    detail: str = "",
    kind: type[ServiceError] = Forbidden,
) -> ServiceError:
    """Store the refusal (``CrowdRefusal``) and return the error to raise."""
    CrowdRefusal.objects.create(
        study=study,
        participant=participant,
        source=source,
        external_id=external_id,
        address=address,
        reason=reason,
        detail=detail[:500],
    )
    return kind(message, field="arrival")


def crowd_arrive(
    *,
    study: Study,
    source: str,
    external_id: str,
    meta: dict[str, Any],
    browser_id: str,
    address: str | None,
    link_group: str = LinkGroup.ANY,
    now: datetime | None = None,
) -> Arrival:
    """Admit a crowd worker arriving with ``browser_id``, or raise ServiceError.

    ``link_group`` (``crowd_link_group``) is stored on a new participant: the group the link
    required, checked when they declare their vision (``participant_declare_vision``).

    A refusal is stored (``CrowdRefusal``) before the error is raised.

    - The study's ``prolific_study_id``, when set, must equal Prolific's ``STUDY_ID``.
    - A known worker id resumes only in the browser it first arrived with; from any other
      browser the attempt is refused and flagged on that participant, unless the worker was
      paid and the link carries the same submission (``_paid_same_submission``): then the
      arrival is a ``reentry`` that only shows the code again (issue 46, row 3).
    - A new worker id from a network (``identities.network_of``: the IPv4 address, or the
      IPv6 /64) that already brought ``crowd_arrivals_per_address_per_hour`` new
      participants this hour is refused. An unreadable address (None) counts in one shared
      bucket (``addresses.UNPARSED_NETWORK``), never as "no limit".
    - A new worker id in a browser that already holds another participant of the study is
      admitted, and both are flagged (``shared_browser``).

    The platform details of the latest visit win: a returning MTurk worker arrives with the
    assignmentId of a new HIT, and the completion form must post that one.
    """
    now = now or timezone.now()
    config = get_mode(study.mode).settings(study)
    network = network_of(address) if address else UNPARSED_NETWORK
    refusal = {"study": study, "source": source, "external_id": external_id, "address": address}
    with transaction.atomic():
        # Arrivals of one study are serialised so that the per-address count cannot be
        # overtaken by a burst of concurrent arrivals; arrivals are rare next to answers.
        Study.objects.select_for_update().filter(pk=study.pk).first()
        expected = config.prolific_study_id
        if source == Participant.Source.PROLIFIC and expected and meta.get("STUDY_ID") != expected:
            error = _refuse(
                **refusal,
                reason="wrong_study_id",
                detail=f"STUDY_ID={meta.get('STUDY_ID', '')!r}",
                message="This link belongs to another Prolific study; nothing was recorded.",
            )
        else:
            participant = (
                Participant.objects.select_for_update()
                .filter(study=study, source=source, external_id=external_id)
                .first()
            )
            if participant is None:
                arrived = _new_worker_arrives(
                    refusal,
                    limit=config.crowd_arrivals_per_address_per_hour,
                    link_group=link_group,
                    meta=meta,
                    browser_id=browser_id,
                    network=network,
                    now=now,
                )
            else:
                arrived = _known_worker_arrives(
                    participant, refusal, meta=meta, browser_id=browser_id, now=now
                )
            if isinstance(arrived, Arrival):
                return arrived
            error = arrived
    # Raised after the block commits, so the refusal (and any flag) is kept.
    raise error


def _known_worker_arrives(
    participant: Participant,
    refusal: dict[str, Any],
    *,
    meta: dict[str, Any],
    browser_id: str,
    now: datetime,
) -> Arrival | ServiceError:
    """Resume a known worker id in its own browser, show a paid worker the code again, or
    store the refusal of a foreign browser and return its error (raised by the caller once
    the refusal is committed). Its own step: the browser rules of a worker id seen before.
    """
    address = refusal["address"]
    if (
        participant.browser_id
        and participant.browser_id != browser_id
        and _paid_same_submission(participant, refusal["source"], meta)
    ):
        # Issue 46, row 3: a worker paid once who reopens the link elsewhere
        # (another browser, a phone) was told to return the submission, which
        # forfeits the pay. Shown the code again, not resumed: the new browser
        # never acts as the participant.
        _flag(participant, "code_shown_again", f"from {address or 'unknown'}", now)
        return Arrival(participant, created=False, reentry=True)
    if participant.browser_id and participant.browser_id != browser_id:
        _flag(participant, "foreign_browser", f"from {address or 'unknown'}", now)
        return _refuse(
            **refusal,
            participant=participant,
            reason="foreign_browser",
            message=(
                "This worker id has already started this study in another "
                "browser. Please continue in the browser you started with; this "
                "attempt has been recorded."
            ),
        )
    # Bind a participant from before browsers were recorded to this one.
    participant.browser_id = participant.browser_id or browser_id
    participant.external_meta = {**participant.external_meta, **meta}
    participant.save(update_fields=["browser_id", "external_meta"])
    return Arrival(participant, created=False)


def _new_worker_arrives(
    refusal: dict[str, Any],
    *,
    limit: int,
    link_group: str,
    meta: dict[str, Any],
    browser_id: str,
    network: str,
    now: datetime,
) -> Arrival | ServiceError:
    """Admit a new worker id, flagging it and any other participant of the study in the
    same browser, or store the refusal of a network over its hourly limit and return its
    error (raised by the caller once the refusal is committed). Its own step: the one
    arrival that creates a participant, and the limit that guards it.
    """
    study, address = refusal["study"], refusal["address"]
    if _arrivals_this_hour(study, network, now) >= limit:
        return _refuse(
            **refusal,
            reason="address_rate",
            kind=TooFast,
            message=(
                "Too many new participants have joined this study from your network "
                "in the last hour. Please try again later."
            ),
        )
    participant = Participant.objects.create(
        study=study,
        source=refusal["source"],
        external_id=refusal["external_id"],
        external_meta=meta,
        browser_id=browser_id,
        address=address,
        network=network,
        link_group=link_group,
    )
    for other in Participant.objects.filter(study=study, browser_id=browser_id).exclude(
        pk=participant.pk
    ):
        _flag(other, "shared_browser", f"also used by {participant.pseudonym}", now)
        _flag(participant, "shared_browser", f"also used by {other.pseudonym}", now)
    return Arrival(participant, created=True)


def _paid_same_submission(participant: Participant, source: str, meta: dict[str, Any]) -> bool:
    """Whether a known worker id arriving from another browser may see its code again: the
    worker was paid (the completion code, or a screen-out code) and the link carries the
    very submission that did the work (Prolific's ``SESSION_ID``, MTurk's
    ``assignmentId``), as stored at an earlier arrival. The id alone (seen in a screenshot,
    say) is not enough, and an id that never did the work has nothing to be shown."""
    if participant.completed_at is None and not screen_out_reason(participant.flags):
        return False
    key = "SESSION_ID" if source == Participant.Source.PROLIFIC else "assignmentId"
    stored = (participant.external_meta or {}).get(key)
    return bool(stored) and stored == meta.get(key) and stored != MTURK_PREVIEW


def _arrivals_this_hour(study: Study, network: str, now: datetime) -> int:
    return (
        Participant.objects.filter(study=study, network=network)
        .exclude(source=Participant.Source.ACCOUNT)
        .filter(created_at__gt=now - timedelta(hours=1))
        .count()
    )


def crowd_completion(participant: Participant, mode: Mode | None = None) -> dict[str, Any]:
    """What a crowd worker who earned completion is shown: the code and where to report it.

    Empty until the worker has earned it (``completed_at``), and always for accounts. A
    worker screened out before earning it (``Outcome.screen_out``) gets ``screened_out``
    (the reason) with the study's screen-out code and URL instead, when the study has one,
    else its failed-check code. Before it is earned: ``held`` (the sentence) while a hold
    waits for the researcher (``services/crowd/holds.py``), ``returned`` once they asked for
    a return, and ``checks_failed`` (why, with ``failed_check_code``) when the study's own
    checks excluded the work (issue 45). ``participant.study`` should be loaded; ``mode`` is
    its mode when the caller (a participation view) has looked it up.
    """
    if participant.source == Participant.Source.ACCOUNT:
        return {}
    study = participant.study
    if mode is None:
        mode = get_mode(study.mode)
    config = mode.settings(study)
    screened = screen_out_reason(participant.flags) if participant.completed_at is None else ""
    if screened:
        code, url = config.screen_out_code_for(), config.prolific_screen_out_url
        context: dict[str, Any] = {"screened_out": screened}
        if not code and not url:
            # The study pays no screen-out: the failed-check code, else a return.
            return _failed_check(context, config.failed_check_code, participant)
        context["completion_code"] = code
    elif participant.completed_at is None:
        held, sentence = hold_state(participant.flags)
        if held == HELD:  # the researcher reviews the worker first (issue 45, row 6)
            return {"held": sentence}
        if held == RETURNED:
            return {"returned": True}
        # Not earned: when the study's own checks excluded the work, say so (issue 45).
        withheld = mode.completion_withheld(participant)
        if not withheld and catch.is_flagged(participant):
            withheld = CATCH_WITHHELD
        if not withheld:
            return {}
        return _failed_check({"checks_failed": withheld}, config.failed_check_code, participant)
    else:
        code, url = config.completion_code_for(study), config.prolific_completion_url
        context = {"completion_code": code}
    meta = participant.external_meta or {}
    if participant.source == Participant.Source.PROLIFIC:
        stored = url
        # Checked again here: a URL stored before hosts were checked (or a host the admin
        # has since removed) must not send workers away; Prolific's own page is the fallback.
        if not (stored and url_on_hosts(stored, completion_hosts())):
            stored = PROLIFIC_COMPLETE + "?" + urlencode({"cc": code}) if code else ""
        if stored:
            context["prolific_url"] = stored
    elif participant.source == Participant.Source.MTURK:
        submit_to = urlsplit(meta.get("turkSubmitTo", ""))
        if (
            submit_to.scheme == "https"
            and submit_to.hostname in MTURK_HOSTS
            and meta.get("assignmentId")
        ):
            context["mturk_submit_url"] = f"https://{submit_to.hostname}/mturk/externalSubmit"
            context["mturk_assignment_id"] = meta["assignmentId"]
    return context


#: Why a worker the catch-trial rule flagged has no completion code (every mode with catch
#: trials; ``modes/catch.py``).
CATCH_WITHHELD = (
    "Your answers did not pass this study's attention checks (items with a known answer), "
    "so they are excluded and do not earn the completion code."
)


def _failed_check(context: dict[str, Any], code: str, participant: Participant) -> dict[str, Any]:
    """``context`` with the study's failed-attention-check code (Prolific's code of that
    type) and, for a Prolific worker, the link that reports it; without a code the page asks
    for a return. An MTurk worker is asked to return the HIT: MTurk has no such code."""
    if code and participant.source != Participant.Source.MTURK:
        context["failed_check_code"] = code
        if participant.source == Participant.Source.PROLIFIC:
            context["failed_check_url"] = PROLIFIC_COMPLETE + "?" + urlencode({"cc": code})
    return context


#: The choices of the vision question, as the form posts them.
VISION_CHOICES = (Vision.BLIND, Vision.LOW_VISION, Vision.SIGHTED)
GROUP_WORDS = {LinkGroup.BLV: "blind and low-vision", LinkGroup.SIGHTED: "sighted"}


def participant_declare_vision(
    participant: Participant, *, vision: Any, screen_reader: Any, consent: Any
) -> Participant:
    """Store a participant's self-reported vision and screen-reader use, once, and return
    the participant as stored.

    Only a study whose mode ``asks_vision`` asks (Conflict otherwise), only with the
    participant's ``consent`` (True), and only once (Conflict: the answer decides which
    items they were served, so changing it would mix their ratings into the other group).
    Bad input is a ServiceError naming each field (``details["fields"]``). A crowd link that
    required a group (``link_group``) refuses the other group with Forbidden and stores
    nothing, so the worker is served nothing and told to return the study.
    """
    problems = []
    if vision not in VISION_CHOICES:
        problems.append({"field": "vision", "message": "Choose blind, low vision or sighted."})
    if not isinstance(screen_reader, bool):
        problems.append(
            {"field": "screen_reader", "message": "Choose whether you use a screen reader."}
        )
    if consent is not True:
        problems.append(
            {
                "field": "consent",
                "message": "Tick the box to agree that your answer is stored; "
                "without it this study cannot go on.",
            }
        )
    if problems:
        raise ServiceError(
            problems[0]["message"], field=problems[0]["field"], details={"fields": problems}
        )
    study = participant.study
    if not get_mode(study.mode).asks_vision:
        raise Conflict("This study does not ask about vision.", field="vision")
    group = LinkGroup.SIGHTED if vision == Vision.SIGHTED else LinkGroup.BLV
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        if locked.vision:
            raise Conflict(
                "You have already answered this question; the answer cannot be changed.",
                field="vision",
            )
        if locked.link_group and locked.link_group != group:
            raise Forbidden(
                f"This study link is for {GROUP_WORDS[locked.link_group]} participants "
                "only, so there is nothing for you to rate here. Please return the study "
                "on the site you came from; your answer was not stored.",
                field="vision",
            )
        locked.vision = vision
        locked.screen_reader = screen_reader
        locked.save(update_fields=["vision", "screen_reader"])
    locked.study = study
    return locked
