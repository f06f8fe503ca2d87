"""What a battle page shows of its image and captions, and the texts a gold battle is made
from, kept by the process (issue 48).

Every battle page read its two captions' texts and their image's row, a statement of its
own after the claim. A live study's captions and images never change through CapEval's
services: captions land only in a draft (``services/imports/store.py`` refuses a study
opened meanwhile), and no service edits a caption's text or an image's row. One path can:
Django's admin (``CaptionAdmin``, ``ImageAdmin``) edits and deletes them in any study, and
writes its own log row (``LogEntry``) in the same transaction as each change. So the page's
rows are kept per process, per image, stamped with the admin log as read before them
(``STAMP``, a part of the arena's one read before the claim, ``serving.WORKER_VIEW``), and a
page uses them only when the stamp its own request read is the same: any admin change
committed since they were read changes the stamp, and the page reads again.

The stamp is the log's largest id and the number of its rows among the ``STAMP_WINDOW`` ids
below it: the largest id alone would miss an admin change whose log row took a smaller id
but committed after a larger one (PostgreSQL hands ids out before commit); such a row, once
committed, changes the count. Only a change written outside the application (a SQL shell,
``manage.py shell``, and so also deleting the admin log's newest rows, which could bring an
earlier stamp back) is not seen until the process restarts, as with the study's system
pairs and captions that other caches here keep (``protocol.study_pairs``,
``catch.StudyCaptions``). No service deletes log rows: deleting a user in the admin, which
takes their rows, writes a newer one.

The battle is claimed after that read, so a page of an image the process had not shown since
the stamp still read its rows, a statement of its own (a quarter of the pages in the arena
bench). So the same read also reads every page row of the study when the process's are older
than its stamp, or it has none (``PAGES``, ``study_pages``): once per process and stamp, and
the page reads nothing, whatever image it shows. A study longer than ``MAX_PAGES_CHARS``, or
one that finds no room beside those kept at the same stamp, is shown from its images' own
reads, kept per image as below.

A request that read no stamp (a reload of a held battle, a refused answer shown again, a
preview) reads the rows as before and keeps nothing: only rows read after a stamp are known
to be as fresh as it. The process keeps at most ``MAX_CHARS`` characters of caption text
(least recently shown images go first), so a study of many detailed captions costs a
bounded amount of memory and its hot images stay.

A gold battle's draw (``gold.new_gold_item``, at an answer) read the texts of the two
captions it drew, after its own read (``serving.GOLD_VIEW``), which now reads the stamp too:
the study's texts are read once per process and stamp, and kept for ``MAX_STUDIES`` studies
of at most ``MAX_STUDY_CHARS`` characters each (a longer study's draws read their two texts,
as before). What a gold battle stores is made from them, so they are kept as the page's are.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.contrib.admin.models import LogEntry

from annotation.models import Caption, Image, Item, Participant, Study
from annotation.models.rows import columns, instance
from annotation.models.rows import cursor as _cursor
from annotation.modes import catch

LOG = LogEntry._meta.db_table
#: How far below the admin log's largest id a late commit is still seen (``STAMP``).
STAMP_WINDOW = 64
#: The part of the arena's reads before a claim and a gold draw (``serving.WORKER_VIEW``,
#: ``serving.GOLD_VIEW``) that reads the admin log's stamp: an ``'l'`` row, the log's largest
#: id, and an ``'n'`` row, how many of its rows lie within ``STAMP_WINDOW`` ids below it
#: (``stamp`` pairs them); each an index read of the log's primary key. No params.
STAMP = f"""SELECT 'l', COALESCE(MAX(l."id"), 0), NULL, NULL, NULL FROM "{LOG}" l
UNION ALL
SELECT 'n', COUNT(n."id"), NULL, NULL, NULL FROM "{LOG}" n
WHERE n."id" > (SELECT COALESCE(MAX(m."id"), 0) FROM "{LOG}" m) - {STAMP_WINDOW}"""


def stamp(rows) -> tuple[int, int] | None:
    """The stamp in a view's rows (its ``'l'`` and ``'n'`` rows), or None if not read."""
    found = {row[0]: int(row[1]) for row in rows if row[0] in ("l", "n")}
    return (found["l"], found["n"]) if len(found) == 2 else None


