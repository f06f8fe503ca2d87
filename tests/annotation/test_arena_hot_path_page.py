"""The battle page's rows kept by the process (``modes/arena/shown.py``, issue 48): the page
is the one its own read gave, and a caption or image the admin changed is never shown as it
was. The query counts are pinned in ``test_arena_page_queries.py``."""

import json
import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.forms.models import model_to_dict
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, Caption, Image, Item
from annotation.modes import catch, get_mode
from annotation.modes.arena import serving, shown
from annotation.modes.arena.protocol import battle_captions
from annotation.services.participants import crowd_link_token
from tests.factories.arena import arena_study, serve_gold, worker

pytestmark = pytest.mark.django_db

FORM_ACTION = re.compile(r'<form method="post" action="([^"]+/submit/[^"]*)"')
#: The page's CSRF tokens: masked afresh on every render.
TOKENS = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+')

#: The page's read before ``shown`` (``pages.SHOWN``): both captions' texts, each with its
#: image's columns.
OLD_SHOWN = f"""SELECT c."id", c."text", {", ".join(f'im."{n}"' for n in shown.IMAGE_FIELDS)}
FROM "{Caption._meta.db_table}" c JOIN "{Image._meta.db_table}" im ON im."id" = c."image_id"
WHERE c."id" IN (%s, %s)"""


def _old_rows(first, second):
    """What the old read gave: the texts by id, and ``first``'s image's columns."""
    with connection.cursor() as cursor:
        cursor.execute(OLD_SHOWN, [first, second])
        rows = cursor.fetchall()
    image = next(row[2:] for row in rows if row[0] == first)
    return {row[0]: row[1] for row in rows}, image


def _image_columns(image):
    return tuple(getattr(image, name) for name in shown.IMAGE_FIELDS)


def _enter(client, study, name):
    link = reverse("crowd_entry", args=[crowd_link_token(study)]) + f"?PROLIFIC_PID={name}"
    assert client.get(link).status_code == 302


def _page(client, study):
    """The worker's battle page (GET next) and the page's own reads of its rows
    (``shown.SHOWN``; the study's, ``shown.PAGES``, are a part of the mode's one read)."""
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.status_code == 200, page.content[:300]
    sql = [q["sql"] or "" for q in queries.captured_queries]
    reads = [q for q in sql if q.lstrip().startswith('SELECT c."id", c."text"')]
    return page.content.decode(), reads


def test_the_kept_rows_are_what_the_old_read_gave(researcher):
    """Every battle and a gold battle: texts and image as the read before ``shown``, whether
    the rows were kept or read."""
    study = arena_study(researcher, images=3, catch_rate=0.5, catch_min_seen=1)
    person = worker(study, "kept-1")
    stamp = serving.worker_view(person).stamp
    items = list(Item.objects.filter(study=study))
    shown.forget()
    read = set()
    for _ in range(2):  # an image's first battle reads and keeps; its others are kept
        for item in items:
            first, second = battle_captions(item)
            with CaptureQueriesContext(connection) as queries:
                texts, image = shown.page_rows(study, item, first, second, stamp)
            assert len(queries.captured_queries) == (item.image_id not in read)
            read.add(item.image_id)
            old_texts, old_image = _old_rows(first, second)
            assert (texts[first], texts[second]) == (old_texts[first], old_texts[second])
            assert _image_columns(image) == old_image
    # A gold battle (its real caption on both sides, its image that caption's).
    lease = serve_gold(person)
    first, second = battle_captions(lease.item)
    texts, image = shown.page_rows(study, lease.item, first, second, shown.stamp_of(person))
    old_texts, old_image = _old_rows(first, second)
    assert texts[first] == old_texts[first] and _image_columns(image) == old_image


def test_a_battle_page_is_the_same_kept_or_read(client, researcher):
    """The HTML of one served battle, from kept rows (served fresh) and from a read (the same
    lease reloaded: no stamp, so the page reads), is the same but for the CSRF tokens."""
    study = arena_study(researcher, images=1, catch_rate=0)
    first = Client()
    _enter(first, study, "same-0")
    _page(first, study)  # shows the image: the process keeps its rows
    _enter(client, study, "same-1")
    kept, kept_reads = _page(client, study)
    read, reads = _page(client, study)
    assert not kept_reads and len(reads) == 1, (kept_reads, reads)
    assert TOKENS.sub(r"\1", kept) == TOKENS.sub(r"\1", read)
    lease = Assignment.objects.get(participant__external_id="same-1")
    texts = Caption.objects.filter(pk__in=battle_captions(lease.item)).values_list(
        "text", flat=True
    )
    assert all(text in kept for text in texts)


def _admin_save(admin, obj, **changed):
    """Save ``obj`` through its admin change form with ``changed`` fields."""
    data = model_to_dict(obj)
    for name, value in data.items():
        if isinstance(value, dict | list):
            data[name] = json.dumps(value)
    data.update(changed, _save="Save")
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    response = admin.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]


