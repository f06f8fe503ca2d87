"""The statements of ``judgments.judgment_submit``'s common path, written by hand (issue 48).

Storing an answer took three locking reads (participant, lease, item) and four writes, each
an ORM query whose building cost the web worker more than the database its work. Here the
locks and reads are one statement (``LOCK_SUBMISSION``), a lease of several parts adds one
read of its judgments (``ANSWERS``), and on PostgreSQL the writes are another
(``STORE_POSTGRESQL``: the judgment's INSERT, the INSERT of the items an outcome makes (a
THumB image's fluency round and check, a catch trial), the lease, item and participant
UPDATEs, and a lease's exclusion, as one statement of data-modifying CTEs). SQLite has no
writes in a CTE: there the writes stay the ORM's, one statement each, as do the rare writes
on either vendor (a participant's exclusion, a new target, flags the outcome adds).

Lock order, as everywhere: participant, assignment, item (PostgreSQL locks the rows of
``FOR UPDATE OF p, a, i`` in that order, the order of the FROM list). On SQLite the write
transaction (``BEGIN IMMEDIATE``, settings) excludes every other writer instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models.sql import InsertQuery

from annotation.models import Assignment, Item, Judgment, Participant
from annotation.models.rows import cursor as _cursor
from annotation.services.assignment_sql import (
    ITEM_FIELDS,
    _columns,
    _db,
    _instance,
    with_answers,
)

P = Participant._meta.db_table
A = Assignment._meta.db_table
I = Item._meta.db_table  # noqa: E741 (the item table, as P and A name theirs)
J = Judgment._meta.db_table

#: The participant columns a submission reads as locked (the view's read holds the rest).
LOCKED_FIELDS = ("id", "state", "status", "flags", "completed_at")
#: Every concrete column of a lease, in model order.
LEASE_FIELDS = tuple(f.attname for f in Assignment._meta.concrete_fields)

#: Lock the participant, their lease named by the token and its item, in that order, and read
#: all three: the participant's protocol state as the last committed submission left it, the
#: lease's status (a repeat, a late answer), the item's counters (a late answer's room) and
#: spec (the mode scores from it). One row, or none when the token is not a lease of theirs
#: (then nothing is locked and the caller refuses it). On PostgreSQL a row changed by a
#: transaction this one waited for is read as that transaction committed it (every row read
#: here is locked). ``{lock}``: ``FOR UPDATE OF p, a, i`` on PostgreSQL, empty on SQLite.
#: Params: participant id, token.
LOCK_SUBMISSION = f"""
SELECT {_columns("p", Participant, LOCKED_FIELDS)},
       {_columns("a", Assignment, LEASE_FIELDS)},
       {_columns("i", Item, ITEM_FIELDS)}
