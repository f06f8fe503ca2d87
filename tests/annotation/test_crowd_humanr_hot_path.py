"""Issue 48 (HUMANr): the statements of each request of a whole group, through the real views.

``test_hot_path_queries.py`` pins the first two rounds of every mode; a HUMANr group has
three kinds of request beyond them: a trial's page after the first, the attention check's
page and answer (the only ones that draw a check), and the answer that ends the group with
its end-of-group page. Counted as there: besides the session's queries and transaction
statements.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment
from annotation.modes.base import get_mode
from annotation.modes.humanr.checks import check_captions
from annotation.modes.humanr.protocol import CHECK, reference_on_left
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from tests.annotation.test_hot_path_queries import FORM_ACTION, _enter, counted
from tests.factories.humanr import crowd, honest, humanr_study

pytestmark = pytest.mark.django_db

#: The statements of each kind of request, per vendor, pinned (a change up or down fails:
#: update the pin with the reason). A later trial's page: the view's participant and study,
#: the service's lock, the lease with its item and its answers (``assignment_sql.LEASES``:
#: the part to show comes with it), and the page's one read of its two captions (with the
#: time the previous trial was answered).
TRIAL_PAGE = 4
#: A group's first page: the view's read, the lock, the claim and the captions. The
#: exposure rule runs inside the claim's statement (``modes/humanr/exposure.py``: the worker
#: has no check left unanswered), not as a read of the worker's leases before it. On SQLite
#: the claim is two statements (no writes in a CTE: the UPDATE, then the lease's INSERT).
FIRST_PAGE = {"postgresql": 4, "sqlite": 5}
#: An answer: the view's read, the lock, the lease's answers (``judgment_sql.ANSWERS``: the
#: parts answered, when the previous one was, their results), the store.
ANSWER = 4
#: The answer that ends a group: the service's, with a failed check's exclusion of the
#: group's judgments; on PostgreSQL all in the store's one statement, on SQLite the flag,
#: the judgment, the lease, the item and the participant's state one statement each. The
#: mode reads the group's earlier results from the service's read of the answers.
LAST_ANSWER = {"postgresql": 4, "sqlite": 8}
#: What drawing the check adds to its page and its answer: nothing. The page's draw is one
#: read, the worker's leases (with their groups' images and answered checks) and the checks
#: answered before (``checks.WORKER_LEASES`` with ``SHOWN``), in place of the captions' read:
#: the check's captions and image were read with the study's human captions, once per
#: process, and the previous answer's time comes with the lease's answers. The answer reads
#: nothing to draw: its form says what the page showed (``checks.shown_field``, verified
#: with the site's secret and against the study's captions). Issue 48: it was one read more
#: on each.
DRAW = 0
#: The reads a process makes once per open study, on the first check page it shows: the
#: study's human captions (with their texts and images) and the captions its comparisons
#: show (``checks.StudyCaptions``).
ONCE_PER_PROCESS = 2
#: The end-of-group page: the view's two reads, the worker's leases and one EXISTS of the
#: eligible groups (the exact rule: a whole query, ``exposure.Exposure``).
END_PAGE = 4


def _group(client, study):
    """Answer one whole group ("both equally" everywhere: the check fails); per trial, its
    kind and the statements of its page and answer, and those of the end-of-group page."""
    url = reverse("participate_next", args=[study.public_id])
    trials = []
    for _ in range(10):
        with CaptureQueriesContext(connection) as shown:
            page = client.get(url)
        action = FORM_ACTION.search(page.content.decode())
        assert page.status_code == 200 and action
        part = page.context["part"]
        kind = page.context["assignment"].item.spec["trials"][part]["kind"]
        left = str(page.context["left_caption"].pk)
        body = {"part": str(part), "raw": "5", "left": left, "shown": page.context["shown"]}
        with CaptureQueriesContext(connection) as answered:
            reply = client.post(action.group(1), body)
        assert reply.status_code == 302
        trials.append((part, kind, counted(shown), counted(answered)))
        if "/feedback/" in reply["Location"]:
            with CaptureQueriesContext(connection) as end:
                feedback = client.get(reply["Location"])
            return trials, counted(end), feedback.content.decode()
    raise AssertionError("the group did not end")


def expected(part: int, kind: str, parts: int, cold: bool) -> tuple[int, int]:
    """The pinned statements of a trial's page and answer on this vendor."""
    vendor = connection.vendor
    page = FIRST_PAGE[vendor] if part == 0 else TRIAL_PAGE
    answer = LAST_ANSWER[vendor] if part == parts - 1 else ANSWER
    if kind == CHECK:
        page += DRAW + (ONCE_PER_PROCESS if cold else 0)
        answer += DRAW
    return page, answer


