"""A battle page whose image the process has not shown (issue 48): the study's page rows come
with the mode's one read before the claim (``modes/arena/shown.py``, ``PAGES``), so the page
reads nothing of its own, and shows what its own read (``shown.SHOWN``) would have."""

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, Caption, Item
from annotation.modes import get_mode
from annotation.modes.arena import serving, shown
from annotation.modes.arena.protocol import battle_captions
from annotation.services.participants import crowd_link_token
from tests.annotation.test_arena_hot_path_page import _image_columns, _old_rows
from tests.annotation.test_request_queries import _counted
from tests.factories.arena import arena_study, serve_gold, worker

pytestmark = pytest.mark.django_db

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+/submit/[^"]*)"')
#: The page's CSRF tokens: masked afresh on every render.
TOKENS = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+')
#: A GET next's statements, the session's included (``test_arena_page_queries``).
GET_NEXT = {"postgresql": 5, "sqlite": 6}


def _enter(client, study, name):
    link = reverse("crowd_entry", args=[crowd_link_token(study)]) + f"?PROLIFIC_PID={name}"
    assert client.get(link).status_code == 302


def _get(client, study):
    """GET next: the HTML and the statements counted (no transaction statements)."""
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("participate_next", args=[study.public_id]))
    html = page.content.decode()
    assert page.status_code == 200 and FORM_ACTION.search(html), html[:500]
    return html, _counted(queries)


def _own_reads(sql):
    """The page's own reads of its image and captions (``shown.SHOWN``)."""
    return [q for q in sql if q.lstrip().startswith('SELECT c."id", c."text"')]


def _post(client, html):
    action = FORM_ACTION.search(html).group(1)
    assert client.post(action, {"outcome": "tie", "part": "0"}).status_code == 302


def test_a_first_page_of_an_image_makes_four_statements_besides_the_session(client, researcher):
    """A process that kept no page rows (``shown.forget``: as if just started): a worker's
    pages, each of an image the process has not shown, make the statements of a kept page;
    on PostgreSQL at most 4 besides the session's. (Another worker's page first: the study's
    system pairs and the progress line's count are read once per process, not per image.)"""
    study = arena_study(researcher, images=3, catch_rate=0, min_seconds=0)
    other = Client()
    _enter(other, study, "first-other")
    _get(other, study)
    _enter(client, study, "first-0")
    shown.forget()
    images = set()
    for _ in range(3):
        html, sql = _get(client, study)
        lease = Assignment.objects.get(status="open", participant__external_id="first-0")
        assert lease.item.image_id not in images  # an image this process has not shown
        images.add(lease.item.image_id)
        assert not _own_reads(sql), sql
        assert len(sql) == GET_NEXT[connection.vendor], "\n\n".join(q[:200] for q in sql)
        if connection.vendor == "postgresql":
            assert len(sql) - 1 <= 4, sql
        _post(client, html)
        shown.forget()  # and again: a fresh process for every page


def test_a_first_page_is_the_page_its_own_read_gives(client, researcher):
    """The HTML of a battle from the study's rows (served in a fresh process) and from the
    page's own read (the same lease reloaded: no stamp, so the page reads as before ``PAGES``)
    is the same but for the CSRF tokens, and shows the captions' texts."""
    study = arena_study(researcher, images=2, catch_rate=0, min_seconds=0)
    _enter(client, study, "same-0")
    for _ in range(2):
        shown.forget()
        fresh, fresh_sql = _get(client, study)
        reloaded, reload_sql = _get(client, study)
        assert not _own_reads(fresh_sql) and len(_own_reads(reload_sql)) == 1
        assert TOKENS.sub(r"\1", fresh) == TOKENS.sub(r"\1", reloaded)
        lease = Assignment.objects.get(status="open", participant__external_id="same-0")
        texts, _ = _old_rows(*battle_captions(lease.item))
        assert all(text in fresh for text in texts.values())
        _post(client, fresh)


