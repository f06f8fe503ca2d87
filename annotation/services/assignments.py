"""Leases: give a participant the next item, release expired leases.

Capacity is enforced by a conditional UPDATE (``judgment_count + open_lease_count < target``)
that only one transaction can win for the last slot, on SQLite and PostgreSQL alike; on
PostgreSQL the candidate row is also read with ``SKIP LOCKED`` so that concurrent
participants spread over different items instead of queueing on the same row.

Lock order, shared with ``judgments.judgment_submit``: participant row, then assignment
rows, then item rows. Keeping one order is what makes deadlocks impossible.

A lease past its expiry never blocks a claim: when no item has capacity left, the study's
lapsed leases are given back on the spot and the claim is tried again, so a study does not
depend on Celery beat to recover from workers who walked away (or from throwaway ids that
took every lease).

A lease that lapses is not free for its holder to take again at once. Squatters re-claim
the moment their leases lapse and poll faster than any person, so a study whose capacity
they hold would never reach an honest worker. So after a crowd lease lapses, the linked
identity that held it (``identities.linked_q``: the same id, browser or network) gets no new
lease for ``CAPEVAL_LAPSE_WAIT_SECONDS`` (the freed slot goes to whoever else asks first,
within seconds), and ``CAPEVAL_LAPSE_LIMIT`` lapses within ``CAPEVAL_LAPSE_WINDOW_SECONDS``
bar it for ``CAPEVAL_LAPSE_BAR_SECONDS`` from the latest. Work already begun (a lapsed lease
with answered parts, a HUMANr group) may still be resumed while waiting. Registered accounts
are exempt.
"""

import copy
import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Exists, Expression, F, Q, QuerySet
from django.db.models.functions import Cast
from django.utils import timezone

from annotation.errors import ServiceError, TooFast
from annotation.models import Assignment, Item, Judgment, Participant, Study, new_token
from annotation.models.crowd import crowd_left
from annotation.modes import catch, get_mode
from annotation.modes.base import Mode, screen_out_reason
from annotation.services import assignment_sql
from annotation.services.judgments import participant_settle_exhausted

RELEASE_BATCH = 10_000
#: Participant flag kept when a lapsed lease is reopened (its own lapse record is reused).
LAPSE_FLAG = "lease_lapsed"


def _with_capacity(items: QuerySet[Item]) -> QuerySet[Item]:
    return items.alias(taken=F("judgment_count") + F("open_lease_count")).filter(
        taken__lt=F("target")
    )


#: A prime above any item position: ``(a * position + b) % PRIME`` with ``0 < a < PRIME`` is
#: then a permutation of the positions (a bijection modulo a prime).
PRIME = 2_147_483_647


def _drawn_position(participant: Participant) -> Expression:
    """A sort key that puts the positions in an order drawn for this worker (issue 46, row 12).

    Among equally taken items, serving the lowest position sent every worker to the same
    item first (an arena's first image). The order is drawn from the study's seed and the
    worker's own id (their crowd id, or account), so the same worker of the same design gets
    it again, and computed by the database in the same query: no query per item. An affine
    map modulo a prime is not a uniform shuffle, but its first element, which decides where
    each worker starts, is spread over the items; least taken still comes first.
    """
    a, b = _drawn_keys(participant)
    # 64-bit arithmetic: position is a 32-bit column on PostgreSQL and a * position is not.
    return (Cast("position", BigIntegerField()) * a + b) % PRIME


def _drawn_keys(participant: Participant) -> tuple[int, int]:
    """The worker's ``a`` and ``b`` of ``_drawn_position`` (``assignment_sql.DRAWN`` too)."""
    who = participant.external_id or f"account:{participant.user_id}"
    rng = random.Random(f"{participant.study.seed}:{participant.source}:{who}")
    return rng.randrange(1, PRIME), rng.randrange(PRIME)


