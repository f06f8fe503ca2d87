"""The statements of ``assignments.assignment_next``'s common path, written by hand (issue 48).

Serving an item took ten ORM queries, each costing the web worker more in SQL building than
the database its work. Here the common path is two statements: ``LOCK_WORKER`` (the lock,
the participant's leases, and for a crowd worker the lapse rule's and the network limit's
counts) and a claim (``CLAIM_POSTGRESQL``: choose, take the slot and insert the lease in one
statement; ``CLAIM_SQLITE`` chooses and takes the slot, the lease is then inserted). A
worker who holds a lease (a reload, the next part of a group) gets it back by ``LEASES``,
with its item and its judgments, so the page needs no read of its own for its part. Rare
paths (a lapse, a reopened lease, nothing left) keep the ORM code of ``assignments.py``.

Both vendors: PostgreSQL locks rows (``FOR UPDATE``, ``SKIP LOCKED``) and takes
data-modifying CTEs; SQLite (3.35+ for ``RETURNING``) has neither row locks nor writes in a
CTE, but its write transaction (``BEGIN IMMEDIATE``, settings) serializes every writer, so
what the locks guarantee on PostgreSQL holds there by construction. Lock order, as in
``assignments.py``: participant rows, then item rows.

Table and column names come from the models' ``_meta``; the candidates come from the mode
(``eligible_items``, a queryset) compiled by the ORM and embedded as a subquery.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection
from django.db.models import QuerySet

from annotation.models import Assignment, Item, Judgment, Participant
from annotation.models.rows import cache_name as _cache_name
from annotation.models.rows import columns as _columns
from annotation.models.rows import cursor as _cursor
from annotation.models.rows import instance as _instance

P = Participant._meta.db_table
A = Assignment._meta.db_table
I = Item._meta.db_table  # noqa: E741 (the item table, as P and A name theirs)
J = Judgment._meta.db_table

#: The participant columns a claim reads as locked (everything else the view read holds).
LOCKED_FIELDS = ("id", "state", "status", "flags", "completed_at")
#: Every concrete column of an item, in model order (a claimed row becomes an instance).
ITEM_FIELDS = tuple(f.attname for f in Item._meta.concrete_fields)
#: Every concrete column of a lease, in model order.
LEASE_FIELDS = tuple(f.attname for f in Assignment._meta.concrete_fields)
#: What a lease read here carries of each of its judgments (``with_answers``): enough for
#: the part to show next and when the previous one was answered; the rest is deferred.
ANSWER_FIELDS = ("id", "assignment_id", "part", "created_at")
#: Where Django's prefetching keeps a lease's judgments: ``lease.judgments`` (its ``count``,
#: ``all``) reads them there instead of querying.
ANSWERS_CACHE = _cache_name(Assignment, "judgments")


#: Lock the worker's participant rows: the participant and its browser-mates, in id order
#: (``assignments._lock_worker``'s rule), reading the participant's columns as locked (on
#: PostgreSQL a row changed by a transaction this one waited for is read as it committed).
#: Leases are not read here: on PostgreSQL a statement that waits for a lock reads other
#: rows as they were when it began, so a lease written by the request it waited for (two
#: tabs) would be missed; the claim checks them in its own, later statement instead. Only
#: a hint is read, whether the participant holds an open lease (a reload, or one to give
#: back): then the caller reads the leases at once. A stale hint costs a statement, never
#: a wrong answer: the claim's own check, and the full path, read after the lock.
#: ``{extra}`` is ``LAPSE_COLUMNS`` for a crowd worker, else empty; ``{lock}`` is
#: ``FOR UPDATE OF p`` on PostgreSQL, empty on SQLite (its write transaction, begun
#: IMMEDIATE, already excludes every other writer). Params: the ``{extra}`` params, then
#: participant id, study id, browser id or None.
LOCK_WORKER = f"""
SELECT {_columns("p", Participant, LOCKED_FIELDS)},
       EXISTS (SELECT 1 FROM "{A}" h WHERE h."participant_id" = p."id" AND h."status" = 'open')
       {{extra}}
