"""Fixtures shared by the Django tests: users of each role, a study factory, isolated media.

Real components: with ``CAPEVAL_REQUIRE_SERVICES=1`` (set by ``.ci/run``), tests that need
PostgreSQL, Redis or Chromium fail when those are missing instead of skipping.
"""

import os
import shutil
import threading

import pytest

REQUIRE_SERVICES = os.environ.get("CAPEVAL_REQUIRE_SERVICES", "") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip with a clear reason on a developer's machine; fail on CI where it must exist."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (CAPEVAL_REQUIRE_SERVICES=1 makes this an error)")
    pytest.skip(reason)


def require_postgres() -> None:
    """Concurrency tests need real row locks: skip (or fail on CI) on other databases."""
    from django.db import connection

    if connection.vendor != "postgresql":
        skip_or_fail("the concurrency tests need PostgreSQL (set DATABASE_URL=postgres://...)")


def run_together(functions):
    """Start the functions at the same instant in threads; return (results, errors).

    Each thread has its own database connection (Django's are per thread) and closes it,
    so the test database can be dropped afterwards.
    """
    from django.db import connection

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


@pytest.fixture(autouse=True)
def isolated_files(settings, tmp_path):
    """Every test writes media and exports under its own temporary folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CAPEVAL_EXPORT_DIR = tmp_path / "exports"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    # The production hasher costs about a second per user; tests need no key stretching.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from capeval.celery_app import app

    app.conf.task_always_eager = True
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture
def make_user(db, django_user_model):
    def make(username: str, *, researcher=False, staff=False, native_english=False):
        return django_user_model.objects.create_user(
            username=username,
            password="pw-" + username,
            is_researcher=researcher,
            is_staff=staff,
            is_superuser=staff,
            native_english=native_english,
        )

    return make


@pytest.fixture
def researcher(make_user):
    return make_user("rita", researcher=True)


@pytest.fixture
def other_researcher(make_user):
    return make_user("oscar", researcher=True)


@pytest.fixture
def annotator(make_user):
    return make_user("anna", native_english=True)


@pytest.fixture
def make_study(db, researcher):
    from annotation.services.studies import study_create

    def make(mode: str = "vicr", *, owner=None, settings=None, name="Test study", seed=0):
        return study_create(
            owner=owner or researcher, name=name, mode=mode, settings=settings or {}, seed=seed
        )

    return make