def test_an_admin_change_is_never_shown_as_it_was(client, researcher, make_user):
    """A worker is shown an image (kept), a second is served it kept; the admin then edits
    the image's alt text and its captions' texts; a third is shown the new ones, read again
    with the stamp (``shown.PAGES``, in the mode's one read)."""
    study = arena_study(researcher, images=1, catch_rate=0)
    image = Image.objects.get(study=study)
    before = {c.pk: c.text for c in Caption.objects.filter(image=image)}
    clients = [Client(), Client(), client]
    for n, browser in enumerate(clients):
        _enter(browser, study, f"stale-{n}")
    _page(clients[0], study)
    page, reads = _page(clients[1], study)
    assert not reads and image.alt_text in page  # kept: the cache is in use
    admin = Client()
    admin.force_login(make_user("root", staff=True))
    _admin_save(admin, image, alt_text="Edited alt text")
    for caption in Caption.objects.filter(image=image):
        _admin_save(admin, caption, text=f"Edited caption {caption.pk} reads differently.")
    page, reads = _page(clients[2], study)
    assert not reads, reads
    assert "Edited alt text" in page and image.alt_text not in page
    lease = Assignment.objects.get(participant__external_id="stale-2")
    for caption_id in battle_captions(lease.item):
        assert f"Edited caption {caption_id} reads differently." in page
        assert before[caption_id] not in page


def _log(pk, user):
    LogEntry.objects.create(
        pk=pk,
        user=user,
        content_type=ContentType.objects.get_for_model(Caption),
        object_id="1",
        object_repr="caption",
        action_flag=CHANGE,
    )


def test_the_stamp_sees_an_admin_change_that_commits_after_a_later_one(researcher, make_user):
    """On PostgreSQL an admin change's log row can take an id below one that commits first:
    it must still change the stamp when it commits. Its row missing, then present, below the
    largest id, stands for it."""
    study = arena_study(researcher, images=1, catch_rate=0)
    person = worker(study)
    root = make_user("root", staff=True)
    _log(1000, root)
    _log(1002, root)
    waiting = serving.worker_view(person).stamp
    _log(1001, root)  # commits after 1002
    committed = serving.worker_view(person).stamp
    assert waiting != committed and committed[0] == waiting[0] == 1002
    _log(1003, root)
    assert serving.worker_view(person).stamp != committed
    # Far below (more than the window of ids): not seen; the module says why that is safe.
    _log(1003 - shown.STAMP_WINDOW, root)
    assert serving.worker_view(person, get_mode("arena").study_pairs(study)).stamp[0] == 1003


def test_the_kept_rows_are_bounded(researcher, monkeypatch):
    """Beyond ``MAX_CHARS`` of caption text the least recently shown images are dropped."""
    study = arena_study(researcher, images=4, catch_rate=0)
    stamp = serving.worker_view(worker(study)).stamp
    battles = {}
    for item in Item.objects.filter(study=study).order_by("position"):
        battles.setdefault(item.image_id, item)
    per_image = {
        image: sum(
            len(t) for t in Caption.objects.filter(image_id=image).values_list("text", flat=True)
        )
        for image in battles
    }
    monkeypatch.setattr(shown, "MAX_CHARS", sum(sorted(per_image.values())[-2:]))
    shown.forget()
    order = list(battles)
    for image in [*order[:2], order[0], *order[2:]]:  # the first image shown again
        item = battles[image]
        shown.page_rows(study, item, *battle_captions(item), stamp)
    assert shown._chars <= shown.MAX_CHARS
    kept = [image for (_, image) in shown._KEPT]
    assert kept[-1] == order[-1] and order[1] not in kept and len(kept) <= 2


def _texts_with_reads(key, stamp, *rows):
    """``shown.caption_texts``' answer and how many statements it ran."""
    texts, reads = _texts_with_sql(key, stamp, *rows)
    return texts, len(reads)


def _texts_with_sql(key, stamp, *rows):
    with CaptureQueriesContext(connection) as queries:
        texts = shown.caption_texts(key, stamp, *rows)
    return texts, [q["sql"] for q in queries.captured_queries]


def test_a_gold_draws_texts_are_the_captions_and_follow_an_admin_change(researcher, make_user):
    """The texts a gold battle is made from: the captions' own (as ``catch.caption_texts``
    read them for every draw), read once per process and stamp, read again after an admin
    change; a study longer than ``MAX_STUDY_CHARS`` reads its two texts per draw."""
    study = arena_study(researcher, images=3, catch_rate=0.2)
    person = worker(study)
    view = serving.gold_view(person)
    key = catch.study_captions_counted(study, *view.captions).key
    rows = list(catch.study_captions(study).with_text)
    shown.forget()
    for n, (row, other) in enumerate(zip(rows, [*rows[1:], None], strict=True)):
        texts, reads = _texts_with_reads(key, view.stamp, row, other)
        assert texts == catch.caption_texts(row, other) and reads == (n == 0)
    admin = Client()
    admin.force_login(make_user("root", staff=True))
    edited = Caption.objects.get(pk=rows[0][0])
    _admin_save(admin, edited, text="An edited caption of the study.")
    after = serving.gold_view(person)
    assert after.stamp != view.stamp
    texts, reads = _texts_with_reads(key, after.stamp, rows[0], None)
    assert texts == {rows[0][0]: "An edited caption of the study."} and reads == 1
    # Too long to keep: this draw's read serves it; the next reads its two texts.
    shown.forget()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shown, "MAX_STUDY_CHARS", 1)
        for every in (True, False):  # the study's texts, then only the two
            texts, reads = _texts_with_sql(key, after.stamp, rows[1], rows[2])
            assert texts == catch.caption_texts(rows[1], rows[2]) and len(reads) == 1
            assert ("'study'" in reads[0]) == every, reads
    # No stamp read (not through ``GOLD_VIEW``): the two texts, read.
    texts, reads = _texts_with_reads(key, None, rows[1], rows[2])
    assert texts == catch.caption_texts(rows[1], rows[2]) and reads == 1
