"""THumB's crowd requests (issue 48): what the reviews' requests read, and that the reads cut
from them keep what the pages say and what a submission decides.

``test_hot_path_queries.py`` pins stage 1's GET and POST with every other mode's (with room
left); every kind is pinned here, the reviews (stage 2 and the third annotator's check) with
their stages in one read, kept on the lease for validate, score and after_submit.
"""

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, Item, Judgment
from annotation.modes import get_mode
from annotation.modes.catch import CATCH
from annotation.modes.thumb.stages import CHECK, FLUENCY, KINDS, STAGE1, STAGE2
from annotation.services.assignments import assignment_next
from annotation.services.participants import crowd_link_token
from tests.annotation.test_hot_path_queries import counted
from tests.factories.thumb import all_scores, form_for, judge, member, thumb_study
from tests.factories.thumb import make_annotator as make_annotator_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

MODE = get_mode("thumb")
SYSTEMS = ("Up-Down", "Unified-VLP", "VinVL-base", "VinVL-large")
FORM_ACTION = re.compile(r'<form method="post" action="([^"]+/submit/[^"]*)"')

#: Statements besides the session's, per (kind, request, vendor): the most each may make.
#: GET: the view's read of the participant with its study; the lock (``LOCK_WORKER``); the
#: claim (one statement on PostgreSQL, the slot's UPDATE and the lease's INSERT on SQLite),
#: with the mode's eligibility written into it; the page's own read (``pages.PAGE``: the
#: image, the progress line and on a review its stages). POST: the participant with its
#: study; ``LOCK_SUBMISSION``; the submission's reads in one statement (``stages.
#: submission_reads``: the linked ids, a review's stages); the store (one statement on
#: PostgreSQL, four on SQLite: judgment, lease, item, and the participant, whose state keeps
#: the count of their judgments). A stage-2 POST also writes the image's fluency round (crowd
#: workers are not native speakers) and its check: on PostgreSQL in the same statement
#: (``judgment_sql.STORE_POSTGRESQL``'s ``made``), on SQLite one more INSERT
#: (``test_thumb_hot_path_store.py`` checks the rows are the ORM path's).
PINS = {
    (STAGE1, "get", "postgresql"): 4,
    (STAGE1, "post", "postgresql"): 4,
    (STAGE2, "get", "postgresql"): 4,
    (STAGE2, "post", "postgresql"): 4,
    (CHECK, "get", "postgresql"): 4,
    (CHECK, "post", "postgresql"): 4,
    (STAGE1, "get", "sqlite"): 5,
    (STAGE1, "post", "sqlite"): 7,
    (STAGE2, "get", "sqlite"): 5,
    (STAGE2, "post", "sqlite"): 8,
    (CHECK, "get", "sqlite"): 5,
    (CHECK, "post", "sqlite"): 7,
}
#: A worker's pages before their first answer count their judgments once more (their state
#: keeps the count from their first answer on; ``integrity.judged``).
FIRST_GET = 1


def five_caption_study(make_study, images=3):
    """A study as in THumB 1.0: a human caption and four systems' per image (five groups)."""
    captions = {
        f"image{n}": [("Human", f"A person near a table, photo {n}.")]
        + [(system, f"{system} sees a table in photo {n}.") for system in SYSTEMS]
        for n in range(images)
    }
    return thumb_study(make_study, captions=captions)


def crowd_worker(study, pid, address):
    """A crowd worker through the signed link, from an address (a network) of their own:
    workers of one network are one person to THumB, who never reviews their own work."""
    client = Client(REMOTE_ADDR=address)
    entry = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": f"X-{pid}"},
    )
    assert entry.status_code == 302
    return client


def answer(client, study, kind):
    """GET the next item (of ``kind``) and POST its answers; the statements of each."""
    url = reverse("participate_next", args=[study.public_id])
    with CaptureQueriesContext(connection) as shown:
        page = client.get(url)
    item = page.context["assignment"].item
    assert item.kind == kind
    action = FORM_ACTION.search(page.content.decode()).group(1)
    with CaptureQueriesContext(connection) as answered:
        reply = client.post(action, form_for(item))
    assert reply.status_code == 302, reply.content.decode()[:800]
    return counted(shown), counted(answered)


