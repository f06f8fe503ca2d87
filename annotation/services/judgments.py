"""Store a submission: validate it with the mode, score it under the item lock, keep it.

The mode answers (``validate``, ``score``, ``after_submit``'s ``Outcome``); this service
does the writes, each once: the judgment INSERT, the lease and item counters, and one
UPDATE of the participant.
"""

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.errors import Conflict, Gone, LeaseExpired, NotFound, ServiceError, TooFast
from annotation.models import Assignment, Item, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.modes.base import (
    HELD,
    HOLD_FLAG,
    RETURNED,
    SCREEN_OUT_FLAG,
    Mode,
    Outcome,
    hold_state,
    screen_out_reason,
)
from annotation.services import judgment_sql


@dataclass(frozen=True)
class Submitted:
    """A stored judgment; ``created`` False for a repeat of one stored before, ``late`` True
    when it was stored after its lease's expiry (docs/participation.md, "A late answer")."""

    judgment: Judgment
    created: bool
    late: bool = False


GONE_TO_SOMEONE_ELSE = (
    "This item's time ran out and it went to someone else before your answer arrived, so "
    "your answer was not saved; please continue with the next one."
)
TAKEN_BACK = (
    "This item was taken back from you before your answer arrived (by the researcher or the "
    "crowd platform), so your answer was not saved; please continue with the next one."
)
PART_OF_LAPSED_GROUP = (
    "This item's time ran out before your answer arrived, so this answer was not saved. "
    "The answers you gave before it are kept, and it continues where it stopped when it "
    "is served to you again."
)


def judgment_submit(
    *,
    participant: Participant,
    token: str,
    data: dict[str, Any],
    part: int = 0,
    now: datetime | None = None,
    mode: Mode | None = None,
    study: Study | None = None,
) -> Submitted:
    """Validate and store one judgment for a lease the participant holds.

    A repeat of a stored submission (same token and part) returns the stored judgment
    and writes nothing. A late answer (after the lease's expiry) is stored while the lease
    is open, and also after it was given back for lapsing if it closes the lease and the
    item still has room; otherwise ``LeaseExpired``. Raises ServiceError for anything the
    protocol refuses; then nothing is written. On success ``participant`` carries the state
    ``after_submit`` left (the caller need not reload it) and is the returned judgment's
    ``participant``. ``mode`` and ``study`` are the study's mode and row when the caller
    (the view) has them (the study as read this request); otherwise they are looked up.
    """
    now = now or timezone.now()
    try:
        with transaction.atomic():
            if study is None:
                study = Study.objects.get(pk=participant.study_id)
            assignment = _lock(participant, token, study)
            if mode is None:
                mode = get_mode(study.mode)
            parts = mode.parts(assignment.item)
            earlier = _answers(assignment, parts)
            answered = {answer.part: answer.pk for answer in earlier}
            if part in answered:
                stored = Judgment.objects.select_related("item").get(pk=answered[part])
                stored.participant = participant
                return Submitted(stored, created=False)
            if study.status != Study.Status.LIVE:
                raise Gone("This study is closed; nothing was saved.")
            # A lease given back after it lapsed takes its slot again for a late answer
            # that closes it, if the item has room (checked under the item lock below).
            retake = assignment.status != Assignment.Status.OPEN
            if retake:
                _check_late(assignment, part, parts)
            _check_part(part, parts, done_parts=len(answered))
            dwell = _check_dwell(assignment, part, mode, now, earlier)
            payload = mode.validate(assignment, part, data)
            item = assignment.item  # locked with the lease
            if retake and item.judgment_count + item.open_lease_count >= item.target:
                raise LeaseExpired(GONE_TO_SOMEONE_ELSE)
            judgment = _new_judgment(assignment, part, payload, mode, dwell=dwell, now=now)
            outcome = mode.after_submit(participant, judgment)
            last_part = part == parts - 1
            if connection.vendor == "postgresql" and _plain(outcome):
                _store_at_once(judgment, outcome, mode, last_part=last_part, now=now, retake=retake)
            else:
                _store(judgment, outcome, last_part=last_part, now=now, retake=retake)
                _update_participant(participant, outcome, mode, now=now)
            # The lease's judgments as it carries them (``_answers``) now include this one.
            earlier.append(judgment)
            return Submitted(judgment, created=True, late=assignment.expires_at <= now)
    except IntegrityError:
        # A concurrent identical submission won the unique constraint: return its row.
        stored = Judgment.objects.filter(
            assignment__token=token, assignment__participant_id=participant.pk, part=part
        ).first()
        if stored is None:
            raise
        # The winner's after_submit may have changed the state this caller carries.
        participant.refresh_from_db(fields=["state", "status", "completed_at", "flags"])
        stored.participant = participant
        return Submitted(stored, created=False)