#: Every column of an image, its id first (the page hands the row to ``_image.html``).
IMAGE_FIELDS = ("id", *(f.attname for f in Image._meta.concrete_fields if f.attname != "id"))
#: A page's read when its image is not kept: every caption of the battle's image (the other
#: pairs' battles of the image show them too) and the two it shows, each with its image's
#: columns. Params: the battle's image id, the two caption ids.
SHOWN = f"""SELECT c."id", c."text", {columns("im", Image, IMAGE_FIELDS)}
FROM "{Caption._meta.db_table}" c JOIN "{Image._meta.db_table}" im ON im."id" = c."image_id"
WHERE c."image_id" = %s OR c."id" IN (%s, %s)"""

#: The caption text the process keeps at most, in characters (about as many bytes).
MAX_CHARS = 8_000_000
#: Where ``keep_stamp`` leaves a request's stamp on its locked participant.
_ATTRIBUTE = "_arena_admin_stamp"


@dataclass(frozen=True)
class Kept:
    """One image's page rows as read after ``stamp``: its row and its captions' texts."""

    stamp: tuple[int, int]
    image: Image
    texts: dict[int, str]
    chars: int


#: (study public id, image id) -> ``Kept``, least recently shown first. The public id is
#: random and never reused, unlike a test database's primary keys.
_KEPT: OrderedDict[tuple[str, int], Kept] = OrderedDict()
_chars = 0
#: ``_KEPT`` and ``_chars`` change together (a threaded server shows pages at once).
_LOCK = threading.Lock()


def keep_stamp(
    participant: Participant, stamp: tuple[int, int] | None, pages: StudyPages | None = None
) -> None:
    """Note on the request's participant the stamp ``STAMP`` read for it, and the study's
    page rows as fresh as that stamp (``study_pages``), if the process has them."""
    participant.__dict__[_ATTRIBUTE] = (stamp, pages)


def stamp_of(participant: Participant) -> tuple[int, int] | None:
    """The stamp this request read for ``participant``, or None."""
    return participant.__dict__.get(_ATTRIBUTE, (None, None))[0]


def pages_of(participant: Participant) -> StudyPages | None:
    """The study's page rows this request may show (read after its stamp), or None."""
    return participant.__dict__.get(_ATTRIBUTE, (None, None))[1]


def page_rows(
    study: Study,
    item: Item,
    first: int,
    second: int,
    stamp: tuple[int, int] | None,
    pages: StudyPages | None = None,
) -> tuple[dict[int, str], Image]:
    """The texts of captions ``first`` and ``second`` by id, and ``first``'s image: from
    ``pages`` (the study's rows as read after this request's stamp, ``study_pages``), or
    kept when the image's rows were read after ``stamp``, else read (and kept, after a
    stamp)."""
    if pages is not None and pages.stamp == stamp:
        image_id = pages.image_of.get(first)
        if image_id in pages.images and second in pages.texts:
            texts = {first: pages.texts[first], second: pages.texts[second]}
            return texts, copy.copy(pages.images[image_id])
    key = (str(study.public_id), item.image_id)
    usable = stamp is not None and study.status != Study.Status.DRAFT
    if usable:
        with _LOCK:
            kept = _KEPT.get(key)
            if kept is not None and kept.stamp == stamp:
                _KEPT.move_to_end(key)
            else:
                kept = None
        if kept is not None and first in kept.texts and second in kept.texts:
            return kept.texts, copy.copy(kept.image)
    with _cursor() as cursor:
        cursor.execute(SHOWN, [item.image_id, first, second])
        rows = cursor.fetchall()
    texts = {row[0]: row[1] for row in rows}
    images = {row[2]: row[2:] for row in rows}
    first_image = next(row[2] for row in rows if row[0] == first)
    image = instance(Image, IMAGE_FIELDS, images[first_image])
    if usable and first_image == item.image_id:
        own = {row[0]: row[1] for row in rows if row[2] == item.image_id}
        if second in own:
            _keep(key, Kept(stamp, image, own, sum(len(text) for text in own.values())))
            image = copy.copy(image)
    return texts, image


def _keep(key: tuple[str, int], kept: Kept) -> None:
    """Keep ``kept`` under ``key``, dropping the least recently shown beyond ``MAX_CHARS``."""
    global _chars
    with _LOCK:
        old = _KEPT.pop(key, None)
        if old is not None:
            _chars -= old.chars
        _KEPT[key] = kept
        _chars += kept.chars
        while _chars > MAX_CHARS and len(_KEPT) > 1:
            _chars -= _KEPT.popitem(last=False)[1].chars


