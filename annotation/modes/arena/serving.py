"""What the arena reads to choose a worker's next battle, in one statement (issue 48).

``ArenaProtocol.eligible_items`` needs, before the claim: whether a gold battle is reserved
for the worker, the worker's history (the images they were shown, their leases per system
pair: the cap, and the count that seeds the pair's draw), and which system pairs still have
a battle for them. Three ORM queries read these on every serve, each costing the web worker
more in SQL building than the database its work; ``WORKER_VIEW`` reads all three at once,
and with them the admin log's stamp that lets the battle page show the rows the process
keeps instead of reading its captions (``shown.py``).

Which pairs have room is asked of every pair of the study, one probe each that stops at its
first battle with room on an image the worker never saw (through the pair index,
``migrations/0001_battle_pair_index`` and ``0002`` for SQLite), rather than of the drawn
pair only: the draw needs the history, which this same statement reads. A probe of a pair
with room reads a row or a few; only a pair without room reads its battles through, which is
what listing the pairs with room (a DISTINCT over every battle of the study, the fallback
before) did for every pair at once.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from annotation.models import Assignment, Caption, Image, Item, Job, Participant
from annotation.models.rows import converted
from annotation.models.rows import cursor as _cursor
from annotation.modes.arena import shown

A = Assignment._meta.db_table
I = Item._meta.db_table  # noqa: E741 (the item table, as assignment_sql names it)
C = Caption._meta.db_table
P = Participant._meta.db_table
IMG = Image._meta.db_table
J = Job._meta.db_table

#: Per vendor: a battle's system as text, the test that a battle is of one system (the
#: expression of the pair index, ``migrations/0001`` and ``0002``, so the probe and the claim
#: can use it; on PostgreSQL the param is the name as JSON), and the test that a gold battle is
#: reserved for a participant (``catch.pending``'s ``spec__catch__participant_id``; the param
#: is the participant id).
VENDOR = {
    "postgresql": {
        "system": "{alias}.\"spec\" ->> '{key}'",
        "system_is": "({alias}.\"spec\" -> '{key}') = %s::jsonb",
        "reserved_for": "(g.\"spec\" #> '{catch,participant_id}') = %s::jsonb",
        "not_indexed": "",
    },
    "sqlite": {
        "system": "JSON_EXTRACT({alias}.\"spec\", '$.{key}')",
        # likelihood() tells the planner the test is selective: Django never runs ANALYZE,
        # and without statistics SQLite planned the claim's UPDATE through the serving-order
        # index, reading every battle of the study (migrations/0002; 80x slower).
        "system_is": "likelihood(JSON_EXTRACT({alias}.\"spec\", '$.{key}') = %s, 0.01)",
        "reserved_for": "JSON_EXTRACT(g.\"spec\", '$.catch.participant_id') = %s",
        # A unary + keeps SQLite from using a column's index: the image probe of
        # ``GOLD_VIEW`` must go through the image's battles, not the study's (item_serving_order
        # matches two equalities to the image index's one; without statistics SQLite took it).
        "not_indexed": "+",
    },
}

#: The gold battles reserved for the worker and not answered yet (``catch.pending``): a
#: ``'g'`` row each. Params: study id, participant id (as ``reserved_for`` takes it).
RESERVED = f"""SELECT 'g', g."id", NULL, NULL, NULL FROM "{I}" g
WHERE g."study_id" = %s AND g."kind" = 'catch' AND g."judgment_count" = 0
  AND {{reserved_for}}"""

#: Every lease the worker ever had (released ones too: a lapsed lease still showed its
#: battle), an ``'h'`` row each: its image, its kind and, for a battle, its systems.
#: Params: participant id.
HISTORY = f"""SELECT 'h', hi."image_id", hi."kind", {{system_a}}, {{system_b}}
FROM "{A}" h JOIN "{I}" hi ON hi."id" = h."item_id"
WHERE h."participant_id" = %s"""

#: Which of the study's system pairs (``{pairs}``: a VALUES row each, its number and its two
#: systems as ``system_is`` takes them) has a battle with room on an image the worker was
#: never shown: an ``'r'`` row each. One probe over the list, not a probe per pair: a
#: statement of as many UNION parts as pairs took the database as long to plan as to run.
#: ``{probe}``: ``ROOM_PROBE`` as the vendor runs it per row (PostgreSQL: a LATERAL subquery
#: with LIMIT 1, so each row is an index probe that stops at its first battle; as a plain
#: EXISTS the planner hashed every battle of the study, 100 times slower). Params: the
#: VALUES rows', study id.
ROOM = """SELECT 'r', pr."column1", NULL, NULL, NULL FROM (VALUES {pairs}) pr {probe}"""
#: A battle of the row's pair with room on an image the worker was never shown (``SEEN``).
ROOM_PROBE = f"""SELECT 1 FROM "{I}" b
  WHERE b."study_id" = %s AND b."kind" = 'battle' AND {{a_is}} AND {{b_is}}
    AND b."judgment_count" + b."open_lease_count" < b."target"
    AND NOT EXISTS (SELECT 1 FROM seen WHERE seen."image_id" = b."image_id")"""
#: The images the worker was ever shown, read once for every probe (inlined, each probe
#: joined the worker's whole history again: most of the probes' time). ``{materialized}``:
#: PostgreSQL's keyword that keeps the CTE from being inlined. Params: participant id.
SEEN = f"""WITH seen AS {{materialized}}(
  SELECT si."image_id" FROM "{A}" s JOIN "{I}" si ON si."id" = s."item_id"
  WHERE s."participant_id" = %s)
