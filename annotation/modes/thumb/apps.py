"""The THumB mode as a Django app: its templates, static files and mode (``mode.py``)."""

from django.apps import AppConfig


class ThumbConfig(AppConfig):
    """Django imports the package before the models are ready, so ``__init__.py`` holds only
    the mode's description; the mode registers from ``mode.py`` in ``AnnotationConfig.ready()``."""

    name = "annotation.modes.thumb"
    # Labels are global among installed apps: prefixed so that no other app's "thumb" clashes.
    label = "capeval_thumb"
    verbose_name = "THumB rubric"
