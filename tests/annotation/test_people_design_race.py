"""The design drawn while crowd workers claim items (issue 40), on PostgreSQL's row locks:
whichever comes first, no lease is ever left open on an item the design left out (its
answer would break the item's count against target 0), and the counters stay exact.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import transaction

from annotation.errors import Conflict
from annotation.models import Assignment, Item
from annotation.services.assignments import assignment_next
from annotation.services.judges import judge_import
from annotation.services.people_design import people_design_apply
from tests.factories.core import assert_counts_exact, require_postgres, run_together
from tests.factories.spans import spans_study, worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("round_", range(4))
def test_a_claim_racing_the_design_never_holds_a_left_out_item(researcher, round_):
    require_postgres()
    study = spans_study(researcher, images=3, people_design="uniform", people_share=0.5, target=1)
    study.seed = round_
    study.save(update_fields=["seed"])
    rows = [
        {"item_id": item.pk, "answer": {"spans": [], "score": 50}}
        for item in Item.objects.filter(study=study)
    ]
    judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name="judge")
    participants = [worker(study, f"race{round_}-{n}") for n in range(3)]

    def apply():
        try:
            return people_design_apply(study=study, user=researcher)
        except Conflict as exc:  # a lease landed first on an item the design leaves out
            return exc

    claims = [lambda p=p: assignment_next(participant=p) for p in participants]
    results, errors = run_together([apply, *claims])
    assert not errors, errors
    left_out = Item.objects.filter(study=study, target=0)
    open_leases = Assignment.objects.filter(status=Assignment.Status.OPEN)
    assert not open_leases.filter(item__in=left_out).exists()
    if isinstance(results[0], Conflict):
        assert "lease" in results[0].message
        assert not Item.objects.filter(study=study, sampling_probability__isnull=False).exists()
    else:
        assert Item.objects.filter(study=study, sampling_probability=0.5).count() == 6
    assert_counts_exact(study)


def test_the_design_never_waits_on_a_claim_that_holds_an_item_and_waits_too(researcher):
    """The deadlock CI met: a claim whose first, ``SKIP LOCKED`` try locked an item that was
    full by then (PostgreSQL keeps that lock) goes on to wait for an item the design holds,
    while the design waits for the first. The design takes its locks without waiting, and
    starts again when one is held, so the claim goes through and the design after it.

    The claim's two steps are played on a second connection, in the order that deadlocked:
    hold the last item, then (once the design is under way) take the first.
    """
    require_postgres()
    study = spans_study(researcher, images=3, people_design="uniform", people_share=0.5, target=1)
    rows = [
        {"item_id": item.pk, "answer": {"spans": [], "score": 50}}
        for item in Item.objects.filter(study=study)
    ]
    judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name="judge")
    ids = sorted(Item.objects.filter(study=study).values_list("pk", flat=True))
    holding = threading.Event()

    def claim():
        with transaction.atomic():
            Item.objects.select_for_update().filter(pk=ids[-1]).get()
            holding.set()
            time.sleep(0.5)  # the design locks the other items meanwhile (old code: waits)
            Item.objects.select_for_update().filter(pk=ids[0]).get()
        return "claimed"

    def apply():
        assert holding.wait(timeout=10)
        return people_design_apply(study=study, user=researcher)

    results, errors = run_together([claim, apply])
    assert not errors, errors
    assert results[0] == "claimed" and results[1]["units"] == len(ids)
    assert Item.objects.filter(study=study, sampling_probability=0.5).count() == len(ids)


@pytest.mark.parametrize("round_", range(4))
def test_claims_waiting_for_items_a_design_holds_never_deadlock(researcher, round_):
    """Every item locked by a transaction that leaves most of them out (a design, or any
    researcher's write), and workers asking meanwhile: each claim's ``SKIP LOCKED`` try finds
    nothing, so it waits. When the writer commits, each waiting claim finds its row left out
    and moves on, keeping that row's lock (PostgreSQL does); two claims walking the items in
    their own serving orders then waited on each other's kept rows. Every claim must get an
    item or a clean "nothing left", and the one item still open goes to one of them."""
    require_postgres()
    study = spans_study(researcher, images=4, target=1)
    study.seed = round_
    study.save(update_fields=["seed"])
    ids = sorted(Item.objects.filter(study=study).values_list("pk", flat=True))
    kept = ids[len(ids) // 2]
    participants = [worker(study, f"wait{round_}-{n}") for n in range(3)]
    held = threading.Event()

    def writer():
        with transaction.atomic():
            list(Item.objects.select_for_update().filter(pk__in=ids))
            held.set()
            time.sleep(0.5)  # the claims find every item locked, and wait
            Item.objects.filter(pk__in=ids).exclude(pk=kept).update(target=0)
        return "written"

    def claim(participant):
        assert held.wait(timeout=10)
        lease = assignment_next(participant=participant)
        return lease and lease.item_id

    claims = [lambda p=p: claim(p) for p in participants]
    results, errors = run_together([writer, *claims])
    assert not errors, errors
    assert sorted(results[1:], key=bool) == [None, None, kept]
    assert_counts_exact(study)
