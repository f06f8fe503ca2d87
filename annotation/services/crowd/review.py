"""Approve, reject and bonus crowd submissions through the ledger (``CrowdLedgerEntry``).

Every call is claimed first: a ledger row unique per (participant, action, reason) is
committed before the platform is called, so a retry, a double click or two researchers at
once find the row and do not call again. The steps of one call are committed one by one on
purpose (not one transaction): a row must say what was sent even when the process dies
after the platform answered.

A call whose outcome is unknown (sent, then a timeout, a reset or a 5xx, which may be a
gateway's while the platform behind it acted) leaves the row ``uncertain``, and an
uncertain row is never sent again blindly. The next attempt reads the platform's own record
first (``_read_back``: the submission's or assignment's status, MTurk's ListBonusPayments)
and sends only if that record shows it was not done. Prolific lists no bonus payments, so
an uncertain Prolific bonus waits for its owner to check on Prolific and confirm what
happened (``ledger_resolve``). A 4xx is the platform's refusal and a connect error sent
nothing: both leave the row ``failed`` (or ``set_up``), sent again on the next attempt.

Prolific's bonus is two calls, set up then pay, and pay is not idempotent. The set-up id is
stored before paying, so a set-up that was never paid (or a pay Prolific refused) is paid
with the stored id on retry, never set up twice. MTurk's SendBonus carries the row's own
``UniqueRequestToken``, which MTurk refuses a second time within 24 hours.
"""

import logging
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotation.crowd import PlatformError
from annotation.crowd.prolific import REJECT_MIN_CHARS
from annotation.errors import Conflict, InvalidInput, NotFound
from annotation.models import CrowdLedgerEntry, Participant, Study, User
from annotation.modes import get_mode
from annotation.services.crowd.credentials import (
    credentials_missing,
    mturk_client,
    prolific_client,
)

logger = logging.getLogger(__name__)

Action = CrowdLedgerEntry.Action
Status = CrowdLedgerEntry.Status

#: A row claimed this long ago and still "claimed" belongs to a process that died, perhaps
#: after its call reached the platform: it is taken over and treated as uncertain.
CLAIM_STALE = timedelta(minutes=5)
#: The largest bonus one participant may get in one call (in cents): a typo guard.
MAX_BONUS_CENTS = 100_00
FILTERS = {
    "all": "Every crowd worker",
    "completed_clean": "Completed, no integrity flag",
    "flagged": "With integrity flags",
    "incomplete": "Not completed",
}
#: Prolific's rejection categories CapEval uses.
REJECT_CATEGORIES = ("FAILED_CHECK", "LOW_EFFORT", "FAILED_INSTRUCTIONS", "OTHER")


def parse_money(text: str, *, field: str) -> int:
    """An amount typed as "1.50" (or "1") in cents; "" is 0."""
    text = (text or "").strip()
    if not text:
        return 0
    whole, _dot, part = text.partition(".")
    if not (whole.isascii() and whole.isdigit() and len(whole) <= 4) or not (
        part == "" or (part.isascii() and part.isdigit() and len(part) <= 2)
    ):
        raise InvalidInput(f"{text[:20]!r} is not an amount like 1.50", field=field)
    return int(whole) * 100 + int(part.ljust(2, "0") or 0)


def money(cents: int) -> str:
    """Cents as the platforms write amounts ("1.50")."""
    return f"{cents // 100}.{cents % 100:02d}"


def payment_terms(source: str) -> tuple[str, str, float]:
    """A platform's name, the currency it pays in and its service fee in percent of what
    the workers get (the settings' comment gives the sources of the default rates)."""
    if source == Participant.Source.MTURK:
        return "MTurk", "USD", settings.CAPEVAL_MTURK_FEE_PERCENT
    return "Prolific", settings.CAPEVAL_CURRENCY, settings.CAPEVAL_PROLIFIC_FEE_PERCENT