def _release(assignment_id: int, item_id: int) -> bool:
    """Release one open lease and give its slot back; False if it was no longer open.

    Call inside a transaction. The conditional UPDATE waits for a concurrent submission of
    the same lease and then sees it submitted, so a slot is never given back twice.
    """
    released = Assignment.objects.filter(pk=assignment_id, status=Assignment.Status.OPEN).update(
        status=Assignment.Status.RELEASED
    )
    if released:
        Item.objects.filter(pk=item_id).update(open_lease_count=F("open_lease_count") - 1)
    return bool(released)


def lapse_wait_until(read: assignment_sql.Worker, now: datetime) -> datetime | None:
    """Until when the participant's linked identity gets no new lease for letting leases
    lapse, or None if it may have one now (the rule is in the module docstring), from what
    ``LOCK_WORKER`` read.

    A lapse is a crowd lease that reached its expiry unanswered and was not given back by a
    researcher (``released_by``); it counts from its expiry, whether or not it has been
    released yet. A lapsed lease reopened for the same item (the least taken item is often
    the one just lapsed) leaves a ``lease_lapsed`` flag on its participant first, so
    re-claiming one item over and over counts every time. The rule needs only how many
    lapses there are and the latest one.
    """
    since = now - timedelta(seconds=settings.CAPEVAL_LAPSE_WINDOW_SECONDS)
    flagged = [
        datetime.fromisoformat(flag["at"])
        for flags in read.lapse_flags
        for flag in flags or []
        if isinstance(flag, dict) and flag.get("kind") == LAPSE_FLAG
    ]
    flagged = [at for at in flagged if since < at <= now]
    count = len(flagged) + read.lapsed_count
    if not count:
        return None
    latest = max([*flagged, *([read.lapsed_latest] if read.lapsed_latest else [])])
    until = latest + timedelta(seconds=settings.CAPEVAL_LAPSE_WAIT_SECONDS)
    if count >= settings.CAPEVAL_LAPSE_LIMIT:
        until = max(until, latest + timedelta(seconds=settings.CAPEVAL_LAPSE_BAR_SECONDS))
    return until if until > now else None


def _release_lapsed_in_study(study_id: int, now: datetime) -> int:
    """Give back the study's leases past their expiry (inside the caller's transaction)."""
    lapsed = list(
        Assignment.objects.filter(
            item__study_id=study_id, status=Assignment.Status.OPEN, expires_at__lte=now
        ).values_list("id", "item_id")[:RELEASE_BATCH]
    )
    return sum(_release(assignment_id, item_id) for assignment_id, item_id in lapsed)


def assignment_next(
    *,
    participant: Participant,
    now: datetime | None = None,
    mode: Mode | None = None,
    study: Study | None = None,
) -> Assignment | None:
    """Return the participant's open lease, or lease them the next item that needs judgments.

    A reload returns the same lease with its original ``served_at``. Otherwise the least
    taken item (judgments plus open leases) that they have not had in this round and that
    still has capacity. Returns None when nothing is left for them or the study is not live.
    The lease comes with its item and its participant (as locked, with the study) loaded.
    ``mode`` and ``study`` are the study's mode and row when the caller (the view) has them
    already (the study as read this request); otherwise they are looked up.
    """
    now = now or timezone.now()
    with transaction.atomic():
        if study is None:
            study = Study.objects.filter(pk=participant.study_id).first()
            if study is None:
                return None
        worker = _lock_worker(participant, study, now)
        if worker is None:
            return None
        locked, read = worker
        if not _may_be_served(locked):
            return None
        if mode is None:
            mode = get_mode(study.mode)
        round_number = mode.current_round(locked)
        # The common case in one statement: no lease of theirs to return, give back or
        # reopen (checked by the claim itself), no lapse to wait out, the network under its
        # limit. Anything else, or nothing to claim, takes the full path below.
        fresh = not read.holds_lease and lapse_wait_until(read, now) is None
        if fresh and not _network_full(locked, mode, read):
            lease = _claim_fresh(locked, mode, round_number, now)
            if lease is not None:
                return lease
        leases = _leases_that_matter(locked, round_number)
        for lease in leases:
            if lease.status == Assignment.Status.OPEN and lease.expires_at > now:
                lease.participant = locked
                return lease
        released = _give_back_own_lapsed(leases, round_number)
        waiting, resumable = _lapse_wait(locked, released, now, read)
        _check_network_leases(locked, mode, read.network_leases)
        candidates = _candidates(locked, mode, round_number)
        if waiting is not None:
            candidates = candidates.filter(pk__in=resumable)
        return _claim(participant, locked, mode, candidates, round_number, released, waiting, now)