def _lock(participant: Participant, token: str, study: Study) -> Assignment:
    """Lock the participant, their lease named by ``token`` and its item (``LOCK_SUBMISSION``),
    copy the participant's locked state onto ``participant``; the lease, with its item and
    ``participant``. ``NotFound`` if the token names no lease of theirs.

    Its own step: the locks of the order shared with ``assignment_next`` (participant,
    assignment, item), and the state every later step reads is the one locked here; a token
    that is not theirs is refused before anything else is read.
    """
    # Locking the participant also keeps two concurrent submissions of theirs from losing
    # one another's update of the protocol state.
    found = judgment_sql.lock_submission(participant.pk, token)
    if found is None:
        if not Participant.objects.filter(pk=participant.pk).exists():
            raise Participant.DoesNotExist("Participant matching query does not exist.")
        raise NotFound("This item was not served to you; nothing was saved.")
    locked, assignment = found
    # As locked: a screen-out (a flag) must be seen by this submission.
    for name in ("state", "status", "completed_at", "flags"):
        setattr(participant, name, locked[name])
    participant.study = study
    # The mode reads the participant (state, study settings) through the lease.
    assignment.participant = participant
    return assignment


def _answers(assignment: Assignment, parts: int) -> list[Judgment]:
    """The lease's stored judgments in id order (``judgment_sql.ANSWERS``: part, time and
    result), left on the lease as its ``judgments`` for the mode. Its own step: one read
    answers every later question about them (a repeat, the next part, the part's clock,
    the mode's earlier results), and it is skipped when it cannot find anything, which is
    the common case."""
    if assignment.status == Assignment.Status.OPEN and parts == 1:
        # Storing the only part of a lease closes it in the same transaction, so an
        # open one-part lease has no judgment yet: nothing to look up.
        found: list[Judgment] = []
        judgment_sql.with_answers(assignment, found)
        return found
    return judgment_sql.answers(assignment)


def _check_part(part: int, parts: int, *, done_parts: int) -> None:
    """Refuse a part that does not exist or is not the next one to answer. Its own step: the
    order of a lease's parts, independent of the mode."""
    if not 0 <= part < parts:
        raise ServiceError(f"Part {part} does not exist (0 to {parts - 1}).")
    if part != done_parts:
        raise Conflict(
            f"Answer part {done_parts + 1} first; parts are answered in order.",
        )


def _shown_at(assignment: Assignment, part: int, earlier: list[Judgment]) -> datetime:
    """``Assignment.part_shown_at`` from the lease's judgments as read (no query): the
    lease's start, or when the previous part was answered if that is later (a reopened
    lease restarts the clock)."""
    previous = next((answer.created_at for answer in earlier if answer.part == part - 1), None)
    if part == 0 or previous is None:
        return assignment.served_at
    return max(previous, assignment.served_at)


def _check_dwell(
    assignment: Assignment, part: int, mode: Mode, now: datetime, earlier: list[Judgment]
) -> float:
    """Seconds the part was shown; ``TooFast`` below the mode's minimum. Its own step: the
    refusal tells the page how long to wait before sending the answer again."""
    dwell = (now - _shown_at(assignment, part, earlier)).total_seconds()
    minimum = mode.min_seconds(assignment)
    if dwell < minimum:
        raise TooFast(
            f"Please take at least {minimum:g} seconds per rating "
            f"(this one came after {max(dwell, 0):.1f} s). Nothing was saved.",
            # Whole seconds the page waits before sending it again (at least one).
            details={"retry_after": max(1, math.ceil(minimum - dwell))},
        )
    return dwell


