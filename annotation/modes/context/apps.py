"""The context mode as a Django app: its templates, static files and mode (``mode.py``)."""

from django.apps import AppConfig


class ContextConfig(AppConfig):
    """Django imports the package before the models are ready, so ``__init__.py`` holds only
    the mode's description; the mode registers from ``mode.py`` in ``AnnotationConfig.ready()``."""

    name = "annotation.modes.context"
    # Labels are global among installed apps: prefixed so that no other app's "context" clashes.
    label = "capeval_context"
    verbose_name = "Descriptions in context"