#: Per vendor: an image's columns (``IMAGE_FIELDS``) as one JSON array, as text: so an
#: image is one row of the worker view's five columns (``PAGES``).
IMAGE_JSON = {
    "postgresql": "json_build_array({columns})::text",
    "sqlite": "json_array({columns})",
}
#: Whether the admin log's stamp (``STAMP``'s two values) is not the one the process's rows
#: were read after (params: its largest id and count; -1, -1 when none were read). No
#: column of the rows it filters: PostgreSQL works it out once per statement.
STALE = f"""((SELECT COALESCE(MAX(sl."id"), 0) FROM "{LOG}" sl) <> CAST(%s AS BIGINT)
  OR (SELECT COUNT(sn."id") FROM "{LOG}" sn
      WHERE sn."id" > (SELECT COALESCE(MAX(sm."id"), 0) FROM "{LOG}" sm) - {STAMP_WINDOW})
     <> CAST(%s AS BIGINT))"""
#: The part of the arena's read before a claim (``serving.WORKER_VIEW``) that reads every
#: page row of the study when the process's are older than the stamp read with them (or it
#: has none): an ``'i'`` row per image (its columns as ``IMAGE_JSON``) and a ``'t'`` row per
#: caption (its text and, as text, its image). The battle is claimed after this read, so the
#: page's image is not known yet: the study's rows are read, once per process and stamp,
#: rather than the page's after the claim, a statement of its own on a page whose image the
#: process had not shown (issue 48). One statement text whatever the process keeps.
#: ``{image_json}``: the vendor's ``IMAGE_JSON``. Params: study id and ``STALE``'s, twice.
PAGES = f"""SELECT 'i', im."id", {{image_json}}, NULL, NULL FROM "{Image._meta.db_table}" im
WHERE im."study_id" = %s AND {STALE}
UNION ALL
SELECT 't', c."id", c."text", NULL, CAST(c."image_id" AS TEXT)
FROM "{Caption._meta.db_table}" c
WHERE c."study_id" = %s AND {STALE}"""

#: The caption text the process keeps of whole studies' pages at most, in characters. A
#: study longer than this, or that finds no room beside the studies kept at the same stamp
#: (those are never dropped for it: two studies served in turn would read each other out
#: on every page), is shown from its images' own reads (``page_rows``), as before.
MAX_PAGES_CHARS = 8_000_000


@dataclass(frozen=True)
class StudyPages:
    """Every page row of a study as read after ``stamp``: its images, its captions' texts,
    and each caption's image."""

    stamp: tuple[int, int]
    images: dict[int, Image]
    texts: dict[int, str]
    image_of: dict[int, int]
    chars: int


#: Study public id -> its ``StudyPages``, least recently served first.
_PAGES: OrderedDict[str, StudyPages] = OrderedDict()
_pages_chars = 0
#: Study public id -> the stamp at which it found no room (re-read once the stamp changes),
#: or None: longer than ``MAX_PAGES_CHARS`` (never read whole again by this process).
_TOO_LONG: dict[str, tuple[int, int] | None] = {}
#: What ``pages_params`` passes for "nothing kept": no stamp is this.
_NONE = (-1, -1)


def pages_part(vendor: str) -> str:
    """``PAGES`` as ``vendor`` runs it."""
    image_json = IMAGE_JSON[vendor].format(columns=columns("im", Image, IMAGE_FIELDS))
    return PAGES.format(image_json=image_json)


def pages_params(study: Study) -> tuple[list, tuple[int, int], StudyPages | None] | None:
    """``PAGES``' params for ``study``, the stamp they name and the rows kept at that stamp
    (None: none); None when the study's pages are not read whole (a draft, too long)."""
    key = str(study.public_id)
    if study.status == Study.Status.DRAFT:
        return None
    with _LOCK:
        if key in _TOO_LONG:
            if _TOO_LONG[key] is None:
                return None
            kept, since = None, _TOO_LONG[key]
        else:
            kept = _PAGES.get(key)
            since = kept.stamp if kept is not None else _NONE
    return [study.pk, *since, study.pk, *since], since, kept