"""
#: Per vendor: a VALUES row of ``ROOM`` (PostgreSQL types it; the systems as JSON, as the
#: pair index's expressions are), a system of the probed battle equal to the row's, and how
#: the probe joins the row (SQLite has no LATERAL; it runs a correlated EXISTS row by row).
ROOM_VENDOR = {
    "postgresql": {
        "row": "(%s::integer, %s::jsonb, %s::jsonb)",
        "is": '(b."spec" -> \'{key}\') = pr."{column}"',
        "probe": "CROSS JOIN LATERAL ({probe} LIMIT 1) room",
        "materialized": "MATERIALIZED ",
    },
    "sqlite": {
        "row": "(%s, %s, %s)",
        "is": 'JSON_EXTRACT(b."spec", \'$.{key}\') = pr."{column}"',
        "probe": "WHERE EXISTS ({probe})",
        "materialized": "",
    },
}


@dataclass
class WorkerView:
    """What ``WORKER_VIEW`` read of one worker."""

    #: A gold battle is reserved for them and not answered yet.
    reserved: bool = False
    #: The images they were ever shown.
    seen: set[int] = field(default_factory=set)
    #: Their leases per system pair (battles only).
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    #: The pairs (of those asked about) with a battle with room on an image they never saw.
    room: set[tuple[str, str]] = field(default_factory=set)
    #: The admin log's stamp (``shown.STAMP``): the battle page's kept rows are as fresh.
    stamp: tuple[int, int] | None = None
    #: The study's page rows as fresh as ``stamp`` (``shown.study_pages``), or None.
    pages: shown.StudyPages | None = None


@functools.cache
def _statement(vendor: str, pairs: int, pages: bool = False) -> str:
    """``RESERVED``, ``HISTORY``, ``pairs`` ``ROOM`` probes and the admin log's stamp
    (``shown.STAMP``, read here so the battle page needs no read of its own) as one
    statement; with ``pages``, and the study's page rows if the process's are older than
    that stamp (``shown.PAGES``: one text, so the server keeps its plan, ``rows.cursor``)."""
    words = VENDOR[vendor]
    parts = [
        RESERVED.format(reserved_for=words["reserved_for"]),
        HISTORY.format(
            system_a=words["system"].format(alias="hi", key="system_a"),
            system_b=words["system"].format(alias="hi", key="system_b"),
        ),
    ]
    if pairs:
        room = ROOM_VENDOR[vendor]
        probe = ROOM_PROBE.format(
            a_is=room["is"].format(key="system_a", column="column2"),
            b_is=room["is"].format(key="system_b", column="column3"),
        )
        parts.append(
            ROOM.format(
                pairs=", ".join([room["row"]] * pairs),
                probe=room["probe"].format(probe=probe),
            )
        )
    parts.append(shown.STAMP)
    if pages:
        parts.append(shown.pages_part(vendor))
    union = "\nUNION ALL\n".join(parts)
    return SEEN.format(materialized=ROOM_VENDOR[vendor]["materialized"]) + union if pairs else union


def worker_view_params(participant: Participant, pairs: list[tuple[str, str]]) -> list:
    """``_statement``'s params for ``participant`` and ``pairs``, in its parts' order."""
    vendor = connection.vendor
    as_param = json.dumps if vendor == "postgresql" else str
    reserved_as = json.dumps if vendor == "postgresql" else int
    params: list = [participant.pk] if pairs else []  # SEEN's
    params += [participant.study_id, reserved_as(participant.pk), participant.pk]
    for n, (system_a, system_b) in enumerate(pairs):
        params += [n, as_param(system_a), as_param(system_b)]
    if pairs:
        params.append(participant.study_id)
    return params


def worker_view(
    participant: Participant, pairs: list[tuple[str, str]] = (), *, pages: bool = False
) -> WorkerView:
    """Read the worker's reserved gold battle, history, which of ``pairs`` have room for
    them (``pairs`` empty: none asked), and the admin log's stamp, in one statement; with
    ``pages``, the study's page rows too, unless the process keeps them as fresh
    (``shown.PAGES``: the battle page then reads nothing, whatever image it shows)."""
    params = worker_view_params(participant, list(pairs))
    asked = shown.pages_params(participant.study) if pages else None
    if asked is not None:
        params += asked[0]
    with _cursor() as cursor:
        cursor.execute(_statement(connection.vendor, len(pairs), asked is not None), params)
        rows = cursor.fetchall()
    view = WorkerView()
    for what, number, kind, system_a, system_b in rows:
        if what == "g":
            view.reserved = True
        elif what == "h":
            view.seen.add(number)
            if kind == "battle":
                pair = (system_a, system_b)
                view.counts[pair] = view.counts.get(pair, 0) + 1
        elif what == "r":
            view.room.add(pairs[int(number)])
    view.stamp = shown.stamp(rows)
    if asked is not None:
        view.pages = shown.study_pages(participant.study, view.stamp, rows, *asked[1:])
    return view


#: Per vendor: the served pair's battles, as the WHERE of the item table (the claim embeds it,
#: ``services/assignment_sql.eligible_where``). The same conditions as the ORM's
#: ``filter(study_id=..., kind="battle", spec__system_a=..., spec__system_b=...)`` with the
#: seen images excluded, written out: building those JSON lookups through the ORM was the
#: largest part of choosing a battle's CPU. On PostgreSQL the expressions are the pair
#: index's. ``{unseen}``: the seen images' exclusion (``UNSEEN``), or nothing. Params: study
#: id, the two systems (as ``system_is`` takes them), then ``UNSEEN``'s.
PAIR_BATTLES = (
    f'"{I}"."study_id" = %s AND "{I}"."kind" = \'battle\' AND {{a_is}} AND {{b_is}}{{unseen}}'
)
#: Per vendor: the seen images' exclusion. On PostgreSQL one array param, so the claim's text
#: is the same whatever the worker saw and the server keeps its plan (``rows.cursor``; a list
#: of ``%s`` made a new statement per image seen, planned every time); SQLite has no arrays:
#: a param per image. ``{ids}``: that many ``%s``.
UNSEEN = {
    "postgresql": (
        f' AND NOT ("{I}"."image_id" = ANY(%s::bigint[]) AND "{I}"."image_id" IS NOT NULL)'
    ),
    "sqlite": f' AND NOT ("{I}"."image_id" IN ({{ids}}) AND "{I}"."image_id" IS NOT NULL)',
}


def pair_battles(study_id: int, pair: tuple[str, str], seen: set[int]) -> QuerySet[Item]:
    """The study's battles of ``pair`` on images not in ``seen``, as a queryset whose WHERE
    is ``PAIR_BATTLES`` (one raw condition: nothing for the ORM to build)."""
    vendor = connection.vendor
    words = VENDOR[vendor]
    as_param = json.dumps if vendor == "postgresql" else str
    unseen_ids = sorted(image for image in seen if image is not None)
    where = PAIR_BATTLES.format(
        a_is=words["system_is"].format(alias=f'"{I}"', key="system_a"),
        b_is=words["system_is"].format(alias=f'"{I}"', key="system_b"),
        unseen=UNSEEN[vendor].format(ids=", ".join(["%s"] * len(unseen_ids))) if unseen_ids else "",
    )
    params = [study_id, as_param(pair[0]), as_param(pair[1])]
    if unseen_ids:
        params += [unseen_ids] if vendor == "postgresql" else unseen_ids
    return Item.objects.filter(RawSQL(where, params, output_field=BooleanField()))


#: What drawing a gold battle reads (``gold.new_gold_item``), in one statement: a gold
#: battle reserved for the worker (``RESERVED``'s ``'g'`` rows: then none is made); a
#: ``'c'`` row, how many study captions there are and the largest id (``catch.study_captions``'
#: key of the captions this process keeps); an ``'s'`` row per lease of the worker or of
#: anyone in their browser (``catch.seen_captions``' leases), with its item's image, spec and
#: whether it was the worker's own; an ``'w'`` row per image with a battle with room; and,
#: appended by ``_gold_statement``, the admin log's stamp (``shown.STAMP``). Five
#: ORM queries before. Params: ``RESERVED``'s, study id, participant id twice, study id,
#: browser id (None: no browser), study id twice.
#:
#: The ``'w'`` rows probe each image for a battle with room, stopping at the first: while a
#: study has room on most images, a row or two per image, where a DISTINCT over every battle
#: of the study read them all (91,000 in issue 47's bench: 42 ms a gold battle on SQLite
#: against 5; as slow as before only once nearly every image is full).
GOLD_VIEW = f"""{{reserved}}
UNION ALL
SELECT 'c', COUNT(c."id"), MAX(c."id"), NULL, NULL FROM "{C}" c
WHERE c."study_id" = %s AND c."purpose" = 'study'
UNION ALL
SELECT 's', si."image_id", CASE WHEN s."participant_id" = %s THEN 1 ELSE 0 END, {{spec}}, NULL
FROM "{A}" s JOIN "{I}" si ON si."id" = s."item_id" JOIN "{P}" sp ON sp."id" = s."participant_id"
WHERE s."participant_id" = %s OR (sp."study_id" = %s AND sp."browser_id" = %s)
UNION ALL
SELECT 'w', w."id", NULL, NULL, NULL FROM "{IMG}" w
WHERE w."study_id" = %s AND EXISTS (
  SELECT 1 FROM "{I}" r
  WHERE r."image_id" = w."id" AND {{not_indexed}}r."study_id" = %s
    AND {{not_indexed}}r."kind" = 'battle'
    AND r."judgment_count" + r."open_lease_count" < r."target")
