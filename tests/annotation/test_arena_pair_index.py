"""The arena's serving statements read the indexes they need (issues 47 and 48).

Serving a battle filters a study's battles on the drawn system pair, two keys of
``Item.spec``. Without an index PostgreSQL read every battle of the study for each serve
(21 ms on a 45,000-battle study, the arena's largest cost under a crowd), and SQLite 20-25
ms on a 36,400-battle one. The arena's own migrations add an expression index; it only helps
while its expressions are the ones serving writes, so these tests plan the very query the
claim runs, on a study of 6,000 battles, and require the index in the plan: on PostgreSQL
with fresh statistics, on SQLite without any (Django never runs ANALYZE there).

Drawing a gold battle asks which images still have a battle with room; that probe must go
through each image's battles (the item's image index), stopping at the first with room,
not through the study's.
"""

from importlib import import_module

import pytest
from django.db import connection, transaction

from annotation.models import Item
from annotation.modes.arena import serving
from annotation.registry import get_mode
from annotation.services.assignments import _candidates, assignment_next
from tests.factories.arena import arena_study, worker

migration = import_module("annotation.modes.arena.migrations.0001_battle_pair_index")
migration_sqlite = import_module("annotation.modes.arena.migrations.0002_battle_pair_index_sqlite")

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the index is PostgreSQL's (migration 0001)"
)
sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the index is SQLite's (migration 0002)"
)


SYSTEMS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")


def _large_study(owner, *, analyze=True):
    """An arena study of 6,000 battles over 15 system pairs (copies of its battles: only
    the rows' number matters to the planner), its statistics fresh if ``analyze``."""
    study = arena_study(owner, systems=SYSTEMS, images=4, catch_rate=0)
    battles = list(Item.objects.filter(study=study, kind="battle"))
    Item.objects.bulk_create(
        Item(
            study=study,
            kind=template.kind,
            image_id=template.image_id,
            position=len(battles) + n,
            spec=template.spec,
            target=template.target,
        )
        for n, template in enumerate(battles[n % len(battles)] for n in range(6_000))
    )
    if analyze:
        with connection.cursor() as cursor:
            cursor.execute('ANALYZE "annotation_item"')
    return study


def _plan(query) -> str:
    sql, params = query.query.get_compiler(connection=connection).as_sql()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


@postgresql_only
def test_the_claim_of_a_system_battle_reads_the_pair_index(researcher):
    study = _large_study(researcher)
    person = worker(study)
    candidates = _candidates(person, get_mode(study.mode), 0)
    sql, _params = candidates.query.get_compiler(connection=connection).as_sql()
    # The query is a system battle's: one drawn pair, the keys the index holds.
    assert sql.count('"annotation_item"."spec" ->') == 2, sql
    plan = _plan(candidates.values_list("id")[:1])
    assert migration.NAME in plan, plan


@postgresql_only
def test_without_the_index_the_same_query_reads_the_table(researcher):
    """The check above can fail: with the index dropped (in this test's transaction only),
    the same query is planned without it."""
    study = _large_study(researcher)
    person = worker(study)
    candidates = _candidates(person, get_mode(study.mode), 0).values_list("id")[:1]
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f'DROP INDEX "{migration.NAME}"')
        plan = _plan(candidates)
        transaction.set_rollback(True)
    assert migration.NAME not in plan, plan


def _claim_statement(person) -> tuple[str, list]:
    """The claim's UPDATE as ``assignment_next`` runs it for ``person`` (SQLite), and its
    params: the statement a serve really runs, not one compiled beside it."""
    seen: list[tuple[str, list]] = []

    def keep(execute, sql, params, many, context):
        if sql.lstrip().startswith('UPDATE "annotation_item"'):
            seen.append((sql, list(params)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        lease = assignment_next(participant=person)
    assert lease is not None and lease.item.kind == "battle"
    assert len(seen) == 1, seen
    return seen[0]


def _sqlite_plan(sql: str, params: list, note: str = "") -> str:
    """SQLite's plan of ``sql``; ``note`` makes the text new, so a plan the connection's
    statement cache kept from before a schema change is not the one read."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN /* {note} */ " + sql, params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@sqlite_only
def test_the_sqlite_claim_of_a_system_battle_reads_the_pair_index(researcher):
    """Without statistics SQLite planned this UPDATE through the serving-order index and read
    every battle of the study; the index and the planner hint make it read the pair's."""
    study = _large_study(researcher, analyze=False)
    sql, params = _claim_statement(worker(study))
    assert "JSON_EXTRACT" in sql, sql  # a system battle's claim: the pair's keys
    plan = _sqlite_plan(sql, params)
    assert f"USING INDEX {migration_sqlite.NAME}" in plan, plan
    assert "item_serving_order" not in plan, plan


@sqlite_only
def test_without_the_sqlite_index_the_claim_reads_every_battle(researcher):
    """The check above can fail: with the index dropped (in this test's transaction only),
    the same statement is planned through the serving order, every battle of the study."""
    study = _large_study(researcher, analyze=False)
    sql, params = _claim_statement(worker(study))
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f'DROP INDEX "{migration_sqlite.NAME}"')
        plan = _sqlite_plan(sql, params, "index dropped")
        transaction.set_rollback(True)
    assert migration_sqlite.NAME not in plan, plan
    assert "item_serving_order" in plan, plan


def _gold_statement(person) -> tuple[str, list]:
    """``GOLD_VIEW`` as ``serving.gold_view`` runs it for ``person``, and its params."""
    seen: list[tuple[str, list]] = []

    def keep(execute, sql, params, many, context):
        seen.append((sql, list(params)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        view = serving.gold_view(person)
    assert len(seen) == 1, seen
    assert view.with_room, "every image has battles with room: the probe has rows to find"
    return seen[0]


def _image_probe(plan: str) -> str:
    """The plan's line for the ``'w'`` rows' probe of an image's battles (alias ``r``)."""
    lines = [line for line in plan.splitlines() if line.startswith("SEARCH r ")]
    assert len(lines) == 1, plan
    return lines[0]


@sqlite_only
def test_the_sqlite_gold_view_probes_each_images_battles(researcher):
    """Without statistics SQLite would read the study's battles through the serving-order
    index for every image; the probe must search the image's own (its image index)."""
    study = _large_study(researcher, analyze=False)
    sql, params = _gold_statement(worker(study))
    probe = _image_probe(_sqlite_plan(sql, params))
    assert "(image_id=?)" in probe, probe
    assert "item_serving_order" not in probe, probe


@sqlite_only
def test_without_the_hint_the_gold_view_reads_the_studys_battles(researcher):
    """The check above can fail: the same statement without ``not_indexed``'s unary plus is
    planned through the serving order, every battle of the study for each image."""
    study = _large_study(researcher, analyze=False)
    sql, params = _gold_statement(worker(study))
    assert sql.count('+r."') == 2, sql
    probe = _image_probe(_sqlite_plan(sql.replace('+r."', 'r."'), params, "no hint"))
    assert "item_serving_order" in probe, probe
