"""The test-rating mode as a Django app: its templates, static files and mode (``mode.py``)."""

from django.apps import AppConfig


class RatingModeConfig(AppConfig):
    """As a real mode's app: ``__init__.py`` holds only the description, and the mode
    registers from ``mode.py`` in ``AnnotationConfig.ready()``."""

    name = "tests.ratingmode"
    # Labels are global among installed apps: prefixed as the real modes' are.
    label = "capeval_test_rating"
    verbose_name = "Rating (tests only)"
