"""Issue 48: HUMANr's exposure rule as SQL inside the claim (``modes/humanr/exposure.py``)
serves exactly the groups the Python rule it replaces serves.

``GUARDED`` is the rule written as a condition of SQL alone, right when every lease of the
worker has its check answered, and matching nothing otherwise (the full path then asks the
exact rule, ``exact_items``: the rule's old code, which reads the worker's leases and
draws their checks). Compared here after every step of seeded histories of three crowd
ids, two of them in one browser, that lease, answer part or all of a group, let a lease
lapse or have it given back, on a study small enough that the rule's size clause (fewer
than 12 pool images left unmet) comes into play; and, on PostgreSQL, with a browser-mate's
lease committed by another connection while the claim waits for the worker's lock.
"""

from __future__ import annotations

import random
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Assignment, Item, ItemImage, Participant
from annotation.modes.base import get_mode
from annotation.modes.humanr.checks import CHECK_IMAGES, worker_checks, worker_leases
from annotation.modes.humanr.exposure import GUARDED, exact_items, guarded_sql
from annotation.modes.humanr.protocol import GROUP, reference_on_left
from annotation.services.assignments import assignment_next, assignment_release
from annotation.services.judgments import judgment_submit
from rubrics.humanr import GROUP_SIZE
from tests.factories.core import require_postgres, run_together
from tests.factories.humanr import careless, crowd, honest, humanr_study

ITEM = '"annotation_item"'


def _groups(study):
    return Item.objects.filter(study_id=study.pk, kind=GROUP)


def guarded(participant) -> set[int]:
    """The groups ``GUARDED`` lets through, run on its own."""
    sql, params = guarded_sql(participant, ITEM)
    return set(
        _groups(participant.study).extra(where=[sql], params=params).values_list("pk", flat=True)
    )


def exact(participant) -> set[int]:
    """The groups the Python rule lets through (the old ``eligible_items`` exposure code)."""
    return set(exact_items(participant, _groups(participant.study)).values_list("pk", flat=True))


def all_checks_answered(participant) -> bool:
    """Whether every lease of the worker (with its browser-mates) has its check answered."""
    leases, _ = worker_leases(participant)
    return all(lease.answer is not None for lease in leases.values())


def assert_same_rule(participant) -> tuple[bool, bool]:
    """``GUARDED`` is the Python rule when its guard holds, nothing otherwise; returns the
    guard, and whether the rule then barred some groups and left others."""
    participant.refresh_from_db()
    answered = all_checks_answered(participant)
    want = exact(participant) if answered else set()
    assert guarded(participant) == want, (participant.external_id, answered)
    return answered, answered and 0 < len(want) < _groups(participant.study).count()


def _answer(participant, count: int, answer) -> None:
    """Take the participant's lease (or a new one) and answer its next ``count`` trials
    (nothing when they are refused one: a lapse's wait)."""
    try:
        lease = assignment_next(participant=participant)
    except ServiceError:
        return
    if lease is None:
        return
    spec = lease.item.spec
    start = lease.judgments.count()
    for part in range(start, min(start + count, len(spec["trials"]))):
        on_left = reference_on_left(spec["seed"], lease.pk, part)
        judgment_submit(
            participant=participant,
            token=lease.token,
            part=part,
            data={"raw": answer(spec["trials"][part], on_left)},
        )


def _lapse(participant) -> None:
    Assignment.objects.filter(participant=participant, status=Assignment.Status.OPEN).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )


def _give_back(participant) -> None:
    for lease in Assignment.objects.filter(participant=participant, status="open"):
        assignment_release(study=participant.study, assignment_id=lease.pk, released_by="r")


def _step(rng: random.Random, participant) -> None:
    action = rng.choice(
        ["group", "group", "part", "part", "part", "lapse", "give back", "careless"]
    )
    if action == "group":
        _answer(participant, 10, honest)
    elif action == "careless":
        _answer(participant, 10, careless)
    elif action == "part":
        _answer(participant, rng.randint(1, 8), honest)
    elif action == "lapse":
        _lapse(participant)
    else:
        _give_back(participant)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(6))
def test_the_sql_rule_serves_what_the_python_rule_serves(researcher, seed):
    """Seeded histories; the rule compared for every id after every step (the guard both
    held and failed in each: asserted, since a history that never fails it proves less)."""
    rng = random.Random(seed)
    # One model system: each image is in two groups, so a worker can do several groups.
    study = humanr_study(
        researcher,
        images=rng.choice([30, 45, 60]),
        humans=rng.choice([2, 3]),  # 2: no spare caption, a check falls back to all of them
        systems=("GIT",),
        seed=seed + 1,
    )
    people = [crowd(study, f"P{seed}-{n}") for n in range(3)]
    Participant.objects.filter(pk__in=[people[0].pk, people[1].pk]).update(browser_id=f"b{seed}")
    # The third id starts a group and stops before its check: its guard fails from the start.
    lease = assignment_next(participant=people[2])
    kinds = [trial["kind"] for trial in lease.item.spec["trials"]]
    _answer(people[2], kinds.index("attention_check"), honest)
    guards, barred = set(), False
    for _ in range(18):
        who = rng.choice(people)
        who.refresh_from_db()
        _step(rng, who)
        for participant in people:
            guard, some = assert_same_rule(participant)
            guards.add(guard)
            barred |= some
    assert guards == {True, False}, "the history kept the guard one way"
    assert barred, "the rule never barred some groups and left others"


