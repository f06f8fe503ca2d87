"""The error-span demo (issue 24): detailed captions written for the demo's photographs,
a live study to try and a finished one answered by the simulated crowd, with its report.

The captions file is checked on its own (100-400 words, every planted error present once
and apart from the others); the finished study runs through ``load_demo``'s own step.
"""

from __future__ import annotations

import io
from collections import Counter

from annotation.management.commands.load_demo import DEMO_DIR
from annotation.models import Item, Job, Judgment, Study, User
from annotation.modes import get_mode
from annotation.modes.spans.simulate import DEMO_ERRORS
from tests.annotation.test_demo import assert_answered_with_a_report, read_csv

MODE = get_mode("spans")
DEMO_IMAGES = {p.name for p in (DEMO_DIR / "images").iterdir() if p.is_file()}


def test_the_detailed_captions_are_long_and_hold_their_planted_errors():
    rows = read_csv(MODE.demo.captions)
    assert len(rows) == 12
    assert {row["image"] for row in rows} <= DEMO_IMAGES
    assert Counter(row["system"] for row in rows) == {"GoodBot": 6, "BadBot": 6}
    for row in rows:
        text = row["caption"]
        assert 100 <= len(text.split()) <= 400, row["image"]
        planted = DEMO_ERRORS[(row["image"], row["system"])]
        spans = sorted((text.index(w), text.index(w) + len(w)) for w, _, _ in planted)
        for words, severity, category in planted:
            assert text.count(words) == 1, words
            assert severity in ("minor", "major")
            assert category in MODE.settings_class().category_list()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), row["image"]
        # The careless system's captions are wrong in more places than the careful one's.
        assert len(planted) == 1 if row["system"] == "GoodBot" else len(planted) >= 6
    # Every image's alt text and licence come with its first row.
    firsts = {}
    for row in rows:
        firsts.setdefault(row["image"], row)
    assert all(row["description"] and row["source"] for row in firsts.values())


def test_the_live_spans_demo_is_open_with_one_item_per_detailed_caption(db):
    from annotation.management.commands.load_demo import Command

    owner = User.objects.create_user("researcher", password="x", is_researcher=True)
    command = Command(stdout=io.StringIO())
    study = command._study(MODE.name, MODE.demo.live, owner, [])
    command._opened(study)
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE
    items = Item.objects.filter(study=study)
    assert items.count() == 12
    texts = {row["caption"] for row in read_csv(MODE.demo.captions)}
    assert set(study.captions.values_list("text", flat=True)) == texts
    assert MODE.settings(study).max_spans == 10


def test_the_finished_spans_demo_separates_the_careful_system(
    db, django_capture_on_commit_callbacks
):
    from annotation.management.commands.load_demo import Command

    name = MODE.demo.finished
    owner = User.objects.create_user("researcher", password="x", is_researcher=True)
    command = Command(stdout=io.StringIO())
    with django_capture_on_commit_callbacks(execute=True):
        command._finished(
            MODE.name, name, owner, MODE.demo.finished_workers, MODE.demo.finished_settings
        )
    study = Study.objects.get(name=name)
    assert_answered_with_a_report(study)
    assert Judgment.objects.filter(study=study).count() == 12 * 3
    result = study.jobs.get(kind=Job.Kind.REPORT).result
    rows = {row["system"]: row for row in result["systems"]}
    assert rows["GoodBot"]["mqm_per_caption"] < rows["BadBot"]["mqm_per_caption"]
    assert rows["GoodBot"]["esa"] > rows["BadBot"]["esa"]
    # Every stored mark is one of the planted errors (the simulated crowd invents none).
    for judgment in Judgment.objects.filter(study=study).select_related("item__image"):
        key = (judgment.item.image.name, judgment.item.spec["system"])
        planted = {words for words, _, _ in DEMO_ERRORS[key]}
        assert {m["text"] for m in judgment.payload["spans"]} <= planted
    assert result["span_agreement"]["captions"] == 12
    assert 0 < result["span_agreement"]["char_f1"] <= 1
