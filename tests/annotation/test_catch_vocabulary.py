"""The T_RW vocabulary of a study is built once per process, not on every catch trial.

Drawing a gold battle (arena) or a catch trial (VICR) happens inside the submission's
transaction. It used to read every caption text of the study and split it into words each
time: about 0.2 s of CPU for the 1,800 detailed captions of ``bench/arena_load.py``'s study,
growing with the study. These tests count the builds through the real services and views
and check that a cached vocabulary is still the words of every study caption.
"""

from __future__ import annotations

from unittest import mock

import pytest

from annotation.models import Caption, Item, Study
from annotation.modes import catch
from rubrics import transformations as tf
from tests.annotation.test_catch_trials import Player, catch_study, is_altered
from tests.factories.arena import arena_study, judge, worker

pytestmark = pytest.mark.django_db


def every_study_caption_word(study) -> tuple[str, ...]:
    texts = Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
    return tf.vocabulary(list(texts.values_list("text", flat=True)))


def test_gold_battles_of_one_study_build_its_vocabulary_once(researcher):
    study = arena_study(
        researcher, systems=("Human", "beta", "gamma"), images=30, catch_rate=0.5,
        catch_min_seen=100, completion_battles=200,
    )  # fmt: skip
    people = [worker(study), worker(study)]
    with mock.patch.object(tf, "vocabulary", wraps=tf.vocabulary) as built:
        for _ in range(12):
            for person in people:
                judge(person, "tie")
    gold = Item.objects.filter(study=study, kind=catch.CATCH)

    # Two workers and several gold battles each; the study's words were split once.
    assert gold.count() >= 4
    assert {item.spec["catch"]["participant_id"] for item in gold} == {p.pk for p in people}
    assert built.call_count == 1


def test_vicr_catch_trials_of_one_study_build_its_vocabulary_once(researcher):
    study = catch_study(researcher, catch_rate=0.5)
    players = [Player(study, "w-one"), Player(study, "w-two")]
    with mock.patch.object(tf, "vocabulary", wraps=tf.vocabulary) as built:
        logs = [player.play(lambda item: 3, limit=8) for player in players]
    altered = [item for log in logs for item, *_ in log if is_altered(item)]

    assert len(altered) >= 2
    assert built.call_count == 1


def test_the_cached_vocabulary_is_every_study_captions_words_and_follows_new_ones(researcher):
    study = arena_study(researcher, images=3, catch_rate=0.5)

    assert catch.study_vocabulary(study) == every_study_caption_word(study)
    # Captions are only ever added: a new one (here with words no other caption has) makes
    # a new vocabulary, the same as one built from scratch.
    image = study.images.first()
    Caption.objects.create(
        study=study, image=image, system="delta", raw_text="A quokka naps.", text="A quokka naps."
    )
    # A study row answers for one request (``study_captions``); the next request reads its own.
    assert "quokka" not in catch.study_vocabulary(study)
    study = Study.objects.get(pk=study.pk)
    fresh = catch.study_vocabulary(study)
    assert "quokka" in fresh
    assert fresh == every_study_caption_word(study)
    # Another study's captions never enter it.
    other = arena_study(researcher, images=2, catch_rate=0.5)
    Caption.objects.create(
        study=other, image=other.images.first(), system="delta", raw_text="okapi", text="okapi"
    )
    assert "okapi" not in catch.study_vocabulary(Study.objects.get(pk=study.pk))
    assert "okapi" in catch.study_vocabulary(Study.objects.get(pk=other.pk))


def test_the_kept_captions_are_the_studys_and_follow_new_ones(researcher):
    """``study_captions`` keeps the rows a catch or gold draw lists (issue 48: an arena gold
    draw read 18,000 rows twice per draw); kept, they must be what the tables hold now."""
    study = arena_study(researcher, images=3, catch_rate=0.5)
    other = arena_study(researcher, images=2, catch_rate=0.5)

    def expected():
        rows = Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY).order_by("id")
        every = list(rows.values_list("id", "image_id", "system", "text"))
        by_image: dict[int, tuple[int, ...]] = {}
        for pk, image, _system, _text in every:
            by_image[image] = (*by_image.get(image, ()), pk)
        return (
            tuple(row[:3] for row in every),
            tuple(row[:3] for row in every if row[3]),
            ({pk: image for pk, image, *_ in every}, by_image),
        )

    def kept():
        # A new request's study row (a row in hand keeps its answer for its request).
        known = catch.study_captions(Study.objects.get(pk=study.pk))
        return known.rows, known.with_text, known.images

    assert kept() == expected()
    # An added caption, one with no text (it can be listed, never altered), and another
    # study's caption: the kept rows follow the first two and never show the third.
    image = study.images.first()
    Caption.objects.create(study=study, image=image, system="delta", raw_text="x", text="x")
    Caption.objects.create(study=study, image=image, system="eps", raw_text="", text="")
    Caption.objects.create(
        study=other, image=other.images.first(), system="delta", raw_text="y", text="y"
    )
    assert kept() == expected()
    assert len(kept()[0]) == len(kept()[1]) + 1


def test_a_study_row_asks_the_database_once(researcher, django_assert_num_queries):
    """A gold draw asks for the captions twice (sources, then the worker's seen images):
    the study row in hand answers the second time without a query."""
    study = arena_study(researcher, images=3, catch_rate=0.5)
    with django_assert_num_queries(1):
        first = catch.study_captions(study)
    with django_assert_num_queries(0):
        assert catch.study_captions(study) is first
