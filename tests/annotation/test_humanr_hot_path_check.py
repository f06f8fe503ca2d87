"""Issue 48: a HUMANr attention check's page and answer in as few statements as any trial's.

The page took the check's captions from a read of their own after the draw's read; they
are now read with the study's human captions, once per process (``checks.StudyCaptions``),
and the previous answer's time comes with the lease's answers. The answer drew the check
again (a read of the worker's leases); the page's form now says what it showed
(``checks.shown_field``: the right caption's id masked, and a tag with the site's secret),
which the answer verifies, and checks against the study's captions and the group's images.
Here: the page shows what the captions' read shows, the answer stores what the draw gives,
and a field that does not verify (missing, edited, another presentation's, or for captions
no check of the lease may show) falls back to the draw, which refuses a page it did not
show. ``test_crowd_humanr_hot_path.py`` pins the statements of every trial.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Assignment, Caption, Judgment
from annotation.modes.humanr.checks import (
    check_captions,
    posted_check,
    posted_right,
    served_check,
    shown_field,
)
from annotation.modes.humanr.pages import IMAGE_FIELDS, previous_answer_at, trial_captions
from annotation.modes.humanr.protocol import CHECK, score_trial
from tests.annotation.test_hot_path_queries import FORM_ACTION, _enter, counted
from tests.factories.humanr import humanr_study

pytestmark = pytest.mark.django_db

#: The draw's read of the worker's leases (``checks.WORKER_LEASES``).
DRAW_READ = 'LEFT JOIN "annotation_itemimage" ii'
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)"')


def _body(page, **changes):
    body = {
        "part": str(page.context["part"]),
        "raw": "2",
        "left": str(page.context["left_caption"].pk),
        "shown": page.context["shown"],
    }
    body.update(changes)
    return {name: value for name, value in body.items() if value is not None}


def _to_check(client, study, pid="P1"):
    """Enter and answer (through the views) the trials before the check; the check's page
    and the comparison pages shown before it."""
    _enter(client, study, pid)
    url = reverse("participate_next", args=[study.public_id])
    before = []
    for _ in range(10):
        page = client.get(url)
        assert page.status_code == 200
        lease, part = page.context["assignment"], page.context["part"]
        if lease.item.spec["trials"][part]["kind"] == CHECK:
            return page, before
        before.append(page)
        action = FORM_ACTION.search(page.content.decode()).group(1)
        assert client.post(action, _body(page)).status_code == 302
    raise AssertionError("no check in the group")


def _post(client, page, body):
    action = FORM_ACTION.search(page.content.decode()).group(1)
    with CaptureQueriesContext(connection) as answered:
        reply = client.post(action, body)
    return reply, counted(answered)


def _lease(page) -> Assignment:
    """The page's lease as the submission service hands it over (participant and study)."""
    return Assignment.objects.select_related("item", "participant__study").get(
        pk=page.context["assignment"].pk
    )


def _expected(page) -> dict:
    """What the old path stores for the check's answer "2": the check drawn again
    (``served_check``) and scored."""
    lease, part = _lease(page), page.context["part"]
    trial = served_check(lease, lease.item.spec["trials"][part])
    return score_trial(lease.item.spec, assignment_id=lease.pk, part=part, raw=2, trial=trial)


@pytest.mark.parametrize("seed", [3, 21])
def test_the_check_page_shows_what_the_captions_read_shows(client, researcher, seed):
    """Seed 3 puts the check fifth (a previous answer's time to take), seed 21 first."""
    study = humanr_study(researcher, images=30, seed=seed)
    page, _before = _to_check(client, study)
    lease, part = page.context["assignment"], page.context["part"]
    assert part == {3: 4, 21: 0}[seed]
    left, right = page.context["left_caption"], page.context["right_caption"]
    read, previous_at = trial_captions(lease, part, (left.pk, right.pk))
    for shown in (left, right):
        assert (shown.text, shown.image_id) == (read[shown.pk].text, read[shown.pk].image_id)
        for name in IMAGE_FIELDS:
            assert getattr(shown.image, name) == getattr(read[shown.pk].image, name)
    assert page.context["image"].pk == _expected(page)["image_id"]
    # The previous answer's time: from the answers read with the lease, or by a query.
    assert previous_answer_at(lease, part) == previous_at
    assert previous_answer_at(_lease(page), part) == previous_at
    assert (previous_at is None) is (part == 0)


