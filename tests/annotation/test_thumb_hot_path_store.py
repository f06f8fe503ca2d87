"""THumB's stage-2 answer stored in one statement on PostgreSQL (issue 48): the items its
outcome makes (the image's fluency round and check, a catch trial) are inserted by a CTE of
``judgment_sql.STORE_POSTGRESQL`` beside the judgment and the counters, and the rows stored
are the ones the ORM's path (``judgments._store``, one write at a time) stores.

The request counts of every kind are pinned in ``test_thumb_hot_path.py``; here the rows,
and the review of an image whose last stage was judged before (its fluency round and check
read with the submission's other reads, ``stages.later_kinds``).
"""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, Item, Judgment, Participant, Study
from annotation.modes.catch import CATCH
from annotation.modes.thumb.protocol import ThumbProtocol
from annotation.modes.thumb.stages import CHECK, FLUENCY, STAGE1, STAGE2
from annotation.services import judgments
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from tests.annotation.test_thumb_hot_path import PINS, answer, crowd_worker, five_caption_study
from tests.factories.thumb import all_scores, judge, member
from tests.factories.thumb import make_annotator as make_annotator_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

ONE_STATEMENT = "WITH judged AS"


def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no writes in a CTE: every submission takes the ORM's path")


def stored(study: Study, lease: Assignment) -> dict:
    """Every row the submission may write, without the ids the sequences drew: the study's
    items in insertion order, the lease's judgments, the lease and the participant."""
    items = [
        model_to_dict(item, exclude=["id"])
        for item in Item.objects.filter(study=study).order_by("id")
    ]
    answers = [
        model_to_dict(j, exclude=["id"])
        for j in Judgment.objects.filter(assignment_id=lease.pk).order_by("id")
    ]
    participant = Participant.objects.get(pk=lease.participant_id)
    return {
        "items": items,
        "judgments": answers,
        "lease": model_to_dict(Assignment.objects.get(pk=lease.pk)),
        "participant": model_to_dict(
            participant, fields=["state", "status", "flags", "completed_at"]
        ),
    }


def submit_both_ways(monkeypatch, study, lease, data, now):
    """The same submission through ``STORE_POSTGRESQL`` and through the ORM's path (``_plain``
    switched off), each rolled back after its rows were read: (rows, statements, outcome) per
    path, ``outcome`` the mode's, its new items as the service left them."""
    results = {}
    for path in ("one statement", "orm"):
        outcomes = []
        after_submit = ThumbProtocol.after_submit

        def keep(self, participant, judgment, after_submit=after_submit, outcomes=outcomes):
            outcomes.append(after_submit(self, participant, judgment))
            return outcomes[-1]

        with monkeypatch.context() as patched:
            patched.setattr(ThumbProtocol, "after_submit", keep)
            if path == "orm":
                patched.setattr(judgments, "_plain", lambda outcome: False)
            point = transaction.savepoint()
            participant = Participant.objects.get(pk=lease.participant_id)
            with CaptureQueriesContext(connection) as queries:
                judgment_submit(participant=participant, token=lease.token, data=data, now=now)
            results[path] = (stored(study, lease), queries.captured_queries, outcomes[0])
            transaction.savepoint_rollback(point)
    return results