FROM "{P}" p
JOIN "{A}" a ON a."participant_id" = p."id"
JOIN "{I}" i ON i."id" = a."item_id"
WHERE p."id" = %s AND a."token" = %s
{{lock}}
"""
LOCKS = {"postgresql": "FOR UPDATE OF p, a, i", "sqlite": ""}

#: What a submission reads of each of its lease's earlier judgments: which parts are
#: answered (a repeat, the next part), when (the part's minimum time counts from the
#: previous answer, ``Assignment.part_shown_at``), and the result (a mode's ``after_submit``
#: reads the earlier results of the lease, through ``lease.judgments``).
ANSWER_FIELDS = ("id", "assignment_id", "part", "result", "created_at")

#: The lease's judgments, in id order: one read for the answered parts, the time the
#: previous part was answered and the mode's earlier results. After ``LOCK_SUBMISSION``, in
#: a statement of its own: on PostgreSQL a statement that waited for a lock reads the rows it
#: does not lock as they were when it began, and a concurrent submission of the same lease
#: (a double click, two tabs) commits its judgment while this one waits for the participant.
#: Params: lease id.
ANSWERS = f"""
SELECT {_columns("j", Judgment, ANSWER_FIELDS)}
FROM "{J}" j
WHERE j."assignment_id" = %s
ORDER BY j."id"
"""

#: PostgreSQL: the submission's writes in one statement. ``judged`` inserts the judgment
#: (the ORM's own INSERT, compiled, so every column is adapted as ``save`` would) and returns
#: its id; ``made`` inserts the items the outcome makes (the ORM's own INSERT of
#: ``bulk_create``, compiled likewise; ``NO_ITEMS``, which inserts nothing, when it makes
#: none) and returns their ids; on the lease's last part ``closed`` marks the lease
#: submitted and ``counted`` moves the item's slot from open lease to judgment (a retaken
#: lease, given back when it lapsed, held no open slot: ``%s`` is 0 then); ``moved`` writes
#: the participant's protocol state, status, flags and completion when the outcome changed
#: any (all four, as locked or as changed: the row is locked, so nothing else changed them);
#: ``flagged`` excludes the lease's earlier judgments with the reason of an outcome's
#: exclusion (a HUMANr group whose check failed; the new judgment is inserted excluded, and
#: a CTE's UPDATE does not see the INSERT beside it). A CTE that is not read still runs; the
#: ``AND %s`` flags skip a write that does not apply. One row: the judgment's id and the new
#: items' ids in ascending order, which is the order they were inserted in (one statement
#: draws them from the sequence row by row, as ``bulk_create`` relies on), or NULL for none.
#: ``{insert}``, ``{items}``: the compiled INSERTs. Params: the judgment INSERT's, then the
#: items INSERT's (none for ``NO_ITEMS``), then submitted_at, lease id, last part; open
#: slots to return, item id, last part; state, status, flags, completed_at, participant id,
#: changed; exclusion reason, lease id, excluded.
STORE_POSTGRESQL = f"""
WITH judged AS ({{insert}}),
made AS ({{items}}),
closed AS (
  UPDATE "{A}" SET "status" = 'submitted', "submitted_at" = %s WHERE "id" = %s AND %s
),
counted AS (
  UPDATE "{I}" SET "judgment_count" = "judgment_count" + 1,
                   "open_lease_count" = "open_lease_count" - %s
  WHERE "id" = %s AND %s
),
moved AS (
  UPDATE "{P}" SET "state" = %s, "status" = %s, "flags" = %s, "completed_at" = %s
  WHERE "id" = %s AND %s
),
flagged AS (
  UPDATE "{J}" SET "excluded" = TRUE, "exclusion_reason" = %s
  WHERE "assignment_id" = %s AND %s
)
SELECT j."id", (SELECT array_agg(m."id" ORDER BY m."id") FROM made m) FROM judged j
"""
#: ``STORE_POSTGRESQL``'s ``made`` when the outcome makes no item: no row, an id column of
#: the item table's type (``array_agg`` needs one). No params.
NO_ITEMS = f'SELECT "id" FROM "{I}" WHERE FALSE'


def lock_submission(participant_id: int, token: str) -> tuple[dict[str, Any], Assignment] | None:
    """Run ``LOCK_SUBMISSION``: the participant's locked columns and the lease with its item,
    or None when the token names no lease of theirs."""
    sql = LOCK_SUBMISSION.format(lock=LOCKS[connection.vendor])
    with _cursor() as cursor:
        cursor.execute(sql, [participant_id, token])
        row = cursor.fetchone()
    if row is None:
        return None
    n_p, n_a = len(LOCKED_FIELDS), len(LEASE_FIELDS)
    locked = _instance(Participant, LOCKED_FIELDS, row[:n_p])
    lease = _instance(Assignment, LEASE_FIELDS, row[n_p : n_p + n_a])
    lease.item = _instance(Item, ITEM_FIELDS, row[n_p + n_a :])
    return {name: getattr(locked, name) for name in LOCKED_FIELDS}, lease


def answers(lease: Assignment) -> list[Judgment]:
    """Run ``ANSWERS``: the lease's judgments (other columns deferred), also left on
    ``lease`` as its ``judgments`` (``assignment_sql.with_answers``)."""
    with _cursor() as cursor:
        cursor.execute(ANSWERS, [lease.pk])
        found = [_instance(Judgment, ANSWER_FIELDS, row) for row in cursor.fetchall()]
    with_answers(lease, found)
    return found


def _json(model, name: str, value):
    # As ``save`` sends it (None is SQL NULL).
    return model._meta.get_field(name).get_db_prep_save(value, connection)


def _insert(model, objs: list) -> tuple[str, list[Any]]:
    """The ORM's INSERT of ``objs`` (unsaved), returning their ids, compiled as ``save``
    (one row) or ``bulk_create`` (several: one statement on PostgreSQL) would send it: every
    concrete column but the id, each value through its field's ``pre_save`` and adaptation."""
    query = InsertQuery(model)
    auto = model._meta.auto_field
    fields = [f for f in model._meta.local_concrete_fields if f is not auto and not f.generated]
    query.insert_values(fields, objs)
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [model._meta.pk]
    ((sql, params),) = compiler.as_sql()
    return sql, list(params)


def store(
    judgment: Judgment,
    *,
    last_part: bool,
    retake: bool,
    now: datetime,
    participant: Participant,
    changed: bool,
    new_items: tuple[Item, ...] = (),
) -> None:
    """Run ``STORE_POSTGRESQL`` for ``judgment`` and ``new_items`` (unsaved; saved after,
    with their ids, as ``save`` and ``bulk_create`` leave them); an excluded judgment
    excludes the lease's earlier ones with its reason."""
    insert, insert_params = _insert(Judgment, [judgment])
    items, items_params = _insert(Item, list(new_items)) if new_items else (NO_ITEMS, [])
    params = [
        *insert_params,
        *items_params,
        _db(now),
        judgment.assignment_id,
        last_part,
        0 if retake else 1,
        judgment.item_id,
        last_part,
        _json(Participant, "state", participant.state),
        participant.status,
        _json(Participant, "flags", participant.flags),
        _db(participant.completed_at),
        participant.pk,
        changed,
        judgment.exclusion_reason,
        judgment.assignment_id,
        judgment.excluded,
    ]
    with _cursor() as cursor:
        cursor.execute(STORE_POSTGRESQL.format(insert=insert, items=items), params)
        judgment.pk, made = cursor.fetchone()
    for item, pk in zip(new_items, made or (), strict=True):
        item.pk = pk
    for saved in (judgment, *new_items):
        saved._state.adding, saved._state.db = False, connection.alias
