"""The queries of the two requests a crowd worker makes most (issue 27): GET next, POST submit.

Pinned on bench/assign.py's path: a VICR crowd study, a Prolific player in the game who
entered through the crowd link, GET next claiming a fresh pair, POST a rating that redirects
to the feedback page, and the GET of that page (POST, redirect, GET since issue 42).
Each query costs the web worker its ORM building more than the database its work, so a new
query on these paths must be a decision, not a drift: change the numbers here with the reason.
Transaction statements (savepoints in the tests, BEGIN/COMMIT in production) are not counted;
everything else is.
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, Judgment
from annotation.services.participants import crowd_link_token
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db

#: Session, the participant with its study (handed to the service, which reads it no more),
#: the lease (issue 48, ``services/assignment_sql.py``: the participant lock with the
#: lapse rule's counts, then the claim: on PostgreSQL choose, claim and insert in one
#: statement, on SQLite the claim and then the insert), and the pair's caption with its image.
GET_NEXT_QUERIES = {"postgresql": 5, "sqlite": 6}
#: Session, the participant with its study (handed to the service), the submission (issue 48,
#: ``services/judgment_sql.py``: participant, lease and item locked and read in one statement; the
#: pair's caption with its image and the pool's ratings, the mode's one read (``SCORED`` in
#: ``modes/vicr/protocol.py``; two before); then on PostgreSQL the insert and
#: the lease, item and participant updates in one statement, on SQLite one statement each); the view
#: builds the feedback (with the leaderboard) only to choose where to redirect (issue 42), and the
#: GET below builds it again. The leaderboard's standings are cached per study for a few seconds
#: (issue 48, ``modes/vicr/pages.py``): no query when cached, one on the study's first board
#: (``LEADERBOARD_MISS``, the first round's POST).
POST_SUBMIT_QUERIES = {"postgresql": 5, "sqlite": 8}
LEADERBOARD_MISS = 1
#: Session, the participant with its study, the lease's latest judgment with its item, the
#: pair's caption with its image; the leaderboard from the cache.
GET_FEEDBACK_QUERIES = 4

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')


def _counted(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN", "COMMIT"))
    ]


def test_next_and_submit_queries_are_pinned(client, researcher, monkeypatch):
    # The leaderboard's cache period, long: the counts must not depend on the machine's speed.
    monkeypatch.setattr("annotation.modes.vicr.pages.LEADERBOARD_SECONDS", 3600)
    study = vicr_study(researcher, game=12, seconds_before_submit=0)
    for _ in range(3):  # other players, so the pool and the leaderboard have rows
        play(in_game(study), 3)
    in_game(study, "P1")
    entry = client.get(reverse("crowd_entry", args=[crowd_link_token(study)]) + "?PROLIFIC_PID=P1")
    assert entry.status_code == 302
    url = reverse("participate_next", args=[study.public_id])
    for round_number in range(2):  # the second round: a worker with a submission behind
        with CaptureQueriesContext(connection) as shown:
            page = client.get(url)
        html = page.content.decode()
        assert page.status_code == 200 and FORM_ACTION.search(html), html[:500]
        lease = Assignment.objects.get(status="open", participant__external_id="P1")
        assert FORM_ACTION.search(html).group(1).endswith(f"/{lease.token}/")
        with CaptureQueriesContext(connection) as submitted:
            answer = client.post(FORM_ACTION.search(html).group(1), {"rating": "3", "part": "0"})
        feedback_url = reverse("participate_feedback", args=[study.public_id, lease.token])
        assert answer.status_code == 302 and answer["Location"] == feedback_url
        assert Judgment.objects.filter(assignment=lease).count() == 1
        with CaptureQueriesContext(connection) as fed_back:
            feedback = client.get(feedback_url)
        assert feedback.status_code == 200 and 'id="vicr-next"' in feedback.content.decode()
        get_sql, post_sql = _counted(shown), _counted(submitted)
        feedback_sql = _counted(fed_back)
        assert len(get_sql) == GET_NEXT_QUERIES[connection.vendor], (round_number, get_sql)
        first_board = LEADERBOARD_MISS if round_number == 0 else 0
        expected = POST_SUBMIT_QUERIES[connection.vendor] + first_board
        assert len(post_sql) == expected, (round_number, post_sql)
        assert len(feedback_sql) == GET_FEEDBACK_QUERIES, (round_number, feedback_sql)
