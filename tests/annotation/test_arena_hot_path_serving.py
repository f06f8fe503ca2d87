"""The arena's one read before a claim (``modes/arena/serving.py``, issue 48) answers what the
three ORM queries it replaced answered: a reserved gold battle, the worker's history, and
which system pairs still have a battle with room on an image the worker never saw; and on
PostgreSQL its per-pair probes read the pair index."""

import json
from importlib import import_module

import pytest
from django.db import connection
from django.db.models import Count, F, Max

from annotation.models import Assignment, Caption, Item, Participant
from annotation.modes import catch, get_mode
from annotation.modes.arena import serving
from annotation.services.assignments import assignment_next
from tests.annotation.test_arena_pair_index import _large_study
from tests.factories.arena import answer, arena_study, worker

pytestmark = pytest.mark.django_db

migration = import_module("annotation.modes.arena.migrations.0001_battle_pair_index")


def _reference(person, pairs):
    """What the ORM reads answered (the code before ``serving``)."""
    seen, counts = set(), {}
    for image_id, kind, system_a, system_b in Assignment.objects.filter(
        participant_id=person.pk
    ).values_list("item__image_id", "item__kind", "item__spec__system_a", "item__spec__system_b"):
        seen.add(image_id)
        if kind == "battle":
            counts[(system_a, system_b)] = counts.get((system_a, system_b), 0) + 1
    with_room = (
        Item.objects.filter(study_id=person.study_id, kind="battle")
        .exclude(image_id__in=seen)
        .alias(taken=F("judgment_count") + F("open_lease_count"))
        .filter(taken__lt=F("target"))
    )
    room = {
        pair
        for pair in pairs
        if with_room.filter(spec__system_a=pair[0], spec__system_b=pair[1]).exists()
    }
    return catch.pending(person).exists(), seen, counts, room


def test_the_one_read_answers_what_the_orm_reads_did(researcher):
    study = arena_study(researcher, images=6, catch_rate=0.5, cap_per_pair=100)
    mode = get_mode(study.mode)
    pairs = mode.study_pairs(study)
    # One pair full: its probe must say so.
    Item.objects.filter(study=study, spec__system_a="alpha", spec__system_b="beta").update(
        judgment_count=F("target")
    )
    # Named: the factory's numbered names would shift every later test's workers.
    person, other = worker(study, "view-1"), worker(study, "view-2")
    checked = 0

    def check(who):
        view = serving.worker_view(who, pairs)
        assert (view.reserved, view.seen, view.counts, view.room) == _reference(who, pairs)
        return view.reserved

    for _ in range(8):
        for who in (person, other):
            checked += check(who)
            lease = assignment_next(participant=who)
            if lease is not None:
                check(who)  # with the open lease in the history
                answer(who, lease, "a")
    assert checked, "no gold battle was reserved: the reserved rows went untested"
    assert ("alpha", "beta") not in serving.worker_view(person, pairs).room
    # The history alone (``pairs`` empty) asks no pair.
    assert serving.worker_view(person).room == set()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the index is PostgreSQL's")
def test_the_room_probes_read_the_pair_index(researcher):
    study = _large_study(researcher)
    person = worker(study, "index-probe")
    pairs = get_mode(study.mode).study_pairs(study)[:1]
    sql = serving._statement(connection.vendor, len(pairs))
    params = serving.worker_view_params(person, pairs)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert migration.NAME in plan, plan


def _gold_reference(person):
    """What the ORM reads of a gold battle's draw answered (the code before ``gold_view``)."""
    study = person.study
    shape = Caption.objects.filter(study_id=study.pk, purpose="study").aggregate(
        count=Count("id"), last=Max("id")
    )
    specs = sorted(
        json.dumps(spec or {}, sort_keys=True)
        for spec in Assignment.objects.filter(catch._same_person(person)).values_list(
            "item__spec", flat=True
        )
    )
    seen = set(
        Assignment.objects.filter(participant_id=person.pk).values_list("item__image_id", flat=True)
    )
    with_room = set(
        Item.objects.filter(study_id=study.pk, kind="battle")
        .alias(taken=F("judgment_count") + F("open_lease_count"))
        .filter(taken__lt=F("target"))
        .values_list("image_id", flat=True)
    )
    reserved = catch.pending(person).exists()
    return reserved, (shape["count"], shape["last"]), specs, seen, with_room


def test_the_gold_read_answers_what_the_orm_reads_did(researcher):
    """Two workers in one browser and one apart: the browser's leases count as seen for
    the gold battle's source, only the worker's own as the worker's images."""
    study = arena_study(researcher, images=6, catch_rate=0.5, cap_per_pair=100)
    first, second, alone = (worker(study, f"gold-{n}") for n in range(3))
    Participant.objects.filter(pk__in=[first.pk, second.pk]).update(browser_id="browser-1")
    first.refresh_from_db()
    second.refresh_from_db()
    reserved = 0
    for _ in range(5):
        for who in (first, second, alone):
            view = serving.gold_view(who)
            specs = sorted(json.dumps(spec, sort_keys=True) for spec in view.specs)
            got = (view.reserved, view.captions, specs, view.seen, view.with_room)
            assert got == _gold_reference(who)
            reserved += view.reserved
            lease = assignment_next(participant=who)
            if lease is not None:
                answer(who, lease, "a")
    assert reserved, "no gold battle was reserved: the reserved rows went untested"


def test_a_pairs_battles_are_one_statement_whatever_the_worker_saw(researcher):
    """The claim's condition on a pair's battles: the same items as the ORM's filter for any
    set of seen images, and on PostgreSQL the same text for every such set (one array
    param), so the prepared claim (``rows.cursor``) is planned once, not per image seen."""
    from annotation.services.assignment_sql import eligible_where

    study = arena_study(researcher, images=6)
    pair = get_mode("arena").study_pairs(study)[0]
    images = sorted(set(Item.objects.filter(study=study).values_list("image_id", flat=True)))
    texts, sizes = set(), set()
    for seen in (set(), {images[0]}, set(images[:3]), {*images[1:4], None}, set(images[2:4])):
        items = serving.pair_battles(study.pk, pair, seen)
        expected = Item.objects.filter(
            study=study, kind="battle", spec__system_a=pair[0], spec__system_b=pair[1]
        ).exclude(image_id__in=[image for image in seen if image is not None])
        assert set(items.values_list("pk", flat=True)) == set(expected.values_list("pk", flat=True))
        if seen - {None}:
            texts.add(eligible_where(items)[0])
            sizes.add(len(seen - {None}))
    # SQLite, which has no arrays: a text per number of images seen.
    assert len(sizes) == 3
    assert len(texts) == (1 if connection.vendor == "postgresql" else len(sizes))