"""


@dataclass
class GoldView:
    """What ``GOLD_VIEW`` read of one worker."""

    reserved: bool = False
    #: ``catch.study_captions``' count and largest id of the study's captions.
    captions: tuple[int, int | None] = (0, None)
    #: The specs of the items the worker or their browser was ever shown.
    specs: list[dict] = field(default_factory=list)
    #: The images the worker (not their browser) was ever shown.
    seen: set[int] = field(default_factory=set)
    #: The images with a battle with room.
    with_room: set[int] = field(default_factory=set)
    #: The admin log's stamp (``shown.STAMP``): the study's texts kept are as fresh.
    stamp: tuple[int, int] | None = None


@functools.cache
def _gold_statement(vendor: str) -> str:
    reserved = RESERVED.format(reserved_for=VENDOR[vendor]["reserved_for"])
    # PostgreSQL: the spec as text, the type its other rows' NULLs take in the UNION.
    spec = 'si."spec"::text' if vendor == "postgresql" else 'si."spec"'
    # And the admin log's stamp: the texts the process keeps are as fresh (``shown``).
    gold = GOLD_VIEW.format(reserved=reserved, spec=spec, not_indexed=VENDOR[vendor]["not_indexed"])
    return gold + "UNION ALL\n" + shown.STAMP


def gold_view(participant: Participant) -> GoldView:
    """Run ``GOLD_VIEW`` for ``participant``."""
    vendor = connection.vendor
    reserved_as = json.dumps if vendor == "postgresql" else int
    study_id = participant.study_id
    params = [study_id, reserved_as(participant.pk), study_id, participant.pk, participant.pk]
    params += [study_id, participant.browser_id or None, study_id, study_id]
    with _cursor() as cursor:
        cursor.execute(_gold_statement(vendor), params)
        rows = cursor.fetchall()
    view = GoldView()
    for what, number, other, spec, _ in rows:
        if what == "g":
            view.reserved = True
        elif what == "c":
            view.captions = (int(number or 0), None if other is None else int(other))
        elif what == "s":
            view.specs.append(converted(Item, ("spec",), [spec])[0] or {})
            if int(other):
                view.seen.add(number)
        elif what == "w":
            view.with_room.add(number)
    view.stamp = shown.stamp(rows)
    return view


#: The study's latest finished report job: the adaptive design is kept per report, and
#: asked for on each serve and each answer. Params: study id, the report kind, done.
LATEST_REPORT = f"""SELECT MAX(j."id") FROM "{J}" j
WHERE j."study_id" = %s AND j."kind" = %s AND j."status" = %s"""


def latest_report_id(study_id: int) -> int | None:
    """Run ``LATEST_REPORT`` (None: no report finished yet). Written out: the ORM's query
    cost 1.5 ms a call in SQL building, against 0.1 ms for the statement itself (SQLite,
    issue 47's bench), twice per battle of an adaptive study."""
    with _cursor() as cursor:
        cursor.execute(LATEST_REPORT, [study_id, Job.Kind.REPORT.value, Job.Status.DONE.value])
        # An aggregate's one row: NULL when no report has finished.
        return cursor.fetchone()[0]