def test_reviews_read_their_stages_once(make_study):
    """Stage 1, stage 2 and the check through the real views: each request within its
    count, and what the reads decide still decided (the review's changes, the fluency round
    and the check made once per image)."""
    study = five_caption_study(make_study)
    first, second, third = (
        crowd_worker(study, pid, f"10.0.{n}.5") for n, pid in enumerate(("P1", "P2", "P3"))
    )
    measured = [(STAGE1, n, answer(first, study, STAGE1)) for n in range(3)]
    measured += [(STAGE2, n, answer(second, study, STAGE2)) for n in range(3)]
    measured += [(CHECK, n, answer(third, study, CHECK)) for n in range(2)]

    vendor = connection.vendor
    for kind, n, (get_sql, post_sql) in measured:
        first_get = FIRST_GET if n == 0 else 0
        assert len(get_sql) <= PINS[(kind, "get", vendor)] + first_get, (kind, "get", get_sql)
        assert len(post_sql) <= PINS[(kind, "post", vendor)], (kind, "post", post_sql)
    reviews = Judgment.objects.filter(study=study, item__kind=STAGE2)
    assert reviews.count() == 3
    assert all(set(j.result["modified"]) == set(j.payload["captions"]) for j in reviews)
    assert Item.objects.filter(study=study, kind=FLUENCY).count() == 3
    checked = Item.objects.filter(study=study, kind=CHECK)
    assert checked.values("image_id").distinct().count() == checked.count() == 3


def expected_progress(lease, study):
    """The progress line's numbers from the rows, as the page has always counted them."""
    items = list(Item.objects.filter(study=study).values("kind", "target", "judgment_count"))
    left = {
        kind: sum(i["target"] - i["judgment_count"] for i in items if i["kind"] == kind)
        for kind in KINDS
    }
    done = Assignment.objects.filter(
        participant_id=lease.participant_id, status=Assignment.Status.SUBMITTED
    ).count()
    return {
        "position": done + 1,
        "images": sum(1 for i in items if i["kind"] == STAGE1 and i["target"] > 0),
        **{f"left_{kind}": left[kind] for kind in KINDS},
        "left": sum(left.values()),
    }


def test_the_progress_line_counts_every_stage_as_before(make_study, make_annotator):
    """Every kind of item in play: stage 1 and its reviews done or not, fluency rounds and
    checks made as stage 2 is stored, items a people design left out (target 0), and a catch
    trial (not a stage: never counted)."""
    study = five_caption_study(make_study, images=6)
    first, second, third = (member(study, make_annotator(name)) for name in ("ann", "bob", "cyd"))
    for _ in range(4):
        judge(first, all_scores, STAGE1)
    for _ in range(2):
        judge(second, all_scores, STAGE2)
    images = list(Item.objects.filter(study=study, kind=STAGE1).values_list("image_id", flat=True))
    Item.objects.filter(study=study, kind=STAGE1, image_id=images[5]).update(target=0)
    Item.objects.filter(study=study, kind=STAGE2, image_id=images[3]).update(target=0)
    stage1 = Item.objects.filter(study=study, kind=STAGE1).first()
    Item.objects.create(
        study=study, kind=CATCH, image_id=stage1.image_id, spec=stage1.spec, target=1
    )
    assert Item.objects.filter(study=study, kind=FLUENCY).count() == 2

    shown = {}
    for participant, kind in ((first, STAGE1), (second, STAGE2), (third, CHECK)):
        lease = assignment_next(participant=participant)
        assert lease.item.kind == kind
        lease.participant.study = study
        shown[kind] = MODE.pages.item_context(lease, 0)["progress"]
        assert shown[kind] == expected_progress(lease, study)
    assert (shown[STAGE1]["position"], shown[STAGE2]["position"]) == (5, 3)
    assert shown[CHECK]["images"] == 5
    assert shown[CHECK]["left_stage2"] == 3  # images 2, 4 and 5: image 3's was left out


def test_a_review_stored_twice_makes_its_fluency_round_and_check_once(make_study, make_annotator):
    """The guard for an image whose last stage already has a judgment (a state the services
    never reach: its item takes one): its fluency round and check exist, none is made again."""
    study = five_caption_study(make_study, images=1)
    judge(member(study, make_annotator("ann")), all_scores, STAGE1)
    judge(member(study, make_annotator("bob")), all_scores, STAGE2)
    stage2 = Item.objects.get(study=study, kind=STAGE2)
    assert stage2.judgment_count == 1
    assert {FLUENCY, CHECK} <= set(Item.objects.filter(study=study).values_list("kind", flat=True))
    third = member(study, make_annotator("cyd"))
    lease = Assignment(participant=third, item=stage2)
    again = Judgment(study=study, item=stage2, participant=third, assignment=lease, payload={})

    assert MODE.after_submit(third, again).new_items == ()