def _claim_fresh(
    locked: Participant, mode: Mode, round_number: int, now: datetime
) -> Assignment | None:
    """Claim and lease the next item if the participant holds no lease that matters (open,
    or released this round): the claim's own statement checks that, after the lock, so a
    lease another tab of theirs took while this request waited is seen. None otherwise, or
    when nothing could be claimed without waiting; the caller then takes the full path."""
    items = mode.fresh_items(locked)
    eligible = assignment_sql.eligible_where(items)
    if eligible == assignment_sql.NOTHING:
        return None  # the mode's filter matches nothing: the full path settles it
    if eligible is not None:
        # One table's filter (every mode's common case): the rest is written out.
        drawn = (*_drawn_keys(locked), PRIME) if mode.order_per_worker else None
        candidates = assignment_sql.fresh_candidate(eligible, locked.pk, round_number, drawn)
    else:
        mine = Assignment.objects.filter(participant_id=locked.pk).filter(
            Q(status=Assignment.Status.OPEN)
            | Q(status=Assignment.Status.RELEASED, round=round_number)
        )
        candidates = _candidates(locked, mode, round_number, items).filter(~Exists(mine))
    seconds = lease_seconds(participant=locked, mode=mode)
    new = _new_lease(locked, round_number, now, seconds, released={})
    claimed = assignment_sql.claim(candidates, wait=False, lease=new)
    if claimed is None:
        return None
    return _leased(locked, claimed, new, round_number, now, seconds, released={})


def _lock_worker(
    participant: Participant, study: Study, now: datetime
) -> tuple[Participant, assignment_sql.Worker] | None:
    """Lock the participant's row (and its browser-mates') and read their leases; None if
    the participant is gone. Returns the participant as locked (the caller's copy with the
    locked columns and ``study``) and what ``LOCK_WORKER`` read.

    Its own step: this is the first lock of the order shared with ``judgment_submit``, and
    every later step reads the participant as locked here.
    """
    # Serialises one participant's concurrent requests (two tabs, a double click) and
    # reads their protocol state as the last committed submission left it.
    # Participants of one browser are one worker (HUMANr's exposure bars what any of them
    # met): lock them all, in id order, so two of them are never served from one state.
    # No deadlock: judgment_submit locks only its own participant row, and every claim
    # takes browser-mates in the same order.
    since = now - timedelta(seconds=settings.CAPEVAL_LAPSE_WINDOW_SECONDS)
    crowd = participant.source != Participant.Source.ACCOUNT
    read = assignment_sql.lock_worker(participant, crowd=crowd, now=now, since=since)
    if not read.locked:
        return None
    # A copy: the caller's participant changes only where the docstrings say (settling).
    locked = copy.copy(participant)
    for name, value in read.locked.items():
        setattr(locked, name, value)
    locked.study = study
    return locked, read


def _may_be_served(locked: Participant) -> bool:
    """Whether the locked participant may get any item: a live study, and nothing in their
    flags that ends their work. Its own step: each refusal has its own reason, and none of
    them reads the database."""
    if locked.study.status != Study.Status.LIVE:
        return False
    if screen_out_reason(locked.flags):
        # Screened out (Outcome.screen_out): nothing more, so no later answer can earn
        # the completion code; the finished page shows the screen-out code.
        return False
    if catch.is_flagged(locked):
        # The catch-trial rule excluded them: every further answer would be excluded
        # too, so more work would waste their time and a crowd study's money. The
        # finished page tells them why.
        return False
    # Returned, timed out or rejected on the platform: the reclaim gave their leases
    # to the next worker, and answers after it would be unpaid and counted.
    return not crowd_left(locked.flags)