def review_costs(rows: list[dict]) -> list[dict]:
    """What a bonus costs, per platform: paid to the workers, the platform's fee (rounded
    half up to the cent; VAT, where it applies, is not included) and the sum charged."""
    paid: dict[str, int] = {}
    for row in rows:
        source = row["participant"].source
        paid[source] = paid.get(source, 0) + row["amount_cents"]
    costs = []
    for source, cents in sorted(paid.items()):
        label, currency, percent = payment_terms(source)
        exact = Decimal(cents) * Decimal(str(percent)) / 100
        fee = int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))
        costs.append(
            {
                "platform": source,
                "label": label,
                "currency": currency,
                "paid_cents": cents,
                "fee_percent": percent,
                "fee_cents": fee,
                "charged_cents": cents + fee,
                "paid": money(cents),
                "fee": money(fee),
                "charged": money(cents + fee),
                "percent": f"{percent:g}",
            }
        )
    return costs


def review_selection(*, study: Study, filter: str = "all", ids=None) -> list[Participant]:
    """The study's crowd participants in a filter, optionally only the given ids."""
    if filter not in FILTERS:
        raise InvalidInput(f"unknown filter {filter!r}", field="filter")
    people = (
        Participant.objects.filter(study=study)
        .exclude(source=Participant.Source.ACCOUNT)
        .annotate(kept=Count("judgments", filter=Q(judgments__excluded=False)))
        .annotate(failed=Count("judgments", filter=Q(judgments__excluded=True)))
        .order_by("id")
    )
    if ids is not None:
        people = people.filter(pk__in=list(ids))
    chosen = []
    for person in people:
        flagged = bool(person.flags)
        if filter == "completed_clean" and (person.completed_at is None or flagged):
            continue
        if filter == "flagged" and not flagged:
            continue
        if filter == "incomplete" and person.completed_at is not None:
            continue
        chosen.append(person)
    return chosen


def reject_message(participant: Participant) -> str:
    """A rejection reason from the participant's integrity flags and failed checks, long
    enough for Prolific (at least ``REJECT_MIN_CHARS`` characters)."""
    kinds = sorted({flag.get("kind", "?") for flag in participant.flags or []})
    failed = getattr(participant, "failed", 0)
    reasons = []
    if kinds:
        named = ", ".join(kind.replace("_", " ") for kind in kinds)
        reasons.append(f"integrity checks recorded: {named}")
    if failed:
        reasons.append(f"{failed} answer(s) failed the study's attention or quality checks")
    if not reasons:
        reasons.append("the submission did not meet the study's instructions")
    return (
        "Your submission was rejected because "
        + "; ".join(reasons)
        + ". The checks are described in the study's instructions; thank you for your time."
    )


def review_plan(
    *,
    study: Study,
    action: str,
    participants: list[Participant],
    amount_cents: int = 0,
    per_judgment_cents: int = 0,
    reason: str = "",
    message: str = "",
) -> dict:
    """What a review would do: per participant the amount and message, and the total.

    Refuses (InvalidInput) a bonus without an amount or over the cap, a Prolific rejection
    reason under 100 characters, a participant without a recorded submission id.
    """
    if action not in Action.values:
        raise InvalidInput(f"unknown action {action!r}", field="action")
    if not participants:  # none matches the selection now: the study's state, 409
        raise Conflict("No worker is selected.", field="participants")
    rows, total = [], 0
    for person in participants:
        amount = 0
        if action == Action.BONUS:
            amount = amount_cents or per_judgment_cents * getattr(person, "kept", 0)
            if amount <= 0 or amount > MAX_BONUS_CENTS:
                raise InvalidInput(
                    f"Bonus for {person.pseudonym}: {money(max(amount, 0))} is not between "
                    f"0.01 and {money(MAX_BONUS_CENTS)}.",
                    field="amount",
                )
        text = (message or reject_message(person)) if action == Action.REJECT else ""
        prolific = person.source == Participant.Source.PROLIFIC
        if action == Action.REJECT and prolific and len(text) < REJECT_MIN_CHARS:
            raise InvalidInput(
                f"Prolific needs a rejection reason of at least {REJECT_MIN_CHARS} "
                f"characters ({len(text)} given).",
                field="message",
            )
        if not _submission(person):
            raise InvalidInput(
                f"{person.pseudonym} has no recorded submission id (SESSION_ID or "
                "assignmentId): approve, reject or pay them on the platform.",
                field="participants",
            )
        existing = CrowdLedgerEntry.objects.filter(
            participant=person, action=action, reason=_reason_key(action, reason)
        ).first()
        rows.append(
            {
                "participant": person,
                "amount_cents": amount,
                "amount": money(amount),
                "currency": payment_terms(person.source)[1],
                "message": text,
                "existing": existing.get_status_display() if existing else "",
            }
        )
        total += amount
    costs = review_costs(rows) if action == Action.BONUS else []
    return {
        "action": action,
        "rows": rows,
        "total_cents": total,
        # With its currency: "5.50 GBP", or "5.50 GBP + 1.00 USD" across platforms.
        "total": " + ".join(f"{c['paid']} {c['currency']}" for c in costs) or money(total),
        "costs": costs,
        # Said at the review, before anything is confirmed (the send would be refused).
        "missing_credentials": credentials_missing(
            study, {row["participant"].source for row in rows}
        ),
    }