@pytest.mark.parametrize("catch_rate", [0, 0.5])
def test_a_review_that_makes_items_stores_what_the_orm_stores(
    monkeypatch, make_study, make_annotator, catch_rate
):
    """A stage-2 answer whose outcome makes the image's fluency round and check (and, with
    catch trials, the reviewer's catch trial): one statement stores them with the judgment,
    and every row is the one the ORM's path writes."""
    postgresql_only()
    study = five_caption_study(make_study, images=2)
    first, second = (member(study, make_annotator(name)) for name in ("ann", "bob"))
    for _ in range(2):
        judge(first, all_scores, STAGE1)
    # Catch trials from now on: bob's review then also draws his first catch trial (rate 0.5
    # inserts one after every item, rubrics.catch.insert_probability).
    Study.objects.filter(pk=study.pk).update(settings={**study.settings, "catch_rate": catch_rate})
    lease = assignment_next(participant=second)
    assert lease.item.kind == STAGE2
    now = lease.served_at + timedelta(seconds=60)

    results = submit_both_ways(monkeypatch, study, lease, all_scores(lease.item, precision=2), now)

    (once, once_sql, made), (orm, orm_sql, _) = results["one statement"], results["orm"]
    stores = [q["sql"] for q in once_sql if q["sql"].lstrip().startswith(ONE_STATEMENT)]
    assert len(stores) == 1
    assert not any("INSERT" in q["sql"] and ONE_STATEMENT not in q["sql"] for q in once_sql)
    assert not any(ONE_STATEMENT in q["sql"] for q in orm_sql)
    kinds = [item.kind for item in made.new_items]
    assert kinds == [FLUENCY, CHECK, CATCH][: 3 if catch_rate else 2]
    assert once == orm
    new = once["items"][-len(kinds) :]
    assert [row["kind"] for row in new] == kinds
    stage2 = Item.objects.get(pk=lease.item_id)
    for row in new:
        if row["kind"] != CATCH:
            assert (row["image"], row["position"], row["target"]) == (
                stage2.image_id,
                stage2.position,
                1,
            )
            assert row["judgment_count"] == row["open_lease_count"] == 0
    shown = {key: value for key, value in stage2.spec.items() if key != "check_keys"}
    assert new[0]["spec"] == shown
    assert {g["key"] for g in new[1]["spec"]["groups"]} == set(stage2.spec["check_keys"])
    assert once["lease"]["status"] == Assignment.Status.SUBMITTED
    assert once["participant"]["state"]["judged"] == 1
    # The one statement leaves the new items saved with their ids, as bulk_create does.
    assert all(not item._state.adding for item in made.new_items)
    assert [item.pk for item in made.new_items] == sorted(item.pk for item in made.new_items)


def test_the_items_made_keep_their_ids(make_study, make_annotator):
    """The ids ``STORE_POSTGRESQL`` returns are the rows' (in the order the outcome made
    them), as ``bulk_create`` sets them on the ORM's path."""
    study = five_caption_study(make_study, images=1)
    judge(member(study, make_annotator("ann")), all_scores, STAGE1)
    bob = member(study, make_annotator("bob"))
    lease = assignment_next(participant=bob)
    outcomes = []
    original = ThumbProtocol.after_submit

    def keep(self, participant, judgment):
        outcomes.append(original(self, participant, judgment))
        return outcomes[-1]

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(ThumbProtocol, "after_submit", keep)
        judgment_submit(participant=bob, token=lease.token, data=all_scores(lease.item))
    made = outcomes[0].new_items
    assert [item.kind for item in made] == [FLUENCY, CHECK]
    for item in made:
        row = Item.objects.get(pk=item.pk)
        assert (row.kind, row.spec, row.image_id) == (item.kind, item.spec, item.image_id)


#: A review of an image whose stage 2 was judged before: no item is made, so the store is
#: one statement on PostgreSQL; the image's fluency round and check are read with the
#: submission's other reads. The participant with its study, the lock, the reads, the store
#: (PostgreSQL); on SQLite the store is four: judgment, lease, item, participant.
AGAIN = {"postgresql": 4, "sqlite": 7}


def test_a_second_review_reads_its_later_items_with_the_other_reads(make_study):
    """A stage-2 item given a second review (its target raised): its answer finds the fluency
    round and check the first made, in the submission's one read, and makes none again."""
    study = five_caption_study(make_study, images=1)
    first, second, third = (
        crowd_worker(study, pid, f"10.0.{n}.5") for n, pid in enumerate(("P1", "P2", "P3"))
    )
    answer(first, study, STAGE1)
    _get, post = answer(second, study, STAGE2)
    assert len(post) <= PINS[(STAGE2, "post", connection.vendor)]
    made = sorted(Item.objects.filter(study=study, kind__in=[FLUENCY, CHECK]).values_list("kind"))
    assert made == [(CHECK,), (FLUENCY,)]
    # The second review is the only item left for the third worker.
    Item.objects.filter(study=study, kind=STAGE2).update(target=2)
    Item.objects.filter(study=study, kind=CHECK).update(target=0)

    _get, again = answer(third, study, STAGE2)

    assert len(again) <= AGAIN[connection.vendor], again
    after = sorted(Item.objects.filter(study=study, kind__in=[FLUENCY, CHECK]).values_list("kind"))
    assert after == made
    assert Item.objects.get(study=study, kind=STAGE2).judgment_count == 2