def _leases_that_matter(locked: Participant, round_number: int) -> list[Assignment]:
    """The participant's open leases and this round's released ones, oldest first. Its own
    step: it is the one read of their leases, shared by every step after it."""
    # One read for every lease that matters here: the open ones (the current lease, or
    # lapsed ones to give back) and this round's released ones, since an item that comes
    # back to them reopens its old lease (one lease per participant, item and round).
    # With their items and judgments: an open one is returned with them (a reload: the
    # page shows the part after its answered ones), as is a reopened one.
    return assignment_sql.leases_that_matter(locked.pk, round_number)


def _give_back_own_lapsed(leases: list[Assignment], round_number: int) -> dict[int, Assignment]:
    """Release the participant's own lapsed leases; return this round's released leases by
    item. Its own step: it frees their slots before any claim, and its result says which
    old lease a claimed item reopens."""
    released: dict[int, Assignment] = {}
    for lease in leases:
        if lease.status == Assignment.Status.OPEN:
            # The participant's own lapsed leases go back now, not at the next beat
            # tick, so they never hold two slots and a late answer to the old lease is
            # refused.
            _release(lease.pk, lease.item_id)
            lease.status = Assignment.Status.RELEASED
        if lease.round == round_number:
            released[lease.item_id] = lease
    return released