FROM "{P}" p
WHERE p."id" = %s OR (p."study_id" = %s AND p."browser_id" = %s)
ORDER BY p."id"
{{lock}}
"""

#: The participants linked to the worker (``identities.linked_q``: itself, its browser, its
#: network) who are crowd workers, as a condition on alias ``lp``. Params: participant id,
#: study id, browser id or None, study id, network or None, account source.
_LINKED = """(lp."id" = %s OR (lp."study_id" = %s AND lp."browser_id" = %s)
      OR (lp."study_id" = %s AND lp."network" = %s)) AND lp."source" <> %s"""

#: The lapsed leases of the linked crowd participants (``assignments.lapse_wait_until``):
#: unanswered, not given back by a researcher, expired within the window. Params:
#: ``_LINKED``'s, then now and the window's start.
_LAPSED = f"""FROM "{A}" la JOIN "{P}" lp ON lp."id" = la."participant_id"
    WHERE {_LINKED} AND la."status" IN ('open', 'released') AND la."submitted_at" IS NULL
      AND la."released_by" = '' AND la."expires_at" <= %s AND la."expires_at" > %s"""

#: A crowd worker's extra columns of ``LOCK_WORKER``, scalar subqueries that replace the two
#: queries of the lapse rule and the network limit: how many lapsed leases the linked
#: identity has in the window and the latest one's expiry (the rule uses only these), the
#: flags of the other linked participants holding a ``lease_lapsed`` record (as JSON text;
#: the rule reads their times; the participant's own flags are the locked row's), and the
#: open unexpired leases of the worker's network in the study (an IPv4 address or an IPv6
#: /64: ``assignments._network_full``). ``{flags_text}`` and ``{flags_agg}`` are the
#: vendor's JSON-as-text and JSON-array aggregate. Params: ``_LAPSED``'s twice, ``_LINKED``'s,
#: participant id, then study id, network or None, now.
LAPSE_COLUMNS = f"""
       , (SELECT COUNT(*) {_LAPSED}) AS lapsed_count
       , (SELECT MAX(la."expires_at") {_LAPSED}) AS lapsed_latest
       , (SELECT {{flags_agg}} FROM "{P}" lp
          WHERE {_LINKED} AND lp."id" <> %s AND {{flags_text}} LIKE '%%lease_lapsed%%')
         AS lapse_flags
       , (SELECT COUNT(*) FROM "{A}" na JOIN "{P}" np ON np."id" = na."participant_id"
          WHERE np."study_id" = %s AND np."network" = %s AND na."status" = 'open'
            AND na."expires_at" > %s) AS network_leases
"""

#: Per vendor: the row lock of ``LOCK_WORKER``, and ``LAPSE_COLUMNS``'s JSON text and array.
VENDOR = {
    "postgresql": {
        "lock": "FOR UPDATE OF p",
        "flags_text": 'lp."flags"::text',
        "flags_agg": 'json_agg(lp."flags")::text',
    },
    "sqlite": {
        "lock": "",
        "flags_text": 'lp."flags"',
        "flags_agg": 'json_group_array(json(lp."flags"))',
    },
}

#: The participant's leases that matter to a serve (``assignments._leases_that_matter``):
#: the open ones and this round's released ones, oldest first, each with its item and its
#: judgments (a row per judgment, NULLs when it has none). Read after ``LOCK_WORKER``, in a
#: statement of its own (see there), so it sees every lease and answer committed before the
#: lock was granted; and nothing of theirs changes until this transaction ends (a
#: submission locks the participant first). The judgments come with the lease so that the
#: page knows which part to show without a query of its own (``with_answers``). Params:
#: participant id, round.
LEASES = f"""
SELECT {_columns("a", Assignment, LEASE_FIELDS)}, {_columns("i", Item, ITEM_FIELDS)},
       {_columns("j", Judgment, ANSWER_FIELDS)}
FROM "{A}" a
JOIN "{I}" i ON i."id" = a."item_id"
LEFT JOIN "{J}" j ON j."assignment_id" = a."id"
WHERE a."participant_id" = %s
  AND (a."status" = 'open' OR (a."status" = 'released' AND a."round" = %s))