@pytest.mark.parametrize("cold", [True, False])
@pytest.mark.parametrize("seed", [7, 3, 21])
def test_each_request_of_a_group_makes_its_pinned_statements(client, researcher, seed, cold):
    """Seed 7 puts the group's check last (its answer also ends the group), seed 3 fifth,
    seed 21 first (its page is also the group's first). ``cold``: the process has not read
    the study's captions yet (else they are read before, as a process serving the study
    would have)."""
    study = humanr_study(researcher, images=30, seed=seed)
    if not cold:
        check_captions(study).spare  # noqa: B018 (read, as an earlier request would)
    _enter(client, study, "P1")
    trials, end_page, _html = _group(client, study)
    kinds = [kind for _, kind, _, _ in trials]
    assert kinds.count(CHECK) == 1
    assert kinds.index(CHECK) == {7: len(trials) - 1, 3: 4, 21: 0}[seed]
    for part, kind, get_sql, post_sql in trials:
        page, answer = expected(part, kind, len(trials), cold)
        assert len(get_sql) == page, (part, kind, get_sql)
        assert len(post_sql) == answer, (part, kind, post_sql)
    # Whether another group is left is the end-of-group page's question, not the answer's
    # (LAST_ANSWER has no read of it).
    assert len(end_page) == END_PAGE, end_page


def test_the_first_page_reads_no_lease_of_the_worker_before_the_claim(client, researcher):
    """The exposure rule's read of the worker's leases is gone from a group's first page:
    the rule is part of the claim's statement (which runs after the lock)."""
    study = humanr_study(researcher, images=30, seed=3)
    _enter(client, study, "P1")
    with CaptureQueriesContext(connection) as shown:
        page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.status_code == 200
    statements = counted(shown)
    assert not any('LEFT JOIN "annotation_itemimage" ii' in sql for sql in statements)
    claim = [sql for sql in statements if 'UPDATE "annotation_item"' in sql]
    assert len(claim) == 1 and 'SELECT 1 FROM "annotation_assignment" ua' in claim[0]


@pytest.mark.parametrize(("images", "left"), [(45, True), (12, False)])
def test_the_end_of_group_page_still_says_whether_a_group_is_left(client, researcher, images, left):
    """The question the page now asks late still gets its answer: with 12 images, the
    first group and its check leave too few unmet images for a second group. With 30
    (this test's first number) whether one was left hung on the check's image, drawn from
    the participant's and item's ids: 4 of 8 id offsets left none, so the test passed or
    failed with the tests run before it; with 45, 30 of 30 offsets leave one."""
    study = humanr_study(researcher, images=images)
    _enter(client, study, "P1")
    _trials, _end, end_html = _group(client, study)
    assert ('id="hr-another"' in end_html) is left
    assert ('id="hr-no-more"' in end_html) is not left


@pytest.mark.parametrize("reopened", [False, True])
def test_the_trial_page_times_the_trial_as_the_lease_does(researcher, reopened):
    """The page reads when the previous trial was answered with its captions: the minimum
    time counts from the same moment as ``Assignment.part_shown_at`` (the later of that
    answer and the lease's start, which a reopened lease moves)."""
    study = humanr_study(researcher, images=30, min_seconds_per_trial=30)
    worker = crowd(study)
    lease = assignment_next(participant=worker)
    first = lease.item.spec["trials"][0]
    on_left = reference_on_left(lease.item.spec["seed"], lease.pk, 0)
    answered = lease.served_at + timedelta(seconds=40)
    judgment_submit(
        participant=worker,
        token=lease.token,
        part=0,
        data={"raw": honest(first, on_left)},
        now=answered,
    )
    if reopened:
        lease.served_at = answered + timedelta(seconds=60)
        Assignment.objects.filter(pk=lease.pk).update(served_at=lease.served_at)
    page = get_mode("humanr").pages.item_context(lease, 1)
    waited = (timezone.now() - lease.part_shown_at(1)).total_seconds()
    assert page["remaining_seconds"] == pytest.approx(max(0.0, 30 - waited), abs=1)
    assert page["remaining_seconds"] > (120 if reopened else 60)
