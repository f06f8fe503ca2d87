"""The arena's battle-pair index serves the query the claim runs (issue 48).

Serving a battle filters a study's battles on the drawn system pair, two keys of
``Item.spec``. Without an index PostgreSQL read every battle of the study for each serve
(21 ms on a 45,000-battle study, the arena's largest cost under a crowd). The arena's own
migration adds an expression index; it only helps while its expressions are the ones the ORM
writes for ``spec__system_a=...``, so this test plans the very query the claim compiles, on a
study of 6,000 battles with fresh statistics, and requires the index in the plan.
"""

from importlib import import_module

import pytest
from django.db import connection, transaction

from annotation.models import Item
from annotation.registry import get_mode
from annotation.services.assignments import _candidates
from tests.factories.arena import arena_study, worker

migration = import_module("annotation.modes.arena.migrations.0001_battle_pair_index")

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the index is PostgreSQL's (migration 0001)"
    ),
]


SYSTEMS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")


def _large_study(owner):
    """An arena study of 6,000 battles over 15 system pairs (copies of its battles: only
    the rows' number matters to the planner), its statistics fresh."""
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
    with connection.cursor() as cursor:
        cursor.execute('ANALYZE "annotation_item"')
    return study


def _plan(query) -> str:
    sql, params = query.query.get_compiler(connection=connection).as_sql()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_claim_of_a_system_battle_reads_the_pair_index(researcher):
    study = _large_study(researcher)
    person = worker(study)
    candidates = _candidates(person, get_mode(study.mode), 0)
    sql, _params = candidates.query.get_compiler(connection=connection).as_sql()
    # The query is a system battle's: one drawn pair, the keys the index holds.
    assert sql.count('"annotation_item"."spec" ->') == 2, sql
    plan = _plan(candidates.values_list("id")[:1])
    assert migration.NAME in plan, plan


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