@pytest.mark.parametrize("seed", [3, 21, 7])
def test_the_answer_stores_what_drawing_the_check_again_gives(client, researcher, seed):
    """Through the views, with the page's form: the stored result is the old path's, and the
    answer does not read the worker's leases."""
    study = humanr_study(researcher, images=30, seed=seed)
    page, _before = _to_check(client, study)
    expected = _expected(page)
    reply, statements = _post(client, page, _body(page))
    assert reply.status_code == 302
    assert not any(DRAW_READ in sql for sql in statements), statements
    stored = Judgment.objects.get(assignment_id=page.context["assignment"].pk, result__kind=CHECK)
    assert {key: stored.result[key] for key in expected} == expected


def _flip(text: str, at: int) -> str:
    return text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1 :]


TAMPERED = {
    "missing": lambda page, lease: None,
    "an edited tag": lambda page, lease: _flip(page.context["shown"], -1),
    "an edited right caption": lambda page, lease: _flip(page.context["shown"], 15),
    "too short": lambda page, lease: page.context["shown"][:-1],
    "another part's": lambda page, lease: shown_field(
        lease,
        page.context["part"] + 1,
        page.context["left_caption"].pk,
        page.context["right_caption"].pk,
    ),
}


@pytest.mark.parametrize("how", TAMPERED)
def test_a_field_that_does_not_verify_falls_back_to_the_draw(client, researcher, how):
    study = humanr_study(researcher, images=30, seed=3)
    page, _before = _to_check(client, study)
    expected = _expected(page)
    reply, statements = _post(client, page, _body(page, shown=TAMPERED[how](page, _lease(page))))
    assert reply.status_code == 302
    assert any(DRAW_READ in sql for sql in statements), statements
    stored = Judgment.objects.get(assignment_id=page.context["assignment"].pk, result__kind=CHECK)
    assert {key: stored.result[key] for key in expected} == expected


def test_a_page_with_the_sides_swapped_is_refused(client, researcher):
    """The right caption's id sent as the left one, with the page's field: the tag is over
    the sides as shown, so the draw decides, and it refuses the page; nothing is stored."""
    study = humanr_study(researcher, images=30, seed=3)
    page, _before = _to_check(client, study)
    swapped = _body(page, left=str(page.context["right_caption"].pk))
    reply, statements = _post(client, page, swapped)
    assert reply.status_code == 409
    assert any(DRAW_READ in sql for sql in statements)
    assert not Judgment.objects.filter(
        assignment_id=page.context["assignment"].pk, result__kind=CHECK
    ).exists()


def test_a_reopened_lease_does_not_take_the_old_pages_field(client, researcher):
    """The field names the lease's ``served_at``: once it moves, the answer draws again."""
    study = humanr_study(researcher, images=30, seed=3)
    page, _before = _to_check(client, study)
    lease = page.context["assignment"]
    Assignment.objects.filter(pk=lease.pk).update(served_at=lease.served_at + timedelta(seconds=1))
    _reply, statements = _post(client, page, _body(page))
    assert any(DRAW_READ in sql for sql in statements)


def test_every_trial_page_has_the_same_fields(client, researcher):
    """A bot cannot tell the check from a comparison by the form, nor read the right
    caption's id in it; the field gives the server the right caption back."""
    study = humanr_study(researcher, images=30, seed=3)
    page, before = _to_check(client, study)
    fields = {tuple(HIDDEN.findall(shown.content.decode())) for shown in [*before, page]}
    assert fields == {("csrfmiddlewaretoken", "part", "left", "shown")}
    for shown in [*before, page]:
        field, right = shown.context["shown"], shown.context["right_caption"].pk
        assert int(field[:16], 16) != right
        lease, part = shown.context["assignment"], shown.context["part"]
        assert posted_right(lease, part, shown.context["left_caption"].pk, field) == right


def test_a_verified_field_still_names_only_captions_a_check_may_show(client, researcher):
    """``posted_check`` checks the captions against the study's: two human captions of two
    images, neither of the group's; else the answer draws again."""
    study = humanr_study(researcher, images=30, seed=3)
    page, _before = _to_check(client, study)
    lease, part = _lease(page), page.context["part"]
    trial = lease.item.spec["trials"][part]
    expected = served_check(lease, trial)
    reference, other = expected["reference_caption_id"], expected["other_caption_id"]
    assert posted_check(lease, trial, reference, other) == expected
    human = check_captions(study).human
    own_image = next(t["image_id"] for t in lease.item.spec["trials"] if t["kind"] != CHECK)
    model = Caption.objects.filter(study=study).exclude(system=Caption.HUMAN).first().pk
    for wrong in [
        (human[own_image][0], other),  # the group's own image
        (reference, human[own_image][0]),
        (reference, next(c for c in human[expected["image_id"]] if c != reference)),  # one image
        (model, other),  # not a human caption
        (reference, 10**12),  # no caption
    ]:
        assert posted_check(lease, trial, *wrong) is None, wrong