ORDER BY a."served_at", a."id", j."id"
"""

#: PostgreSQL: choose, claim and lease in one statement. ``chosen`` is the first candidate
#: (the mode's eligible items with capacity, not had this round, in serving order), locked
#: ``FOR UPDATE SKIP LOCKED`` (or waited for, on the second try) so concurrent workers spread
#: over items; ``claimed`` takes one slot by the conditional UPDATE that only one
#: transaction can win for the last slot (re-checked on the locked row); ``leased`` inserts
#: the lease unless the item has a released lease of theirs this round (then the caller
#: reopens that one: one lease per participant, item and round). Returns the claimed item's
#: columns and the new lease's id (NULL when it is to be reopened), or no row when nothing
#: could be claimed. Params: the candidate query's, then participant id, round, token,
#: served_at, expires_at, the released items' ids (an array).
CLAIM_POSTGRESQL = f"""
WITH chosen AS ({{candidate}}),
claimed AS (
  UPDATE "{I}" SET "open_lease_count" = "open_lease_count" + 1
  WHERE "id" IN (SELECT "id" FROM chosen)
    AND "judgment_count" + "open_lease_count" < "target"
  RETURNING {", ".join(f'"{Item._meta.get_field(n).column}"' for n in ITEM_FIELDS)}
),
leased AS (
  INSERT INTO "{A}" ("participant_id", "item_id", "round", "token", "status", "served_at",
                      "expires_at", "submitted_at", "released_by")
  SELECT %s, claimed."id", %s, %s, 'open', %s, %s, NULL, '' FROM claimed
  WHERE NOT (claimed."id" = ANY(%s))
  RETURNING "id", "item_id"
)
SELECT {_columns("claimed", Item, ITEM_FIELDS)}, leased."id"
FROM claimed LEFT JOIN leased ON leased."item_id" = claimed."id"
"""

#: The fresh claim's candidate (``assignments._claim_fresh``): the mode's eligible items
#: (``{eligible}``, the WHERE of its queryset as the ORM compiles it, on the item table
#: alone) with capacity, not had by the participant this round (a lapsed lease does not
#: count), and only while they hold no lease that matters (open, or released this round,
#: which the full path reopens); least taken first, then ``{among_equals}`` (the position,
#: or the order drawn for the worker, ``DRAWN``), then id. Written out rather than built
#: by the ORM on every serve (issue 48): building and compiling this query was a quarter of
#: a GET next's CPU. Params: the eligible WHERE's, participant id and round twice, then
#: ``{among_equals}``'s. ``{lock}``: ``FOR UPDATE OF`` the item ``SKIP LOCKED`` on
#: PostgreSQL, empty on SQLite.
FRESH_CANDIDATE = f"""
SELECT "{I}"."id" FROM "{I}"
WHERE ({{eligible}})
  AND "{I}"."judgment_count" + "{I}"."open_lease_count" < "{I}"."target"
  AND NOT ("{I}"."id" IN (
    SELECT h."item_id" FROM "{A}" h
    WHERE h."participant_id" = %s AND h."round" = %s AND NOT (h."status" = 'released')))
  AND NOT EXISTS (
    SELECT 1 FROM "{A}" m
    WHERE m."participant_id" = %s AND (m."status" = 'open'
      OR (m."round" = %s AND m."status" = 'released')))
