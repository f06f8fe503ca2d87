"""The ORM implementation of ``assignment_next`` (and the rest of
``annotation/services/assignments.py``) as it was at commit 230e884, before issue 48
restated the hot path as hand-written SQL.

This is the reference the rewrite is checked against (tests/hotpath/test_differential.py):
the differential test runs the same histories through it and through
``annotation.services`` and requires the same observable results. It must not change: it
is a verbatim copy of the old module (only this paragraph and the import of the judgment
half, ``orm_reference_judgments``, differ), so any edit here would move the yardstick. It
runs against the current models; if a later model change breaks it, adapt only what the
models force and say so in the commit.

``judgment_submit`` is re-exported from ``orm_reference_judgments`` (the old
``annotation/services/judgments.py``), so ``orm_reference`` offers both old services.

The old module's docstring follows.

Leases: give a participant the next item, release expired leases.

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

import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Expression, F, FilteredRelation, Q, QuerySet
from django.db.models.functions import Cast
from django.utils import timezone

from annotation.errors import ServiceError, TooFast
from annotation.identities import linked_q
from annotation.models import Assignment, Item, Judgment, Participant, Study
from annotation.models.crowd import crowd_left
from annotation.modes import catch, get_mode
from annotation.modes.base import Mode, screen_out_reason
from tests.hotpath.orm_reference_judgments import (  # noqa: F401 (re-exported)
    Submitted,
    judgment_submit,
    participant_settle_exhausted,
)

# A claim can only fail if a candidate's capacity changed between reading and claiming it
# (not possible while its row is locked); a few retries cover databases without row locks.
CLAIM_ATTEMPTS = 3
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
    who = participant.external_id or f"account:{participant.user_id}"
    rng = random.Random(f"{participant.study.seed}:{participant.source}:{who}")
    a, b = rng.randrange(1, PRIME), rng.randrange(PRIME)
    # 64-bit arithmetic: position is a 32-bit column on PostgreSQL and a * position is not.
    return (Cast("position", BigIntegerField()) * a + b) % PRIME


def _lock_first(candidates: QuerySet[Item]) -> int | None:
    """Lock and return the first candidate's id, preferring rows nobody else holds.

    Only the id is selected: the database sorts every candidate, and narrow rows sort faster.
    """
    if not connection.features.has_select_for_update:
        return candidates.values_list("id", flat=True).first()
    if connection.features.has_select_for_update_skip_locked:
        free = (
            candidates.select_for_update(skip_locked=True, of=("self",))
            .values_list("id", flat=True)
            .first()
        )
        if free is not None:
            return free
    # Every candidate is held by a concurrent lease: wait for one rather than tell the
    # participant that nothing is left while capacity may remain after the others commit.
    return candidates.select_for_update(of=("self",)).values_list("id", flat=True).first()


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


def _open_leases_from_network(participant: Participant, now: datetime) -> int:
    """Open leases held by the participant's network (an IPv4 address or an IPv6 /64, or
    the shared bucket of unreadable addresses), so one /64 cannot hold a slot per address."""
    return Assignment.objects.filter(
        participant__study_id=participant.study_id,
        participant__network=participant.network,
        status=Assignment.Status.OPEN,
        expires_at__gt=now,
    ).count()


def lapse_wait_until(*, participant: Participant, now: datetime) -> datetime | None:
    """Until when the participant's linked identity gets no new lease for letting leases
    lapse, or None if it may have one now (the rule is in the module docstring).

    A lapse is a crowd lease that reached its expiry unanswered and was not given back by a
    researcher (``released_by``); it counts from its expiry, whether or not it has been
    released yet. A lapsed lease reopened for the same item (the least taken item is often
    the one just lapsed) leaves a ``lease_lapsed`` flag on its participant first, so
    re-claiming one item over and over counts every time.
    """
    window = timedelta(seconds=settings.CAPEVAL_LAPSE_WINDOW_SECONDS)
    since = now - window
    # One query for both records of a lapse (asked on every crowd claim): each linked crowd
    # participant's flags, LEFT JOINed to its lapsed leases in the window, so a participant
    # with flags and no lapsed lease still comes back (with None) and each lapsed lease is
    # one row, counted once, as the lapse limit counts them.
    lapsed_lease = FilteredRelation(
        "assignments",
        condition=Q(
            assignments__status__in=(Assignment.Status.OPEN, Assignment.Status.RELEASED),
            assignments__submitted_at__isnull=True,
            assignments__released_by="",
            assignments__expires_at__lte=now,
            assignments__expires_at__gt=since,
        ),
    )
    rows = (
        Participant.objects.filter(linked_q(participant))
        .exclude(source=Participant.Source.ACCOUNT)
        .annotate(lapsed_lease=lapsed_lease)
        .values_list("pk", "flags", "lapsed_lease__expires_at")
    )
    flags_of: dict[int, list] = {}
    expiries = []
    for pk, flags, expires_at in rows:
        flags_of[pk] = flags or []
        if expires_at is not None:
            expiries.append(expires_at)
    flagged = [
        datetime.fromisoformat(flag["at"])
        for flags in flags_of.values()
        for flag in flags
        if isinstance(flag, dict) and flag.get("kind") == LAPSE_FLAG
    ]
    expiries = sorted([at for at in flagged if since < at <= now] + expiries, reverse=True)
    if not expiries:
        return None
    until = expiries[0] + timedelta(seconds=settings.CAPEVAL_LAPSE_WAIT_SECONDS)
    if len(expiries) >= settings.CAPEVAL_LAPSE_LIMIT:
        until = max(until, expiries[0] + timedelta(seconds=settings.CAPEVAL_LAPSE_BAR_SECONDS))
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
    *, participant: Participant, now: datetime | None = None, mode: Mode | None = None
) -> Assignment | None:
    """Return the participant's open lease, or lease them the next item that needs judgments.

    A reload returns the same lease with its original ``served_at``. Otherwise the least
    taken item (judgments plus open leases) that they have not had in this round and that
    still has capacity. Returns None when nothing is left for them or the study is not live.
    The lease comes with its item and its participant (as locked, with the study) loaded.
    ``mode`` is the study's mode when the caller (the view) has looked it up already.
    """
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_worker(participant)
        if locked is None or not _may_be_served(locked):
            return None
        if mode is None:
            mode = get_mode(locked.study.mode)
        round_number = mode.current_round(locked)
        leases = _leases_that_matter(locked, round_number)
        for lease in leases:
            if lease.status == Assignment.Status.OPEN and lease.expires_at > now:
                lease.participant = locked
                # Its item is read only here: most requests find no open lease (they are
                # served a new item), and joining the item into the read above cost every
                # request the join's building (issue 27).
                lease.item = Item.objects.get(pk=lease.item_id)
                return lease
        released = _give_back_own_lapsed(leases, round_number)
        waiting, resumable = _lapse_wait(locked, released, now)
        _check_network_leases(locked, mode, now)
        candidates = _candidates(locked, mode, round_number)
        if waiting is not None:
            candidates = candidates.filter(pk__in=resumable)
        return _claim(participant, locked, mode, candidates, round_number, released, waiting, now)


def _lock_worker(participant: Participant) -> Participant | None:
    """Lock the participant's row (and its browser-mates'), with the study; None if gone.

    Its own step: this is the first lock of the order shared with ``judgment_submit``, and
    every later step reads the participant as locked here.
    """
    # Serialises one participant's concurrent requests (two tabs, a double click) and
    # reads their protocol state as the last committed submission left it.
    # Participants of one browser are one worker (HUMANr's exposure bars what any of them
    # met): lock them all, in id order, so two of them are never served from one state.
    # No deadlock: judgment_submit locks only its own participant row, and every claim
    # takes browser-mates in the same order.
    same_worker = Q(pk=participant.pk)
    if participant.browser_id:
        same_worker |= Q(study_id=participant.study_id, browser_id=participant.browser_id)
    rows = list(
        Participant.objects.select_for_update(of=("self",))
        .select_related("study")
        .filter(same_worker)
        .order_by("pk")
    )
    return next((row for row in rows if row.pk == participant.pk), None)


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
    return list(
        Assignment.objects.filter(participant=locked)
        .filter(
            Q(status=Assignment.Status.OPEN)
            | Q(status=Assignment.Status.RELEASED, round=round_number)
        )
        .order_by("served_at", "id")
    )


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
    locked: Participant, released: dict[int, Assignment], now: datetime
) -> tuple[ServiceError | None, list[int]]:
    """The refusal a crowd worker waiting out a lapse gets, and the items they may still
    resume meanwhile; raises it at once if there are none. Its own step: the lapse rule
    (module docstring) narrows the claim rather than ending it."""
    if locked.source == Participant.Source.ACCOUNT:
        return None, []
    wait_until = lapse_wait_until(participant=locked, now=now)
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


def _check_network_leases(locked: Participant, mode: Mode, now: datetime) -> None:
    """Refuse a crowd worker whose network holds the study's limit of open leases. Its own
    step: a limit on the network, not on this participant."""
    if locked.network and locked.source != Participant.Source.ACCOUNT:
        limit = mode.settings(locked.study).crowd_open_leases_per_address
        if _open_leases_from_network(locked, now) >= limit:
            raise TooFast(
                "Your network already holds as many open tasks in this study as it "
                "allows. Please finish or leave those first, then reload this page.",
            )


def _candidates(locked: Participant, mode: Mode, round_number: int) -> QuerySet[Item]:
    """The items the participant may be served, in serving order (not evaluated). Its own
    step: it builds the one query every claim attempt reads."""
    # A lease that lapsed unanswered does not count as "had": the item may come back to
    # them (otherwise a lapsed tutorial pair could never be finished).
    had_this_round = Assignment.objects.filter(participant=locked, round=round_number).exclude(
        status=Assignment.Status.RELEASED
    )
    # Least taken first; among equals, the mode's order (position, or drawn per worker).
    among_equals = _drawn_position(locked) if mode.order_per_worker else "position"
    return (
        _with_capacity(mode.eligible_items(locked))
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
    """Lock the first candidate and take a slot of it by the conditional UPDATE; lease it.

    Its own step: the retry loop that makes the capacity check safe without row locks.
    When nothing is left, settles a crowd worker (``participant`` then carries the state
    that left) and returns None, or raises ``waiting``.
    """
    tried: list[int] = []
    gave_back_lapsed = False
    for _ in range(CLAIM_ATTEMPTS + 1):
        # (No empty exclude on the first try: building it costs every claim a filter.)
        untried = candidates.exclude(pk__in=tried) if tried else candidates
        item_id = _lock_first(untried)
        if item_id is None and not gave_back_lapsed:
            # Capacity may be held by lapsed leases nobody has released yet (no beat, or
            # not yet): give them back now and look once more.
            gave_back_lapsed = True
            if _release_lapsed_in_study(locked.study_id, now):
                item_id = _lock_first(untried)
        if item_id is None:
            if waiting is not None:
                raise waiting
            # Nothing left for them: a crowd worker who did everything offered is paid
            # for it, never told to return (issue 46, row 2; the mode decides).
            participant_settle_exhausted(participant=locked, now=now, mode=mode)
            for name in ("state", "flags", "completed_at"):
                setattr(participant, name, getattr(locked, name))
            return None
        tried.append(item_id)
        claimed = _with_capacity(Item.objects.filter(pk=item_id)).update(
            open_lease_count=F("open_lease_count") + 1
        )
        if claimed:
            item = Item.objects.get(pk=item_id)
            seconds = lease_seconds(participant=locked, mode=mode)
            return _lease(locked, item, round_number, now, seconds, released.get(item_id))
    return None


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
        return Assignment.objects.create(
            participant=participant,
            item=item,
            round=round_number,
            served_at=now,
            expires_at=expires_at,
        )
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