def _reason_key(action: str, reason: str) -> str:
    # Approve and reject happen once per participant whatever is typed; bonuses once per
    # reason (two different bonuses need two different reasons).
    return (reason.strip() or "bonus")[:200] if action == Action.BONUS else ""


def _submission(person: Participant) -> str:
    meta = person.external_meta or {}
    key = "SESSION_ID" if person.source == Participant.Source.PROLIFIC else "assignmentId"
    return str(meta.get(key, ""))


def crowd_review(
    *,
    study: Study,
    user: User | None,
    action: str,
    participants: list[Participant],
    amount_cents: int = 0,
    per_judgment_cents: int = 0,
    reason: str = "",
    message: str = "",
    category: str = "FAILED_CHECK",
    dry_run: bool = False,
) -> dict:
    """Approve, reject or bonus the participants (the plan is checked first, whole).

    Returns the plan with each row's ledger entry (``entry``) after the calls. A row
    already done, or claimed by someone else just now, is not called again.
    """
    if category not in REJECT_CATEGORIES:
        raise InvalidInput(f"unknown rejection category {category!r}", field="category")
    plan = review_plan(
        study=study,
        action=action,
        participants=participants,
        amount_cents=amount_cents,
        per_judgment_cents=per_judgment_cents,
        reason=reason,
        message=message,
    )
    if dry_run:
        return plan
    # Clients first: a missing credential must refuse the whole review before any row is
    # claimed (a claimed row would block a retry until it goes stale).
    clients: dict[str, object] = {}
    for source in {row["participant"].source for row in plan["rows"]}:
        clients[source] = (
            prolific_client(study) if source == Participant.Source.PROLIFIC else mturk_client(study)
        )
    try:
        for row in plan["rows"]:
            person = row["participant"]
            claimed = _claim(
                study=study,
                person=person,
                action=action,
                reason=_reason_key(action, reason),
                amount_cents=row["amount_cents"],
                message=row["message"],
                user=user,
            )
            if claimed is None:
                row["entry"] = CrowdLedgerEntry.objects.get(
                    participant=person, action=action, reason=_reason_key(action, reason)
                )
                continue
            entry, check_first = claimed
            client = clients[person.source]
            if check_first and not _read_back(entry, person, client):
                row["entry"] = entry  # done, refused or still unknown: nothing sent
                continue
            row["entry"] = _send(entry, person, client, category)
    finally:
        for client in clients.values():
            getattr(client, "close", lambda: None)()
    return plan


def _claim(*, study, person, action, reason, amount_cents, message, user):
    """The ledger row claimed for this call, and whether the platform must be read first
    (the row's last call may have acted); None if it is done, or another call holds it, or
    it is uncertain and only its owner can settle it."""
    try:
        with transaction.atomic():
            entry = CrowdLedgerEntry.objects.create(
                study=study,
                participant=person,
                action=action,
                reason=reason,
                amount_cents=amount_cents,
                message=message,
                created_by=user,
                attempts=1,
            )
            return entry, False
    except IntegrityError:
        pass
    entry = CrowdLedgerEntry.objects.get(participant=person, action=action, reason=reason)
    stale = entry.status == Status.CLAIMED and entry.updated_at < timezone.now() - CLAIM_STALE
    if entry.status in (Status.FAILED, Status.SET_UP):
        check_first = False
    elif entry.status == Status.UNCERTAIN or stale:
        # A dead process's Prolific bonus with no set-up id paid nothing yet.
        check_first = not (_prolific_bonus(entry, person) and not entry.platform_ref)
        if check_first and not _readable(entry, person):
            if stale:
                _save(entry, Status.UNCERTAIN, f"interrupted during the call; {_hint(entry)}")
            return None
    else:
        return None
    # Conditional: of two retries at once, one wins. A read-back is not an attempt.
    won = CrowdLedgerEntry.objects.filter(
        pk=entry.pk, status=entry.status, updated_at=entry.updated_at
    ).update(
        status=Status.CLAIMED,
        attempts=F("attempts") + (0 if check_first else 1),
        updated_at=timezone.now(),
    )
    if not won:
        return None
    entry.refresh_from_db()
    return entry, check_first


