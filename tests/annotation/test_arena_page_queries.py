"""The queries of an arena worker's battle page (GET next), pinned as ``test_request_queries``
pins VICR's: each costs the web worker its ORM building, so a new one must be a decision.

A crowd worker who entered through the signed link, uniform pairing, their second battle
claimed after answering the first (the first page also reads the study's system pairs,
once per process). No gold battles (``catch_rate`` 0), so the second battle is a system
battle whatever the seeded draw; a gold one is drawn at submit, not here. Transaction
statements are not counted.
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment
from annotation.services.participants import crowd_link_token
from tests.annotation.test_request_queries import _counted
from tests.factories.arena import arena_study

pytestmark = pytest.mark.django_db

#: Session, the participant with its study; the lease: participant lock, leases, the lapse
#: rule, the network's open leases, a reserved gold battle, the worker's history, the pairs
#: still open, candidate lock, claim, item, insert; the page: both captions with the image.
GET_NEXT_QUERIES = 14

#: The page's answer form (the only POST form a battle page has).
FORM_ACTION = re.compile(r'<form method="post" action="([^"]+/submit/[^"]*)"')


def test_the_battle_page_queries_are_pinned(client, researcher):
    study = arena_study(researcher, images=8, catch_rate=0, min_seconds=0)
    entry = client.get(reverse("crowd_entry", args=[crowd_link_token(study)]) + "?PROLIFIC_PID=W1")
    assert entry.status_code == 302
    url = reverse("participate_next", args=[study.public_id])
    first = client.get(url).content.decode()
    answered = client.post(FORM_ACTION.search(first).group(1), {"outcome": "tie", "part": "0"})
    assert answered.status_code == 302
    with CaptureQueriesContext(connection) as shown:
        page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and FORM_ACTION.search(html), html[:500]
    lease = Assignment.objects.get(status="open", participant__external_id="W1")
    assert FORM_ACTION.search(html).group(1).endswith(f"/{lease.token}/")
    sql = _counted(shown)
    assert len(sql) == GET_NEXT_QUERIES, sql