def _new_judgment(
    assignment: Assignment,
    part: int,
    payload: dict[str, Any],
    mode: Mode,
    *,
    dwell: float,
    now: datetime,
) -> Judgment:
    """The unsaved judgment, scored by the mode. Its own step: ``after_submit`` reads it
    before ``_store`` writes it."""
    participant, item = assignment.participant, assignment.item
    return Judgment(
        study_id=participant.study_id,
        item=item,
        participant=participant,
        assignment=assignment,
        part=part,
        payload=payload,
        result=mode.score(item=item, assignment=assignment, part=part, payload=payload),
        dwell_ms=int(max(dwell, 0) * 1000),
        # The guidelines the page showed (issue 46): the judges' report compares them.
        guidelines_version=mode.guidelines(participant.study).version,
        created_at=now,
    )


def _check_late(assignment: Assignment, part: int, parts: int) -> None:
    """Refuse a late answer to a lease no longer open unless it may take its slot back: the
    lease lapsed (nobody took it back) and this answer closes it. A group's earlier trial
    is refused: its lease is reopened, answers kept, when the group is served again."""
    if assignment.released_by:
        raise LeaseExpired(TAKEN_BACK)
    if assignment.status != Assignment.Status.RELEASED:
        raise Conflict("This item is already answered; nothing was saved.")
    if part != parts - 1:
        raise LeaseExpired(PART_OF_LAPSED_GROUP)


def _store(
    judgment: Judgment, outcome: Outcome, *, last_part: bool, now: datetime, retake: bool = False
) -> None:
    """Insert the judgment as the outcome completes it; close the lease on its last part.

    ``retake``: the lease was given back (its open lease no longer counted), so closing it
    adds the judgment without returning a slot.
    """
    judgment.result = {**judgment.result, **outcome.result}
    if outcome.exclusion:
        judgment.excluded, judgment.exclusion_reason = True, outcome.exclusion
        # Earlier parts of the lease share the flag (e.g. a group whose check failed).
        Judgment.objects.filter(assignment_id=judgment.assignment_id).update(
            excluded=True, exclusion_reason=outcome.exclusion
        )
    judgment.save(force_insert=True)
    if outcome.exclude_participant:
        # A participant-level rule (e.g. failed catch trials): flag all their judgments,
        # keep every row. Judgments excluded earlier keep their first reason.
        if not judgment.excluded:
            judgment.excluded, judgment.exclusion_reason = True, outcome.exclude_participant
        Judgment.objects.filter(participant_id=judgment.participant_id, excluded=False).update(
            excluded=True, exclusion_reason=outcome.exclude_participant
        )
    if outcome.new_items:
        Item.objects.bulk_create(outcome.new_items)
    if last_part:
        assignment = judgment.assignment
        assignment.status = Assignment.Status.SUBMITTED
        assignment.submitted_at = now
        assignment.save(update_fields=["status", "submitted_at"])
        Item.objects.filter(pk=judgment.item_id).update(
            judgment_count=F("judgment_count") + 1,
            open_lease_count=F("open_lease_count") - (0 if retake else 1),
        )
    if outcome.item_target is not None:
        # The item row is locked (judgment_submit); the mode computed the target from it.
        Item.objects.filter(pk=judgment.item_id).update(target=outcome.item_target)


def _plain(outcome: Outcome) -> bool:
    """Whether the outcome writes only what ``STORE_POSTGRESQL`` writes (the common case, a
    lease's exclusion, new items): no participant-level exclusion, new target or flags of
    its own."""
    return not (outcome.exclude_participant or outcome.item_target is not None or outcome.flags)


def _store_at_once(
    judgment: Judgment,
    outcome: Outcome,
    mode: Mode,
    *,
    last_part: bool,
    now: datetime,
    retake: bool,
) -> None:
    """``_store`` and ``_update_participant`` of a plain outcome in one statement, its new
    items included (saved with their ids, as ``bulk_create`` leaves them)."""
    judgment.result = {**judgment.result, **outcome.result}
    if outcome.exclusion:
        # Earlier parts of the lease share the flag, as in ``_store`` (the statement's
        # ``flagged``).
        judgment.excluded, judgment.exclusion_reason = True, outcome.exclusion
    participant = judgment.participant
    changes = _participant_changes(participant, outcome, mode, now=now, completion=False)
    judgment_sql.store(
        judgment,
        last_part=last_part,
        retake=retake,
        now=now,
        participant=participant,
        changed=bool(changes),
        new_items=outcome.new_items,
    )
    if last_part:
        judgment.assignment.status = Assignment.Status.SUBMITTED
        judgment.assignment.submitted_at = now
    # ``completion_earned`` is called after the judgment is stored (its contract: THumB
    # counts the stored judgments), so not before the statement: an UPDATE of its own,
    # once per worker, when the code is earned.
    completed = _completion_change(participant, mode, now=now)
    if completed:
        Participant.objects.filter(pk=participant.pk).update(**completed)


