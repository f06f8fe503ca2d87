"""Issue 45, row 7: what a participant posts is checked once, for every mode, before a mode
reads it.

The attack: a worker's answer made a 500 (a 10,000-deep JSON list in a spans answer ran
``json`` out of recursion; a ``\\u0000`` in a span note reached PostgreSQL, which refuses
NUL in ``jsonb``). Each test posts through the real participant views with an annotator's
session, for every registered mode (the registry is iterated, so a new mode is attacked
too), into every field its item page has; each refusal must be a 400 naming the field,
with nothing stored and the lease still open. Run on SQLite and on PostgreSQL (the NUL
only fails there).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Caption, Judgment
from annotation.registry import MODES, get_mode, mode_names
from annotation.services.participants import participant_declare_vision
from annotation.services.studies import study_create
from tests.factories.arena import arena_study
from tests.factories.context import context_study
from tests.factories.humanr import humanr_study
from tests.factories.spans import spans_study
from tests.factories.thumb import member, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db


def _thumb(owner):
    def make(mode, *, settings=None, seed=0):
        return study_create(owner=owner, name="THumB", mode=mode, settings=settings, seed=seed)

    return thumb_study(make)


# One live study per registered mode; a mode registered without a builder fails below.
BUILDERS = {
    "thumb": _thumb,
    "vicr": vicr_study,
    "humanr": humanr_study,
    "arena": arena_study,
    "spans": spans_study,
    "context": context_study,
}

DEEP = "[" * 10_000 + "]" * 10_000
# (what, posted value, words the refusal must hold)
ATTACKS = [
    ("a NUL", "a\x00b", "U+0000"),
    ("a right-to-left override", "gnp\u202eexe", "U+202E"),
    ("a 10,000-deep JSON list", DEEP, "nested too deeply"),
    ("NUL escaped in JSON", json.dumps([{"note": "\x00"}]), "U+0000"),
    ("a lone surrogate escaped in JSON", '[{"note": "\\ud800"}]', "U+D800"),
    ("deep JSON inside an object", '{"spans": ' + DEEP + "}", "nested too deeply"),
]


class _FieldNames(HTMLParser):
    """The names of the controls of the page's submission form."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag in {"input", "select", "textarea", "button"} and attributes.get("name"):
            self.names.append(attributes["name"])


def form_fields(html: str) -> list[str]:
    """One field of each kind the page posts (``span-0-note`` for ``span-<n>-note``)."""
    parser = _FieldNames()
    parser.feed(html)
    kinds: dict[str, str] = {}
    for name in parser.names:
        kinds.setdefault(re.sub(r"\d+", "0", name), name)
    return [name for name in kinds.values() if name != "csrfmiddlewaretoken"]


def leased(study, user):
    """A client of ``user`` (an annotator of ``study``) shown its first item."""
    participant = member(study, user)
    if get_mode(study.mode).asks_vision:  # the vision question comes before any item
        participant_declare_vision(participant, vision="sighted", screen_reader=False, consent=True)
    client = Client()
    client.force_login(user)
    page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.status_code == 200
    lease = page.context["assignment"]
    url = reverse("participate_submit", args=[study.public_id, lease.token])
    return client, url, lease, page.content.decode()


def assert_refused(page, field, words, what):
    assert page.status_code == 400, (what, field, page.status_code)
    named = {problem["field"]: problem["message"] for problem in page.context["field_errors"]}
    assert field in named, (what, field, named)
    assert words in named[field], (what, field, named[field])
    assert "Traceback" not in page.content.decode()


def served_modes() -> list[str]:
    """Every registered mode but the tests' own (test_exports' ``test-default``, the
    vehicle of ``tests/factories/``, a test-only mode app): their item pages are the tests',
    and whether some are registered depends on which modules the run collected."""
    return [name for name in mode_names() if not type(MODES[name]).__module__.startswith("tests.")]


def test_every_registered_mode_has_a_builder_here():
    assert set(BUILDERS) == set(served_modes())


@pytest.mark.parametrize("mode", served_modes())
def test_every_field_of_every_mode_refuses_nul_bidi_and_deep_json(mode, researcher, annotator):
    study = BUILDERS[mode](researcher)
    client, url, lease, html = leased(study, annotator)
    fields = form_fields(html)
    assert len(fields) >= 2, fields  # the page has a form (and "part")

    for field in fields:
        for what, value, words in ATTACKS:
            body = {"part": "0", field: value}
            page = client.post(url, body)
            assert_refused(page, field, words, what)
    # A field name the page never had is checked as well (modes read names too).
    page = client.post(url, {"part": "0", "x\x00y": "1"})
    assert page.status_code == 400
    assert any("U+0000" in p["message"] for p in page.context["field_errors"])

    assert not Judgment.objects.filter(study=study).exists()
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.OPEN


def spans_lease(researcher, annotator):
    study = spans_study(researcher, systems=("alpha",), images=1)
    client, url, lease, _ = leased(study, annotator)
    text = Caption.objects.get(pk=lease.item.spec["caption"]).text
    return study, client, url, text


def mark(text, words, **extra):
    start = text.index(words)
    end = start + len(words)
    return {"start": start, "end": end, "text": words, "severity": "major", **extra}


def test_the_issues_spans_answers_are_400s_naming_the_field(researcher, annotator):
    study, client, url, text = spans_lease(researcher, annotator)
    dog = mark(text, "dog", category="object")

    deep = client.post(url, {"part": "0", "spans": DEEP, "score": "50"})
    assert_refused(deep, "spans", "nested too deeply", "deep list")
    # A well-formed mark whose note holds NUL: PostgreSQL's jsonb refuses it (DataError).
    nul = client.post(url, {"part": "0", "spans": json.dumps([{**dog, "note": "a\x00"}])})
    assert_refused(nul, "spans", "U+0000", "NUL note")
    assert "spans[0].note" in nul.context["field_errors"][0]["message"]
    # The same without JavaScript: the note's own field.
    row = {f"span-0-{key}": str(value) for key, value in dog.items() if key != "text"}
    plain = client.post(url, {"part": "0", "score": "50", **row, "span-0-note": "a\x00"})
    assert_refused(plain, "span-0-note", "U+0000", "NUL note without JavaScript")
    assert not Judgment.objects.filter(study=study).exists()

    # What people write is not refused: brackets, quotes, tabs and line breaks in a note.
    note = 'says "red" [sic]\n\t(see [the [sofa]])'
    good = client.post(
        url, {"part": "0", "score": "50", "spans": json.dumps([{**dog, "note": note}])}
    )
    assert good.status_code == 302, good.content.decode()[:2000]
    stored = Judgment.objects.get(study=study)
    assert stored.payload["spans"][0]["note"] == note
