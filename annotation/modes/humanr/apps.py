"""The HUMANr mode as a Django app: its templates, static files and mode (``mode.py``)."""

from django.apps import AppConfig


class HumanrConfig(AppConfig):
    """Django imports the package before the models are ready, so ``__init__.py`` holds only
    the mode's description; the mode registers from ``mode.py`` in ``AnnotationConfig.ready()``."""

    name = "annotation.modes.humanr"
    # Labels are global among installed apps: prefixed so that no other app's "humanr" clashes.
    label = "capeval_humanr"
    verbose_name = "HUMANr head-to-head"