ORDER BY "{I}"."judgment_count" + "{I}"."open_lease_count", {{among_equals}}, "{I}"."id"
LIMIT 1 {{lock}}
"""

#: ``assignments._drawn_position`` as SQL: an affine map of the position modulo a prime,
#: in 64-bit arithmetic. Params: a, b, the prime.
DRAWN = f'((CAST("{I}"."position" AS BIGINT) * %s + %s) %% %s)'
POSITION = f'"{I}"."position"'
FRESH_LOCK = {"postgresql": f'FOR UPDATE OF "{I}" SKIP LOCKED', "sqlite": ""}

#: What ``eligible_where`` answers for a mode's filter that matches nothing.
NOTHING = ("", None)


def eligible_where(items: QuerySet[Item]) -> tuple[str, list | None] | None:
    """The WHERE of a mode's eligible items as SQL on the item table alone, with its params;
    ``NOTHING`` when the filter matches no row (``.none()``, an empty ``pk__in``); None when
    the query is more than one table's filter (a join, a slice, a distinct, an extra): the
    caller then lets the ORM build the whole candidate query."""
    query = items.query
    if (
        query.model is not Item
        # Aliases the FROM would hold: a filter on a foreign key leaves its join unused.
        or sum(1 for alias in query.alias_map if query.alias_refcount[alias]) > 1
        or query.is_sliced
        or query.distinct
        or query.combinator
        or query.extra
        or query.select_for_update
    ):
        return None
    compiler = query.get_compiler(connection=connection)
    try:
        sql, params = compiler.compile(query.where)
    except EmptyResultSet:
        return NOTHING
    except FullResultSet:
        return "1 = 1", []
    return sql, list(params)


def fresh_candidate(
    eligible: tuple[str, list], participant_id: int, round_number: int, drawn: tuple | None
) -> tuple[str, list]:
    """``FRESH_CANDIDATE`` with its params (``drawn``: (a, b, prime), or None for position
    order)."""
    sql, params = eligible
    among_equals = DRAWN if drawn else POSITION
    statement = FRESH_CANDIDATE.format(
        eligible=sql, among_equals=among_equals, lock=FRESH_LOCK[connection.vendor]
    )
    lease_params = [participant_id, round_number, participant_id, round_number]
    return statement, [*params, *lease_params, *(drawn or ())]


#: SQLite: choose and claim in one statement (the write transaction serializes claims, so
#: the chosen row cannot change before the UPDATE); the caller then inserts or reopens the
#: lease. Returns the claimed item's columns, or no row. Params: the candidate query's.
CLAIM_SQLITE = f"""
UPDATE "{I}" SET "open_lease_count" = "open_lease_count" + 1
WHERE "id" = ({{candidate}}) AND "judgment_count" + "open_lease_count" < "target"
RETURNING {", ".join(f'"{Item._meta.get_field(n).column}"' for n in ITEM_FIELDS)}
"""


@dataclass
class Worker:
    """What ``LOCK_WORKER`` read: the participant's locked columns (empty if it is gone), and
    for a crowd worker the lapse rule's and the network limit's inputs."""

    locked: dict[str, Any]
    holds_lease: bool = False
    lapsed_count: int = 0
    lapsed_latest: datetime | None = None
    lapse_flags: list[list] = field(default_factory=list)
    network_leases: int = 0


def _datetime(value) -> datetime | None:
    """A timestamp an aggregate returned (SQLite gives text), as the ORM would give it."""
    if value is None or isinstance(value, datetime):
        return value
    col = Assignment._meta.get_field("expires_at").get_col(A)
    for convert in connection.ops.get_db_converters(col):
        value = convert(value, col, connection)
    return value


def _db(value):
    """A parameter as the ORM would send it (SQLite keeps naive UTC text for datetimes)."""
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def lock_worker(participant: Participant, *, crowd: bool, now: datetime, since: datetime) -> Worker:
    """Run ``LOCK_WORKER`` (with ``LAPSE_COLUMNS`` for a crowd worker)."""
    vendor = VENDOR[connection.vendor]
    browser = participant.browser_id or None
    network = participant.network or None
    params: list[Any] = []
    extra = ""
    if crowd:
        linked = [
            participant.pk,
            participant.study_id,
            browser,
            participant.study_id,
            network,
            Participant.Source.ACCOUNT,
        ]
        lapsed = [*linked, _db(now), _db(since)]
        extra = LAPSE_COLUMNS.format(**vendor)
        params = [*lapsed, *lapsed, *linked, participant.pk]
        params += [participant.study_id, network, _db(now)]
    # The select list's params (above) come before the filter's.
    params += [participant.pk, participant.study_id, browser]
    sql = LOCK_WORKER.format(extra=extra, lock=vendor["lock"])
    with _cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    worker = Worker(locked={})
    width = len(LOCKED_FIELDS)
    for row in rows:
        if row[0] != participant.pk:
            continue  # a browser-mate: locked, nothing more
        locked = _instance(Participant, LOCKED_FIELDS, row[:width])
        worker.locked = {name: getattr(locked, name) for name in LOCKED_FIELDS}
        worker.holds_lease = bool(row[width])
        if crowd:
            count, latest, flags, network_leases = row[width + 1 :]
            worker.lapsed_count = count or 0
            worker.lapsed_latest = _datetime(latest)
            worker.lapse_flags = [locked.flags, *(json.loads(flags) if flags else [])]
            worker.network_leases = network_leases or 0
    return worker


def with_answers(lease: Assignment, answers: list[Judgment]) -> Assignment:
    """Give ``lease`` its judgments as read with it, as ``prefetch_related("judgments")``
    would: ``lease.judgments.count()`` and ``.all()`` then answer from them (a filter on
    them still queries). Only for judgments read under the participant's lock, which every
    submission takes first: the list is then the lease's whole, current set."""
    for answer in answers:
        answer.assignment = lease
    found = lease.judgments.all()
    found._result_cache, found._prefetch_done = answers, True
    cache = lease.__dict__.setdefault("_prefetched_objects_cache", {})
    cache[ANSWERS_CACHE] = found
    return lease


