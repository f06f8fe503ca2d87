"""A worker's first claim in each mode takes the written-out candidate (issue 48).

``assignments._claim_fresh`` writes the candidate query out around the mode's own WHERE when
the mode's eligible items are one table's filter, and lets the ORM build it otherwise. The
fast path once never ran at all (a filter on ``study_id`` leaves an unused join in the
query, and the check counted it), so the serve cost what it did before while every test
passed: these tests require the written-out statement in the queries of a real first serve
in every mode whose filter is one table's, and that it finds the item the ORM would.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.registry import get_mode
from annotation.services import assignment_sql
from annotation.services.assignments import assignment_next
from tests.factories.arena import arena_study
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.spans import spans_study
from tests.factories.thumb import thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

#: A piece of ``FRESH_CANDIDATE`` no ORM-built query contains (its own table alias).
MARK = 'SELECT 1 FROM "annotation_assignment" m'


#: Each mode's study as the tests' factories build it, by the name the test is run for.
STUDIES = {
    "vehicle": lambda researcher, make_study: vehicle_study(researcher),
    "VICR": lambda researcher, make_study: vicr_study(researcher),
    "arena": lambda researcher, make_study: arena_study(researcher, catch_rate=0),
    "spans": lambda researcher, make_study: spans_study(researcher),
    "THumB": lambda researcher, make_study: thumb_study(make_study),
}


@pytest.mark.parametrize("name", list(STUDIES))
def test_the_first_serve_runs_the_written_out_candidate(researcher, make_study, name):
    study = STUDIES[name](researcher, make_study)
    person = crowd_participant(study, f"w-fresh-{name}")
    mode = get_mode(study.mode)
    assert assignment_sql.eligible_where(mode.eligible_items(person)) is not None

    with CaptureQueriesContext(connection) as seen:
        lease = assignment_next(participant=person)

    assert lease is not None and lease.participant_id == person.pk
    assert sum(MARK in query["sql"] for query in seen.captured_queries) == 1


def test_a_filter_across_a_join_is_left_to_the_orm(researcher):
    study = vehicle_study(researcher)
    items = get_mode(study.mode).eligible_items(crowd_participant(study, "w-join"))
    assert assignment_sql.eligible_where(items.filter(study__status="live")) is None
    assert assignment_sql.eligible_where(items.none()) == assignment_sql.NOTHING