def _update_participant(
    participant: Participant, outcome: Outcome, mode: Mode, *, now: datetime
) -> None:
    """One UPDATE of the participant: the outcome's state and status, and completion."""
    changes = _participant_changes(participant, outcome, mode, now=now)
    if changes:
        Participant.objects.filter(pk=participant.pk).update(**changes)


def _participant_changes(
    participant: Participant,
    outcome: Outcome,
    mode: Mode,
    *,
    now: datetime,
    completion: bool = True,
) -> dict[str, Any]:
    """The participant's columns the outcome changes, set on ``participant`` too: its state
    and status, flags (a screen-out, a hold), and completion."""
    changes: dict[str, Any] = {}
    if outcome.state is not None:
        participant.state = changes["state"] = outcome.state
    if outcome.status is not None:
        participant.status = changes["status"] = outcome.status
    if outcome.flags:
        # The row is locked by judgment_submit, so this read-append-write loses no flag.
        stored = Participant.objects.filter(pk=participant.pk).values_list("flags", flat=True)
        participant.flags = changes["flags"] = [
            *(stored[0] or []),
            *({**flag, "at": now.isoformat()} for flag in outcome.flags),
        ]
    crowd = participant.source != Participant.Source.ACCOUNT
    # Screened out once, for good: the flag is never removed, so no later submission (nor a
    # new session of the same worker) earns the completion code. ``participant.flags`` is
    # as locked (judgment_submit), with this outcome's flags appended above.
    if (
        outcome.screen_out
        and crowd
        and participant.completed_at is None
        and not screen_out_reason(participant.flags)
    ):
        flag = {"kind": SCREEN_OUT_FLAG, "detail": outcome.screen_out[:200]}
        participant.flags = changes["flags"] = [
            *(participant.flags or []),
            {**flag, "at": now.isoformat()},
        ]
    # A hold (VICR's replayed gate) is placed once; until the researcher releases it no
    # submission earns the code, and a return (the other decision) never does.
    placed = hold_state(participant.flags)[0]
    if outcome.hold and crowd and participant.completed_at is None and not placed:
        flag = {"kind": HOLD_FLAG, "detail": outcome.hold[:200]}
        participant.flags = changes["flags"] = [
            *(participant.flags or []),
            {**flag, "at": now.isoformat()},
        ]
    if completion:
        changes.update(_completion_change(participant, mode, now=now))
    return changes


def _completion_change(participant: Participant, mode: Mode, *, now: datetime) -> dict:
    """``{"completed_at": now}`` (set on ``participant`` too) when a crowd worker earns the
    code with the judgment just stored, else ``{}``."""
    if (
        participant.completed_at is None
        and participant.source != Participant.Source.ACCOUNT
        and not screen_out_reason(participant.flags)
        and hold_state(participant.flags)[0] not in (HELD, RETURNED)
        and mode.completion_earned(participant)
    ):
        participant.completed_at = now
        return {"completed_at": now}
    return {}


def participant_settle_exhausted(
    *, participant: Participant, now: datetime, mode: Mode | None = None
) -> None:
    """Pay a crowd worker the study has nothing more to serve for what they did (issue 46,
    row 2): write the mode's ``completion_exhausted`` outcome (the checks applied to their
    answers, and whatever lets ``completion_earned`` say yes), then stamp the completion.

    Called by ``assignment_next`` with the participant's row locked, inside its transaction,
    when no item is left for them. Nothing for accounts, for a worker already paid or
    screened out, or when the mode has no such outcome (the default). ``mode`` is the
    study's mode, as ``assignment_next`` has it.
    """
    if (
        participant.source == Participant.Source.ACCOUNT
        or participant.completed_at is not None
        or screen_out_reason(participant.flags)
    ):
        return
    if mode is None:
        mode = get_mode(participant.study.mode)
    outcome = mode.completion_exhausted(participant)
    if outcome is None:
        return
    if outcome.exclude_participant:
        # The same participant-level exclusion a submission's outcome writes (_store).
        Judgment.objects.filter(participant_id=participant.pk, excluded=False).update(
            excluded=True, exclusion_reason=outcome.exclude_participant
        )
    _update_participant(participant, outcome, mode, now=now)