def _save(entry: CrowdLedgerEntry, status: str, answer: str, **fields) -> CrowdLedgerEntry:
    entry.status, entry.answer = status, answer[:2000]
    for name, value in fields.items():
        setattr(entry, name, value)
    entry.save(update_fields=["status", "answer", "updated_at", *fields])
    return entry


def _prolific_bonus(entry: CrowdLedgerEntry, person: Participant) -> bool:
    return entry.action == Action.BONUS and person.source == Participant.Source.PROLIFIC


def _readable(entry: CrowdLedgerEntry, person: Participant) -> bool:
    """Whether the platform's records can tell this call's outcome (Prolific's API lists no
    bonus payments)."""
    return not _prolific_bonus(entry, person)


def _platform(entry: CrowdLedgerEntry) -> str:
    return "Prolific" if entry.participant.source == Participant.Source.PROLIFIC else "MTurk"


def _hint(entry: CrowdLedgerEntry) -> str:
    if _readable(entry, entry.participant):
        return (
            f"outcome unknown: not sent again until {_platform(entry)}'s record shows it was "
            "not done (read on the next attempt), or you confirm below"
        )
    return "outcome unknown: check the bonus on Prolific, then confirm below whether it was paid"


#: What the platforms call a submission once each action is done.
DONE_STATUS = {
    (Participant.Source.PROLIFIC, Action.APPROVE): "APPROVED",
    (Participant.Source.PROLIFIC, Action.REJECT): "REJECTED",
    (Participant.Source.MTURK, Action.APPROVE): "Approved",
    (Participant.Source.MTURK, Action.REJECT): "Rejected",
}
#: ... and while it is still to be decided.
OPEN_STATUS = {
    Participant.Source.PROLIFIC: "AWAITING REVIEW",
    Participant.Source.MTURK: "Submitted",
}


def _read_back(entry: CrowdLedgerEntry, person: Participant, client) -> bool:
    """Settle a claimed row whose last call may have acted, from the platform's record.

    True when the record shows it was not done (the caller sends it); otherwise the row is
    saved done, failed (the submission was decided otherwise) or uncertain (the record could
    not be read), and False.
    """
    platform, submission = _platform(entry), _submission(person)
    try:
        if entry.action == Action.BONUS:  # MTurk only: see _readable
            if not client.bonus_paid(
                worker_id=person.external_id,
                assignment_id=submission,
                amount=money(entry.amount_cents),
                reason=entry.reason,
            ):
                entry.attempts += 1  # sent again, with the same UniqueRequestToken
                return True
            _save(entry, Status.DONE, "paid: MTurk's ListBonusPayments shows this bonus")
            return False
        if person.source == Participant.Source.PROLIFIC:
            status = client.submission_status(submission)
        else:
            status = client.assignment_status(submission)
    except PlatformError as exc:
        logger.warning("crowd check of %s failed: %s", person.pseudonym, exc)
        _save(entry, Status.UNCERTAIN, f"{platform} could not be read ({exc}); {_hint(entry)}")
        return False
    if status == DONE_STATUS[person.source, entry.action]:
        _save(entry, Status.DONE, f"{platform} shows {status}")
        return False
    if status == OPEN_STATUS[person.source]:
        entry.attempts += 1
        return True
    _save(entry, Status.FAILED, f"{platform} shows {status or 'no status'}: not sent")
    return False


