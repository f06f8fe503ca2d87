"""The order items are served in is drawn per worker (issue 46, row 12).

A new user's crowd of 11 saw "8 of 11 workers got the same image first; the order is
nearly the same for everyone": among equally taken items every worker was served the
lowest ``position``, and an arena's battles are numbered image by image. Arena battles and
spans captions are now served in an order drawn from the study's seed and the worker, so
workers start on different images, and the same worker of the same study design gets the
same order again. Modes whose order is the protocol (THumB's stages, VICR's gates, HUMANr's
groups) keep serving by position.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Caption
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from tests.factories import arena, spans
from tests.factories.core import crowd_participant

pytestmark = pytest.mark.django_db

SYSTEMS = tuple(f"sys{k}" for k in range(8))
IMAGES = 20
WORKERS = 12


def first_images(study) -> list[str]:
    """Each worker in turn arrives, is served a battle and answers it, as on the crowd link."""
    names = []
    for k in range(WORKERS):
        worker = crowd_participant(study, f"PID-{k:02d}")
        lease, _ = arena.judge(worker, "a")
        names.append(lease.item.image.name)
    return names


def test_workers_start_an_arena_study_on_different_images(researcher):
    study = arena.arena_study(
        researcher, systems=SYSTEMS, images=IMAGES, catch_rate=0, seed=46, words=lambda s, i: 20
    )

    names = first_images(study)

    # Drawn per worker, 12 first battles over 20 images meet on the same image only by
    # chance (about 9 distinct images expected); served by position they all start on the
    # first image. Half of the workers on distinct images separates the two.
    assert len(set(names)) >= WORKERS // 2, names


def served_sequence(researcher, worker_id: str, count: int) -> list[tuple[int, str]]:
    """The captions (image's place among the study's images, system) one worker is served
    in a fresh spans study (the factory's seed), answering each in turn."""
    study = spans.spans_study(researcher, images=6, systems=("alpha", "beta"))
    order = {pk: n for n, pk in enumerate(study.images.order_by("pk").values_list("pk", flat=True))}
    worker = crowd_participant(study, worker_id)
    seen = []
    for _ in range(count):
        lease, _ = spans.judge(worker, lambda lease, text: {"score": 80, "spans": "[]"})
        caption = Caption.objects.get(pk=lease.item.spec["caption"])
        seen.append((order[caption.image_id], caption.system))
    return seen


def test_the_same_worker_gets_the_same_order_again_and_others_another(researcher):
    first = served_sequence(researcher, "PID-SAME", count=6)
    again = served_sequence(researcher, "PID-SAME", count=6)
    other = served_sequence(researcher, "PID-OTHER", count=6)

    assert first == again
    assert first != other


def test_the_drawn_order_costs_no_query_per_item(researcher):
    small = arena.arena_study(researcher, systems=SYSTEMS[:3], images=3, catch_rate=0)
    large = arena.arena_study(researcher, systems=SYSTEMS, images=IMAGES, catch_rate=0)
    counts = []
    for study in (small, large):
        worker = crowd_participant(study, "PID-COUNT")
        with CaptureQueriesContext(connection) as queries:
            assert assignment_next(participant=worker) is not None
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("mode", ["thumb", "vicr", "humanr"])
def test_modes_whose_order_is_the_protocol_keep_it(mode):
    assert get_mode(mode).order_per_worker is False