@pytest.mark.django_db
@pytest.mark.parametrize("images", [16, 20])
def test_the_size_clause_is_the_python_rules(researcher, images):
    """Near the end of a small study the rule bars groups too big to leave two unmet images
    for their check: the SQL's count of unmet images and its grouping agree with Python's.
    The study's own groups all share an image with a worker's first group, so two groups
    of unmet images are added: one image more than is left besides a check (barred by its
    size alone), and exactly as many (served)."""
    study = humanr_study(researcher, images=images, systems=("GIT",), seed=images)
    worker = crowd(study, "S-1")
    _answer(worker, 10, honest)
    worker.refresh_from_db()
    drawn = worker_checks(worker, study.seed)
    unmet = sorted(set(drawn.pool) - drawn.met)
    left = len(unmet) - CHECK_IMAGES
    assert 0 < left < GROUP_SIZE + 1, "the size clause applies"
    big, small = (
        Item.objects.create(study=study, kind=GROUP, position=1000 + n, spec={}, target=1)
        for n in range(2)
    )
    ItemImage.objects.bulk_create(
        [ItemImage(item=big, image_id=image) for image in unmet[: left + 1]]
        + [ItemImage(item=small, image_id=image) for image in unmet[:left]]
    )
    own = Assignment.objects.get(participant=worker).item_id  # theirs stays theirs
    assert exact(worker) == {own, small.pk}
    assert assert_same_rule(worker) == (True, True)


@pytest.mark.django_db
def test_the_fresh_claim_takes_the_sql_rule_and_a_whole_query_the_exact_one(researcher):
    """The fresh claim's WHERE is ``GUARDED`` (no read of the worker's leases before the
    claim); when its guard fails (a browser-mate's group in progress), the full path's claim
    reads them and serves what the Python rule serves."""
    study = humanr_study(researcher, images=60, systems=("GIT",), seed=3)
    first, mate = crowd(study, "F-1"), crowd(study, "F-2")
    Participant.objects.filter(pk__in=[first.pk, mate.pk]).update(browser_id="b-fresh")
    first.refresh_from_db()
    mate.refresh_from_db()
    marker = GUARDED.split("\n")[1].strip()[:40]
    with CaptureQueriesContext(connection) as seen:
        lease = assignment_next(participant=first)
    sql = [q["sql"] for q in seen.captured_queries]
    assert lease is not None
    assert not any('LEFT JOIN "annotation_itemimage" ii' in s for s in sql), sql
    assert sum(marker in s for s in sql) == 1
    # The first id's group is in progress (its check unanswered): the mate's claim falls
    # back to the exact rule, and gets a group sharing no image with it.
    _answer(first, 1, honest)
    expected = exact(mate)
    with CaptureQueriesContext(connection) as seen:
        other = assignment_next(participant=mate)
    assert other is not None and other.item_id in expected
    assert any('LEFT JOIN "annotation_itemimage" ii' in q["sql"] for q in seen.captured_queries)
    shown = lambda item_id: set(  # noqa: E731
        ItemImage.objects.filter(item_id=item_id).values_list("image_id", flat=True)
    )
    assert not shown(lease.item_id) & shown(other.item_id)


@pytest.mark.django_db
def test_the_end_of_group_question_uses_the_exact_rule(researcher):
    """``eligible_items`` evaluated as a whole query (the end-of-group page's ``exists``)
    is the exact rule even while the guard fails."""
    study = humanr_study(researcher, images=30, seed=3)
    worker = crowd(study, "E-1")
    _answer(worker, 3, honest)  # a group in progress: its check is unanswered
    worker.refresh_from_db()
    assert not all_checks_answered(worker)
    eligible = get_mode("humanr").eligible_items(worker)
    assert set(eligible.values_list("pk", flat=True)) == exact(worker) != set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("answered", [0, 10])
def test_a_browser_mates_lease_committed_while_waiting_for_the_lock_is_seen(researcher, answered):
    """PostgreSQL: a browser-mate's request holds the worker's lock, leases a group and
    answers ``answered`` of its trials, and commits while the worker's claim waits. The
    worker's claim runs after the lock (the rule inside its statement when the mate's check
    is answered, the exact rule read after the lock when not), so it sees that lease and
    serves a group sharing no image with it nor with its check."""
    require_postgres()
    study = humanr_study(researcher, images=60, systems=("GIT",), seed=3)
    worker, mate = crowd(study, "L-1"), crowd(study, "L-2")
    Participant.objects.filter(pk__in=[worker.pk, mate.pk]).update(browser_id="b-lock")
    worker.refresh_from_db()
    mate.refresh_from_db()
    claimed = threading.Event()

    def mate_claims():
        with transaction.atomic():
            _answer(mate, answered, honest)
            claimed.set()
            threading.Event().wait(1.0)  # the worker's claim waits for the lock meanwhile
        return Assignment.objects.get(participant=mate)

    def worker_claims():
        assert claimed.wait(10)
        with CaptureQueriesContext(connection) as seen:
            lease = assignment_next(participant=worker)
        return lease, [q["sql"] for q in seen.captured_queries]

    (mate_lease, (worker_lease, sql)), errors = run_together([mate_claims, worker_claims])
    assert not errors, errors
    assert worker_lease is not None
    # The worker's lease started after the mate's request had its lease.
    assert worker_lease.served_at > mate_lease.served_at
    # Which form served it: the rule inside the claim when the mate's check is answered;
    # else that claim matched nothing and the full path read the worker's leases.
    read = any('LEFT JOIN "annotation_itemimage" ii' in statement for statement in sql)
    assert read == (answered == 0), sql
    mate_images = set(
        ItemImage.objects.filter(item_id=mate_lease.item_id).values_list("image_id", flat=True)
    )
    mine = set(
        ItemImage.objects.filter(item_id=worker_lease.item_id).values_list("image_id", flat=True)
    )
    assert not mate_images & mine
    worker.refresh_from_db()
    leases, _ = worker_leases(worker)
    assert set(leases) == {mate_lease.pk, worker_lease.pk}
    assert worker_lease.item_id in exact(worker)