def test_the_study_rows_are_what_the_old_read_gave(researcher):
    """Every battle of a study and a gold battle: texts and image from the study's rows read
    with the stamp as from the read before ``shown``."""
    study = arena_study(researcher, images=3, catch_rate=0.5, catch_min_seen=1)
    person = worker(study, "rows-1")
    shown.forget()
    view = serving.worker_view(person, pages=True)
    assert view.pages is not None and view.pages.stamp == view.stamp
    items = list(Item.objects.filter(study=study))
    lease = serve_gold(person)
    for item in [*items, lease.item]:
        first, second = battle_captions(item)
        with CaptureQueriesContext(connection) as queries:
            texts, image = shown.page_rows(study, item, first, second, view.stamp, view.pages)
        assert not queries.captured_queries
        old_texts, old_image = _old_rows(first, second)
        assert (texts[first], texts[second]) == (old_texts[first], old_texts[second])
        assert _image_columns(image) == old_image
        if item.kind == "catch":
            assert texts[first] == old_texts[first]


def _view_sql(person, pairs):
    """The worker view's statement and what it read of the study's page rows."""
    with CaptureQueriesContext(connection) as queries:
        view = serving.worker_view(person, pairs, pages=True)
    (sql,) = [q["sql"] for q in queries.captured_queries]
    return view, sql


def test_the_study_rows_are_read_once_per_stamp_in_one_statement_text(researcher):
    """The worker view reads the study's rows when the process has none at its stamp, then
    none; the statement's text is the same either way (prepared on PostgreSQL: only its
    params say what the process keeps)."""
    study = arena_study(researcher, images=2, catch_rate=0)
    person = worker(study)
    pairs = get_mode("arena").study_pairs(study)
    shown.forget()
    statement = serving._statement(connection.vendor, len(pairs), True)
    first, _ = _view_sql(person, pairs)
    again, _ = _view_sql(person, pairs)
    assert first.pages is not None and again.pages is first.pages
    assert len(first.pages.images) == 2 and len(first.pages.texts) == 6
    assert serving._statement(connection.vendor, len(pairs), True) is statement
    with connection.cursor() as cursor:  # what the process keeps: nothing read again
        params = serving.worker_view_params(person, pairs) + shown.pages_params(study)[0]
        cursor.execute(statement, params)
        assert not [row for row in cursor.fetchall() if row[0] in ("i", "t")]


def test_a_study_too_long_to_keep_is_read_per_image(client, researcher, monkeypatch):
    """A study longer than ``MAX_PAGES_CHARS``: read whole once, kept never; its pages read
    their own rows, as before ``PAGES``, and the worker view no longer asks for them."""
    study = arena_study(researcher, images=2, catch_rate=0, min_seconds=0)
    monkeypatch.setattr(shown, "MAX_PAGES_CHARS", 10)
    shown.forget()
    _enter(client, study, "long-0")
    html, sql = _get(client, study)
    assert len(_own_reads(sql)) == 1 and any("'t', c." in q for q in sql), sql
    _post(client, html)
    html, sql = _get(client, study)
    assert len(_own_reads(sql)) == 1 and not any("'t', c" in q for q in sql), sql
    assert not shown._PAGES and {str(study.public_id): None} == shown._TOO_LONG


def test_a_study_kept_at_the_stamp_is_never_dropped_for_another(researcher, monkeypatch):
    """Two studies that do not fit together: the second is shown from its images' reads
    while the first is kept at the same stamp (read in turn, each would drop the other on
    every page); once the stamp changes, the older rows go first."""
    studies = [arena_study(researcher, images=1, catch_rate=0) for _ in range(2)]
    people = [worker(study) for study in studies]
    shown.forget()
    chars = [
        sum(
            len(text) for text in Caption.objects.filter(study=study).values_list("text", flat=True)
        )
        for study in studies
    ]
    monkeypatch.setattr(shown, "MAX_PAGES_CHARS", max(chars))  # one study fits, not two
    first = serving.worker_view(people[0], pages=True)
    assert first.pages.chars == chars[0]
    second = serving.worker_view(people[1], pages=True)
    assert second.pages is None and list(shown._PAGES) == [str(studies[0].public_id)]
    assert serving.worker_view(people[0], pages=True).pages is first.pages
    # An admin change (the log): the first study's rows are stale, the second's may come in.
    LogEntry.objects.create(
        user=researcher,
        content_type=ContentType.objects.get_for_model(Caption),
        object_id="1",
        object_repr="caption",
        action_flag=CHANGE,
    )
    again = serving.worker_view(people[1], pages=True)
    assert again.pages is not None and again.stamp != first.stamp
    assert list(shown._PAGES) == [str(studies[1].public_id)]
    assert shown._pages_chars == again.pages.chars
