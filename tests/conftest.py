"""Fixtures shared by the Django tests: users of each role, a study factory, isolated media.

Real components: with ``CAPEVAL_REQUIRE_SERVICES=1`` (set by ``.ci/run``), tests that need
PostgreSQL, Redis or Chromium fail when those are missing instead of skipping.
"""

import os
import shutil

import pytest

REQUIRE_SERVICES = os.environ.get("CAPEVAL_REQUIRE_SERVICES", "") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip with a clear reason on a developer's machine; fail on CI where it must exist."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (CAPEVAL_REQUIRE_SERVICES=1 makes this an error)")
    pytest.skip(reason)


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