def leases_that_matter(participant_id: int, round_number: int) -> list[Assignment]:
    """Run ``LEASES``: the leases, oldest first, each with its item and its judgments."""
    with _cursor() as cursor:
        cursor.execute(LEASES, [participant_id, round_number])
        rows = cursor.fetchall()
    n_a, n_i = len(LEASE_FIELDS), len(ITEM_FIELDS)
    leases: list[Assignment] = []
    answers: dict[int, list[Judgment]] = {}
    for row in rows:
        if not leases or leases[-1].pk != row[0]:
            lease = _instance(Assignment, LEASE_FIELDS, row[:n_a])
            lease.item = _instance(Item, ITEM_FIELDS, row[n_a : n_a + n_i])
            leases.append(lease)
            answers[lease.pk] = []
        if row[n_a + n_i] is not None:  # the judgment's id: NULL when the lease has none
            answers[row[0]].append(_instance(Judgment, ANSWER_FIELDS, row[n_a + n_i :]))
    for lease in leases:
        with_answers(lease, answers[lease.pk])
    return leases


def claim(
    candidates: QuerySet[Item] | tuple[str, list],
    *,
    wait: bool,
    lease: dict[str, Any] | None,
) -> tuple[Item, int | None] | None:
    """Claim a slot of the first candidate; the item (as updated) and, on PostgreSQL, the new
    lease's id (None: the caller reopens or inserts it). None when nothing was claimed.

    ``candidates``: the candidate items as a queryset (compiled here), or as a written-out
    statement and its params (``fresh_candidate``, already locking as it should).
    ``wait``: on PostgreSQL, wait for a locked candidate instead of skipping it. ``lease``:
    the new lease's columns (participant id, round, token, served_at, expires_at, and the
    released items' ids to leave to the caller).
    """
    if isinstance(candidates, tuple):
        candidate, params = candidates  # a written-out candidate (``fresh_candidate``)
    else:
        first = candidates.values_list("id")
        if connection.vendor == "postgresql":
            first = first.select_for_update(skip_locked=not wait, of=("self",))
        first = first[:1]
        try:
            candidate, params = first.query.get_compiler(connection=connection).as_sql()
        except EmptyResultSet:
            # The mode's filter matches nothing (an empty ``pk__in``): no query to run.
            return None
    if connection.vendor == "postgresql":
        sql = CLAIM_POSTGRESQL.format(candidate=candidate)
        params = [
            *params,
            lease["participant_id"],
            lease["round"],
            lease["token"],
            _db(lease["served_at"]),
            _db(lease["expires_at"]),
            list(lease["released"]),
        ]
    else:
        sql = CLAIM_SQLITE.format(candidate=candidate)
        params = list(params)
    with _cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    item = _instance(Item, ITEM_FIELDS, row[: len(ITEM_FIELDS)])
    lease_id = row[len(ITEM_FIELDS)] if connection.vendor == "postgresql" else None
    return item, lease_id