def _send(entry: CrowdLedgerEntry, person: Participant, client, category: str):
    submission = _submission(person)
    amount = money(entry.amount_cents)
    if _prolific_bonus(entry, person) and not entry.platform_ref:
        # Setting up pays nothing: a failed or lost set-up is simply set up again.
        linked = get_mode(entry.study.mode).settings(entry.study).prolific_study_id
        try:
            ref = client.bonus_set_up(
                study_id=linked or (person.external_meta or {}).get("STUDY_ID", ""),
                participant_id=person.external_id,
                amount=amount,
            )
        except PlatformError as exc:
            logger.warning("crowd bonus set-up of %s failed: %s", person.pseudonym, exc)
            return _save(entry, Status.FAILED, str(exc), attempts=entry.attempts)
        # Stored (still claimed) before paying: a retry pays this set-up, never a new one.
        _save(entry, Status.CLAIMED, f"set up {ref}, paying", platform_ref=ref)
    try:
        if person.source == Participant.Source.PROLIFIC:
            if entry.action == Action.APPROVE:
                answer = client.approve(submission)
            elif entry.action == Action.REJECT:
                answer = client.reject(submission, message=entry.message, category=category)
            else:
                answer = client.bonus_pay(entry.platform_ref)
        elif entry.action == Action.APPROVE:
            answer = client.approve(submission)
        elif entry.action == Action.REJECT:
            answer = client.reject(submission, message=entry.message)
        else:
            answer = client.bonus(
                worker_id=person.external_id,
                assignment_id=submission,
                amount=amount,
                reason=entry.reason,
                token=bonus_token(entry),
            )
    except PlatformError as exc:
        logger.warning("crowd %s of %s failed: %s", entry.action, person.pseudonym, exc)
        if exc.outcome_unknown:
            return _save(entry, Status.UNCERTAIN, f"{exc}; {_hint(entry)}", attempts=entry.attempts)
        if (
            entry.action == Action.BONUS
            and person.source == Participant.Source.MTURK
            and entry.attempts > 1
            and "UniqueRequestToken" in exc.message
        ):
            return _save(
                entry, Status.DONE, f"already paid (MTurk: {exc})", attempts=entry.attempts
            )
        status = Status.SET_UP if entry.platform_ref else Status.FAILED
        return _save(entry, status, str(exc), attempts=entry.attempts)
    return _save(entry, Status.DONE, str(answer)[:2000], attempts=entry.attempts)


def bonus_token(entry: CrowdLedgerEntry) -> str:
    """MTurk's idempotency key of this bonus: the row's id and creation time, so another
    CapEval (a staging copy, a restored database) sharing the MTurk account never reuses
    one within MTurk's 24 hours."""
    return f"capeval-{entry.pk}-{entry.created_at:%Y%m%d%H%M%S%f}"


def ledger_resolve(
    *, study: Study, entry_id: int, done: bool, confirmed: bool, user: User
) -> CrowdLedgerEntry:
    """The owner checked the platform for an uncertain call and confirms what happened:
    done, or not done (the next attempt sends it; a Prolific bonus with its stored set-up)."""
    if not confirmed:
        raise InvalidInput(
            "Tick the confirmation that you checked this on the platform.", field="confirm"
        )
    with transaction.atomic():
        entry = (
            CrowdLedgerEntry.objects.select_for_update()
            .select_related("participant")
            .filter(pk=entry_id, study=study)
            .first()
        )
        if entry is None:
            raise NotFound("No such ledger entry.")
        if entry.status != Status.UNCERTAIN:
            raise Conflict("Only a call whose outcome is unknown needs checking.")
        words = ("paid", "not paid") if entry.action == Action.BONUS else ("done", "not done")
        note = f"{user.get_username()} checked {_platform(entry)}: {words[0 if done else 1]}"
        if done:
            return _save(entry, Status.DONE, note)
        return _save(entry, Status.SET_UP if entry.platform_ref else Status.FAILED, note)


def ledger_rows(study: Study, *, limit: int = 200) -> list[CrowdLedgerEntry]:
    """The study's ledger, newest first; each entry's ``amount_shown`` has its currency."""
    entries = list(
        CrowdLedgerEntry.objects.filter(study=study)
        .select_related("participant", "created_by")
        .order_by("-updated_at", "-id")[:limit]
    )
    for entry in entries:
        currency = payment_terms(entry.participant.source)[1]
        entry.amount_shown = f"{money(entry.amount_cents)} {currency}"
    return entries
