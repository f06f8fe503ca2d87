"""Builders of the mode-agnostic tests: a study of the vehicle mode, crowd participants, races.

Real components: with ``CAPEVAL_REQUIRE_SERVICES=1`` (set by ``.ci/run``), tests that need
PostgreSQL, Redis or Chromium fail when those are missing instead of skipping.
"""

import os
import threading

import pytest
from django.db import connection

from annotation.models import Assignment, Caption, Image, Item, Participant, Study
from annotation.services.participants import participant_for_crowd_worker
from annotation.services.studies import study_create, study_open
from tests.factories.vehicle import NAME as VEHICLE

REQUIRE_SERVICES = os.environ.get("CAPEVAL_REQUIRE_SERVICES", "") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip with a clear reason on a developer's machine; fail on CI where it must exist."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (CAPEVAL_REQUIRE_SERVICES=1 makes this an error)")
    pytest.skip(reason)


def require_postgres() -> None:
    """Concurrency tests need real row locks: skip (or fail on CI) on other databases."""
    if connection.vendor != "postgresql":
        skip_or_fail("the concurrency tests need PostgreSQL (set DATABASE_URL=postgres://...)")


def run_together(functions):
    """Start the functions at the same instant in threads; return (results, errors).

    Each thread has its own database connection (Django's are per thread) and closes it,
    so the test database can be dropped afterwards.
    """
    barrier = threading.Barrier(len(functions))
    results = [None] * len(functions)
    errors = []

    def run(index, function):
        try:
            barrier.wait(timeout=10)
            results[index] = function()
        except Exception as exc:  # reported by the test, which would otherwise hang or lie
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a thread is stuck"
    return results, errors


def assert_counts_exact(study: Study) -> None:
    """The counters the capacity check relies on match the rows, and no item is over target."""
    for item in Item.objects.filter(study=study):
        leases = Assignment.objects.filter(item=item)
        assert item.open_lease_count == leases.filter(status=Assignment.Status.OPEN).count()
        assert item.judgment_count == leases.filter(status=Assignment.Status.SUBMITTED).count()
        assert item.judgment_count + item.open_lease_count <= item.target


def caption_study(
    owner,
    mode: str,
    *,
    captions: int = 3,
    live: bool = True,
    name: str = "Rating study",
    **settings,
) -> Study:
    """A study of ``mode`` (one item per caption) with ``captions`` captions, one image each,
    opened unless ``live`` is False; built without an importer, so lease, submission and
    access tests do not depend on one."""
    study = study_create(owner=owner, name=name, mode=mode, settings=settings)
    for number in range(captions):
        image = Image.objects.create(
            study=study,
            name=f"img{number}.jpg",
            sha256=f"{number:064d}",
            file=f"images/{number}.jpg",
            display=f"display/{number}.jpg",
            width=640,
            height=480,
            format="JPEG",
            alt_text=f"Picture {number}",
        )
        Caption.objects.create(
            study=study,
            image=image,
            system=f"sys{number % 2}",
            raw_text=f"a caption {number}",
            text=f"A caption {number}.",
            line=number + 1,
        )
    if live:
        study_open(study=study)
    return study


def vehicle_study(owner, **kwargs) -> Study:
    """A study of the tests' vehicle mode (``tests/factories/vehicle.py``): ``caption_study``'s
    arguments, and its settings (``target``, ``parts``, ``min_seconds``, ``completion_after``)."""
    return caption_study(owner, VEHICLE, **kwargs)


def crowd_participant(study: Study, worker: str = "worker-1") -> Participant:
    """A Prolific participant of ``study`` with id ``worker`` (no browser binding)."""
    participant, _ = participant_for_crowd_worker(
        study=study, source=Participant.Source.PROLIFIC, external_id=worker, meta={}
    )
    return participant