def study_pages(
    study: Study,
    stamp: tuple[int, int] | None,
    rows,
    since: tuple[int, int],
    kept: StudyPages | None,
) -> StudyPages | None:
    """The study's page rows as fresh as ``stamp`` (the one read with ``rows``, the worker
    view's): those kept, if the stamp is still ``since``; else those in ``rows``, kept if
    they fit. None when the process has none to show (the page then reads its own)."""
    if stamp is None:
        return None
    key = str(study.public_id)
    if stamp == since:
        if kept is not None:
            with _LOCK:
                if _PAGES.get(key) is kept:
                    _PAGES.move_to_end(key)
        return kept
    images: dict[int, Image] = {}
    texts: dict[int, str] = {}
    image_of: dict[int, int] = {}
    for what, number, value, _, image in rows:
        if what == "i":
            images[number] = instance(Image, IMAGE_FIELDS, json.loads(value))
        elif what == "t":
            texts[number] = value
            image_of[number] = int(image)
    pages = StudyPages(stamp, images, texts, image_of, sum(len(text) for text in texts.values()))
    return pages if _keep_pages(key, pages) else None


def _keep_pages(key: str, pages: StudyPages) -> bool:
    """Keep ``pages`` under ``key`` if they fit (``MAX_PAGES_CHARS``), first dropping the
    studies kept at another stamp, then no other; whether they were kept."""
    global _pages_chars
    with _LOCK:
        old = _PAGES.pop(key, None)
        if old is not None:
            _pages_chars -= old.chars
        if pages.chars > MAX_PAGES_CHARS:
            _TOO_LONG[key] = None
            return False
        for other in [k for k, kept in _PAGES.items() if kept.stamp != pages.stamp]:
            if _pages_chars + pages.chars <= MAX_PAGES_CHARS:
                break
            _pages_chars -= _PAGES.pop(other).chars
        if _pages_chars + pages.chars > MAX_PAGES_CHARS:
            _TOO_LONG[key] = pages.stamp
            return False
        _TOO_LONG.pop(key, None)
        _PAGES[key] = pages
        _pages_chars += pages.chars
        return True


def forget() -> None:
    """Drop every kept row and text (tests: as if the process had just started)."""
    global _chars, _pages_chars
    with _LOCK:
        _KEPT.clear()
        _chars = 0
        _STUDY_TEXTS.clear()
        _PAGES.clear()
        _pages_chars = 0
        _TOO_LONG.clear()


#: Every text of a study's own captions, which a gold battle's source and T_RC text are
#: drawn from (``gold.new_gold_item``). Params: study id.
STUDY_TEXTS = f"""SELECT c."id", c."text" FROM "{Caption._meta.db_table}" c
WHERE c."study_id" = %s AND c."purpose" = 'study'"""
#: A study whose texts are longer than this (in characters) is not kept: its draws read
#: their two texts, as every draw did before.
MAX_STUDY_CHARS = 8_000_000
#: How many studies' texts the process keeps (least recently drawn from go first).
MAX_STUDIES = 2
#: (``catch.StudyCaptions.key``, stamp) -> the texts by caption id, or None: too long.
_STUDY_TEXTS: OrderedDict[tuple, dict[int, str] | None] = OrderedDict()
_MISSING = object()


def caption_texts(key: tuple, stamp: tuple[int, int] | None, *rows: tuple | None) -> dict[int, str]:
    """``catch.caption_texts(*rows)``: the texts of the captions whose ids lead ``rows``, from
    the study's texts as read after ``stamp`` (``key``: ``catch.StudyCaptions.key``, which
    names the study's set of captions), read once per process, study and stamp."""
    ids = [row[0] for row in rows if row is not None]
    if stamp is None:
        return catch.caption_texts(*rows)
    full = (*key, stamp)
    with _LOCK:
        texts = _STUDY_TEXTS.get(full, _MISSING)
        if texts is not _MISSING:
            _STUDY_TEXTS.move_to_end(full)
    if texts is _MISSING:
        with _cursor() as cursor:
            cursor.execute(STUDY_TEXTS, [key[0]])
            read = dict(cursor.fetchall())
        texts = read if sum(len(text) for text in read.values()) <= MAX_STUDY_CHARS else None
        with _LOCK:
            _STUDY_TEXTS[full] = texts
            while len(_STUDY_TEXTS) > MAX_STUDIES:
                _STUDY_TEXTS.popitem(last=False)
        texts = read  # this draw's, kept or not
    if texts is None or any(i not in texts for i in ids):
        return catch.caption_texts(*rows)
    return {i: texts[i] for i in ids}
