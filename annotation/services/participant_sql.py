"""The crowd pages' reads of a participant's own rows, written by hand (issue 48).

A crowd worker's GET next, POST answer and feedback page each begin by reading the
participant their session holds, with its study, for the study in the URL
(``views.participate._crowd_participant_of_live_study``). Through the ORM that one join cost
the web worker a fifth of a GET next's CPU in query building and compiling, for a lookup by
primary key. Here it is one fixed statement, its SQL built once from the models' ``_meta``,
and its rows made into instances with the ORM's own converters (``models.rows.instance``),
so the caller gets what ``Participant.objects.select_related("study")`` gave it. The
feedback page after every answer reads that answer (``latest_answer``) the same way.
"""

from __future__ import annotations

from uuid import UUID

from django.db import connection

from annotation.models import Assignment, Item, Judgment, Participant, Study
from annotation.models.rows import columns as _columns
from annotation.models.rows import cursor as _cursor
from annotation.models.rows import instance as _instance

P = Participant._meta.db_table
S = Study._meta.db_table
A = Assignment._meta.db_table
J = Judgment._meta.db_table
I = Item._meta.db_table  # noqa: E741 (the item table, as P, S, A and J name theirs)
JUDGMENT_FIELDS = tuple(f.attname for f in Judgment._meta.concrete_fields)
ITEM_FIELDS = tuple(f.attname for f in Item._meta.concrete_fields)
PARTICIPANT_FIELDS = tuple(f.attname for f in Participant._meta.concrete_fields)
STUDY_FIELDS = tuple(f.attname for f in Study._meta.concrete_fields)

#: The account-less participant among ``{ids}`` (the session's participant ids, one ``%s``
#: each) that belongs to the study of public id ``%s``, with its study's columns; the lowest
#: id if several do (``.first()``'s order). Params: the ids, then the public id as stored.
CROWD_PARTICIPANT = f"""
SELECT {_columns("p", Participant, PARTICIPANT_FIELDS)}, {_columns("s", Study, STUDY_FIELDS)}
FROM "{P}" p JOIN "{S}" s ON s."id" = p."study_id"
WHERE p."id" IN ({{ids}}) AND s."public_id" = %s AND p."user_id" IS NULL
ORDER BY p."id"
LIMIT 1
"""


def crowd_participant(ids: list[int], public_id: UUID | str) -> Participant | None:
    """The account-less participant of ``ids`` in study ``public_id``, its ``study`` loaded;
    None when there is none (or ``public_id`` is no UUID, as the URL may hold anything)."""
    if not ids:
        return None
    try:
        stored = Study._meta.get_field("public_id").get_db_prep_value(
            UUID(str(public_id)), connection
        )
    except ValueError:
        return None
    sql = CROWD_PARTICIPANT.format(ids=", ".join(["%s"] * len(ids)))
    with _cursor() as cursor:
        cursor.execute(sql, [*ids, stored])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(PARTICIPANT_FIELDS)
    participant = _instance(Participant, PARTICIPANT_FIELDS, row[:width])
    participant.study = _instance(Study, STUDY_FIELDS, row[width:])
    return participant


#: The participant's latest answer (highest part) on their lease of token ``%s``, with its
#: item. Params: the token, the participant id.
LATEST_ANSWER = f"""
SELECT {_columns("j", Judgment, JUDGMENT_FIELDS)}, {_columns("i", Item, ITEM_FIELDS)}
FROM "{J}" j
JOIN "{A}" a ON a."id" = j."assignment_id"
JOIN "{I}" i ON i."id" = j."item_id"
WHERE a."token" = %s AND a."participant_id" = %s
ORDER BY j."part" DESC
LIMIT 1
"""


def latest_answer(token: str, participant_id: int) -> Judgment | None:
    """The participant's latest stored answer on their lease ``token``, its ``item`` loaded;
    None when they have none there (someone else's lease, or none stored)."""
    with _cursor() as cursor:
        cursor.execute(LATEST_ANSWER, [token, participant_id])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(JUDGMENT_FIELDS)
    judgment = _instance(Judgment, JUDGMENT_FIELDS, row[:width])
    judgment.item = _instance(Item, ITEM_FIELDS, row[width:])
    return judgment
