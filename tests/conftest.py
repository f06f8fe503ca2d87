"""Fixtures shared by the Django tests: users of each role, a study factory, isolated media.

Builders and helpers that tests import live in ``tests/factories/``.
"""

import os
import shutil

import pytest
from django.conf import settings as django_settings
from django.test.utils import override_settings

from annotation.modes.thumb.models import Rater
from annotation.services.studies import study_create
from capeval.celery_app import app
from tests.factories.machine import usable_cores
from tests.factories.vehicle import template_dirs

# The test-only mode (tests/ratingmode/) is a mode app like annotation/modes/<mode>/, and
# this is its one line outside its folder: installed for the tests only, so production
# never lists it. pytest-django sets Django up before this file is read, so the app joins
# through override_settings, which re-populates the app registry: AnnotationConfig.ready()
# then imports its mode.py (registering "test-rating"), and the template loaders and
# static-file finders read its templates/ and static/ as they read a real mode's.
# CAPEVAL_TESTS_WITHOUT_RATINGMODE=1 leaves it out (tests/ratingmode/test_removal.py).
if not os.environ.get("CAPEVAL_TESTS_WITHOUT_RATINGMODE"):
    override_settings(INSTALLED_APPS=[*django_settings.INSTALLED_APPS, "tests.ratingmode"]).enable()

# The mode-agnostic tests' vehicle (tests/factories/vehicle.py), registered by the import
# above for every test, is no app: its item page's folder joins the template loaders here.
override_settings(TEMPLATES=template_dirs(django_settings.TEMPLATES)).enable()


def pytest_xdist_auto_num_workers(config):
    """``pytest -n auto`` (``make test``) starts two workers per core.

    Much of the suite waits rather than computes (Chromium, live servers, Celery workers,
    the embedded demo's subprocesses), so one worker per core leaves cores idle: on a
    2-core machine the SQLite pass took 804 s alone, 588 s with 2 workers and 463 s
    with 4. A core is one this process may use (``tests/factories/machine.py``,
    ``usable_cores``: affinity and the cgroup's CPU quota, so a container limited to 2 CPUs
    of a large host starts 4 workers, not hundreds). ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    still decides when it is set.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    # The cores there are for this process (affinity and cgroup quota), not the host's.
    return 2 * usable_cores()


@pytest.fixture(autouse=True)
def isolated_files(settings, tmp_path):
    """Every test writes media and exports under its own temporary folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CAPEVAL_EXPORT_DIR = tmp_path / "exports"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    # The production hasher costs about a second per user; tests need no key stretching.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    app.conf.task_always_eager = True
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture
def make_user(db, django_user_model):
    def make(username: str, *, researcher=False, staff=False, native_english=False):
        """``native_english``: THumB's native English speaker (its ``Rater`` row)."""
        user = django_user_model.objects.create_user(
            username=username,
            password="pw-" + username,
            is_researcher=researcher,
            is_staff=staff,
            is_superuser=staff,
        )
        if native_english:
            Rater.objects.create(user=user, native_english=True)
        return user

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
    def make(mode: str = "vicr", *, owner=None, settings=None, name="Test study", seed=0):
        return study_create(
            owner=owner or researcher, name=name, mode=mode, settings=settings or {}, seed=seed
        )

    return make
