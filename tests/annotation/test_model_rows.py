"""Instances from hand-written statements equal the ORM's (``annotation.models.rows``).

The hot path reads some rows with fixed statements instead of querysets (issue 48). Each
case reads the same row both ways and requires every concrete column equal, the related
row included, on whichever database the suite runs: JSON, timestamps, UUIDs, addresses and
a NULL foreign key converted as the ORM converts them.
"""

import pytest
from django.db import connection

from annotation.models import Caption, Item, Judgment, Participant, Study, rows
from tests.factories.arena import arena_study, judge, worker

pytestmark = pytest.mark.django_db


def _columns(row) -> dict:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def _same(model, pk, related=None):
    query = model.objects.select_related(related) if related else model.objects
    expected, got = query.get(pk=pk), rows.by_pk(model, pk, related=related)
    assert _columns(got) == _columns(expected)
    assert not got._state.adding and got._state.db == expected._state.db
    if related:
        mine, theirs = getattr(got, related), getattr(expected, related)
        assert (mine is None) == (theirs is None)
        if theirs is not None:
            assert _columns(mine) == _columns(theirs)
    return got


def test_rows_by_primary_key_equal_the_orms(researcher):
    study = arena_study(researcher, images=2, catch_rate=0)
    person = worker(study, "w-rows")
    person.address, person.network = "192.0.2.7", "192.0.2.0/24"
    person.state = {"battles": 2, "text": "naïve ✓"}
    person.save()
    judge(person, "tie")
    caption = Caption.objects.filter(study=study).first()

    assert _same(Caption, caption.pk, "image").image.pk == caption.image_id
    assert _same(Participant, person.pk, "study").study.public_id == study.public_id
    assert _same(Study, study.pk).settings == Study.objects.get(pk=study.pk).settings
    judgment = Judgment.objects.get(participant=person)
    assert _same(Judgment, judgment.pk, "item").payload["outcome"] == "tie"
    # A NULL foreign key: the related row is None, as select_related gives it.
    loose = Item.objects.create(study=study, kind="note", image=None, spec={"k": [1, 2]})
    assert _same(Item, loose.pk, "image").image is None


def test_a_missing_row_raises_as_get_does(researcher):
    study = arena_study(researcher, images=1, catch_rate=0)
    with pytest.raises(Caption.DoesNotExist):
        rows.by_pk(Caption, 10**9, related="image")
    with pytest.raises(Study.DoesNotExist):
        rows.by_pk(Study, study.pk + 10**6)


def test_converted_values_are_the_orms(researcher):
    study = arena_study(researcher, images=2, catch_rate=0)
    judge(worker(study, "w-conv"), "a")
    judgment = Judgment.objects.get(study=study)
    names = ("payload", "result", "created_at")
    raw = Judgment.objects.filter(pk=judgment.pk).values_list(*names).query
    sql, params = raw.get_compiler(connection=connection).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        values = rows.converted(Judgment, names, cursor.fetchone())
    assert values == [getattr(judgment, name) for name in names]