def _lapse_wait(
    locked: Participant,
    released: dict[int, Assignment],
    now: datetime,
    read: assignment_sql.Worker,
) -> tuple[ServiceError | None, list[int]]:
    """The refusal a crowd worker waiting out a lapse gets, and the items they may still
    resume meanwhile; raises it at once if there are none. Its own step: the lapse rule
    (module docstring) narrows the claim rather than ending it."""
    if locked.source == Participant.Source.ACCOUNT:
        return None, []
    wait_until = lapse_wait_until(read, now)
    if wait_until is None:
        return None, []
    minutes = max(1, -(-int((wait_until - now).total_seconds()) // 60))
    waiting = TooFast(
        "You, or someone on your network or in your browser, let a task lapse "
        "without answering it, so others are served first for a while. Please "
        f"try again in {minutes} minute{'s' if minutes != 1 else ''}.",
    )
    # Work already begun (a HUMANr group with answered trials) may still be
    # resumed: its answers are kept only if the same lease is finished.
    resumable = list(
        Judgment.objects.filter(
            assignment_id__in=[lease.pk for lease in released.values()]
        ).values_list("item_id", flat=True)
    )
    if not resumable:
        raise waiting
    return waiting, resumable


def _network_full(locked: Participant, mode: Mode, read: assignment_sql.Worker) -> bool:
    """Whether the crowd worker's network holds the study's limit of open leases."""
    if not locked.network or locked.source == Participant.Source.ACCOUNT:
        return False
    return read.network_leases >= mode.settings(locked.study).crowd_open_leases_per_address


def _check_network_leases(locked: Participant, mode: Mode, network_leases: int) -> None:
    """Refuse a crowd worker whose network holds the study's limit of open leases. Its own
    step: a limit on the network, not on this participant."""
    if locked.network and locked.source != Participant.Source.ACCOUNT:
        limit = mode.settings(locked.study).crowd_open_leases_per_address
        # Counted by LOCK_WORKER (open unexpired leases of the network in the study): an
        # IPv4 address or IPv6 /64, so one /64 cannot hold a slot per address.
        if network_leases >= limit:
            raise TooFast(
                "Your network already holds as many open tasks in this study as it "
                "allows. Please finish or leave those first, then reload this page.",
            )


def _candidates(
    locked: Participant, mode: Mode, round_number: int, items: QuerySet[Item] | None = None
) -> QuerySet[Item]:
    """The items the participant may be served, in serving order (not evaluated). Its own
    step: it builds the one query every claim attempt reads. ``items``: the mode's eligible
    items when the caller asked for them already (the mode is asked once per serve)."""
    # A lease that lapsed unanswered does not count as "had": the item may come back to
    # them (otherwise a lapsed tutorial pair could never be finished).
    had_this_round = Assignment.objects.filter(participant=locked, round=round_number).exclude(
        status=Assignment.Status.RELEASED
    )
    # Least taken first; among equals, the mode's order (position, or drawn per worker).
    among_equals = _drawn_position(locked) if mode.order_per_worker else "position"
    return (
        _with_capacity(mode.eligible_items(locked) if items is None else items)
        .exclude(pk__in=had_this_round.values("item_id"))
        .order_by("taken", among_equals, "id")
    )


def _claim(
    participant: Participant,
    locked: Participant,
    mode: Mode,
    candidates: QuerySet[Item],
    round_number: int,
    released: dict[int, Assignment],
    waiting: ServiceError | None,
    now: datetime,
) -> Assignment | None:
    """Claim the first candidate by the conditional UPDATE and lease it (``assignment_sql``).

    Its own step: the fallbacks when nothing could be claimed. Then settles a crowd worker
    (``participant`` then carries the state that left) and returns None, or raises
    ``waiting``.
    """
    seconds = lease_seconds(participant=locked, mode=mode)
    new = _new_lease(locked, round_number, now, seconds, released=released)
    claimed = _claim_first(candidates, new)
    # Capacity may be held by lapsed leases nobody has released yet (no beat, or not yet):
    # give them back now and look once more.
    if claimed is None and _release_lapsed_in_study(locked.study_id, now):
        claimed = _claim_first(candidates, new)
    if claimed is None:
        if waiting is not None:
            raise waiting
        # Nothing left for them: a crowd worker who did everything offered is paid
        # for it, never told to return (issue 46, row 2; the mode decides).
        participant_settle_exhausted(participant=locked, now=now, mode=mode)
        for name in ("state", "flags", "completed_at"):
            setattr(participant, name, getattr(locked, name))
        return None
    return _leased(locked, claimed, new, round_number, now, seconds, released=released)


def _new_lease(
    locked: Participant,
    round_number: int,
    now: datetime,
    seconds: int,
    *,
    released: dict[int, Assignment],
) -> dict:
    """The columns of the lease a claim inserts (``assignment_sql.claim``'s ``lease``)."""
    return {
        "participant_id": locked.pk,
        "round": round_number,
        "token": new_token(),
        "served_at": now,
        "expires_at": now + timedelta(seconds=seconds),
        "released": list(released),
    }


def _leased(
    locked: Participant,
    claimed: tuple[Item, int | None],
    new: dict,
    round_number: int,
    now: datetime,
    seconds: int,
    *,
    released: dict[int, Assignment],
) -> Assignment:
    """The lease of a claimed item: the one the claim inserted (PostgreSQL), else inserted
    or reopened now (SQLite, or an item that comes back to them this round)."""
    item, lease_id = claimed
    if lease_id is None:
        return _lease(locked, item, round_number, now, seconds, released.get(item.pk))
    lease = Assignment(
        id=lease_id,
        participant=locked,
        item=item,
        round=round_number,
        token=new["token"],
        status=Assignment.Status.OPEN,
        served_at=now,
        expires_at=new["expires_at"],
        submitted_at=None,
        released_by="",
    )
    lease._state.adding, lease._state.db = False, connection.alias
    # A new lease has no judgment: the page's part needs no query.
    return assignment_sql.with_answers(lease, [])


def _claim_first(candidates: QuerySet[Item], new: dict) -> tuple[Item, int | None] | None:
    """Claim a slot of the first candidate nobody else holds; if every candidate is held by
    a concurrent claim (PostgreSQL), wait for one rather than tell the participant that
    nothing is left while capacity may remain after the others commit.

    PostgreSQL keeps the lock on a row that a locking read took and then dropped because,
    re-checked after a concurrent commit, it no longer qualified (an item that filled up, or
    that a design left out), until the transaction ends. A claim that went on waiting with
    such locks could wait on another that waits on it (two claims walking the items in
    their own serving orders did, under a design). So a try that claims nothing gives its
    locks back (the savepoint), and the waiting try walks the items in one order for every
    claim, by id: claims that wait never wait on each other in a circle.
    """
    if connection.vendor != "postgresql":
        return assignment_sql.claim(candidates, wait=False, lease=new)
    savepoint = transaction.savepoint()
    claimed = assignment_sql.claim(candidates, wait=False, lease=new)
    if claimed is None:
        transaction.savepoint_rollback(savepoint)
        claimed = assignment_sql.claim(candidates.order_by("pk"), wait=True, lease=new)
        if claimed is None:
            transaction.savepoint_rollback(savepoint)
    return claimed


def lease_seconds(*, participant: Participant, mode: Mode | None = None) -> int:
    """How long a lease of this participant lasts.

    Registered annotators get ``CAPEVAL_LEASE_SECONDS``; crowd workers the study's
    ``crowd_lease_seconds``, else the mode's own default (its unit of work). ``participant``
    should carry its study; ``mode`` is its mode if the caller has it.
    """
    if participant.source == Participant.Source.ACCOUNT:
        return settings.CAPEVAL_LEASE_SECONDS
    if mode is None:
        mode = get_mode(participant.study.mode)
    return mode.settings(participant.study).crowd_lease_seconds or mode.crowd_lease_seconds


def _lease(
    participant: Participant,
    item: Item,
    round_number: int,
    now: datetime,
    seconds: int,
    released: Assignment | None,
) -> Assignment:
    """Create the lease, or reopen the participant's ``released`` one for the same item and round.

    Reopening keeps any parts they already answered (a HUMANr group resumes where it
    stopped) and restarts the clock, since the item is shown again now.
    """
    expires_at = now + timedelta(seconds=seconds)
    if released is None:
        created = Assignment.objects.create(
            participant=participant,
            item=item,
            round=round_number,
            served_at=now,
            expires_at=expires_at,
        )
        return assignment_sql.with_answers(created, [])  # as ``_leased``'s
    lapsed = (
        participant.source != Participant.Source.ACCOUNT
        and released.submitted_at is None
        and not released.released_by
        and released.expires_at <= now
    )
    if lapsed:
        # Reopening overwrites the expiry the lapse rule counts: keep the lapse as a flag.
        participant.flags = [
            *(participant.flags or []),
            {"kind": LAPSE_FLAG, "at": released.expires_at.isoformat(), "detail": ""},
        ]
        participant.save(update_fields=["flags"])
    released.participant, released.item = participant, item
    released.status = Assignment.Status.OPEN
    released.served_at = now
    released.expires_at = expires_at
    released.save(update_fields=["status", "served_at", "expires_at"])
    return released


def assignment_release(*, study: Study, assignment_id: int, released_by: str) -> bool:
    """A researcher gives back one open lease of their study; False if it was not open.

    The lease is kept, marked released with who did it, so a late answer to it is refused
    and the worker is served another item.
    """
    with transaction.atomic():
        lease = (
            Assignment.objects.select_for_update(of=("self",))
            .filter(pk=assignment_id, item__study_id=study.pk)
            .first()
        )
        if lease is None or not _release(lease.pk, lease.item_id):
            return False
        Assignment.objects.filter(pk=lease.pk).update(released_by=released_by[:150])
        return True


def assignment_release_expired(*, now: datetime | None = None) -> int:
    """Release open leases past their expiry so their items can be served again.

    Run every minute by the Celery beat task ``annotation.tasks.release_expired_leases``.
    Returns how many leases were released.
    """
    now = now or timezone.now()
    expired = list(
        Assignment.objects.filter(status=Assignment.Status.OPEN, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("id", "item_id")[:RELEASE_BATCH]
    )
    released = 0
    for assignment_id, item_id in expired:
        # One short transaction per lease: a long batch would hold item rows that
        # participants are being served from.
        with transaction.atomic():
            released += _release(assignment_id, item_id)
    return released
