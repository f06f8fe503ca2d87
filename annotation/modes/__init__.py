"""Protocol modes: the contract (``base.py``) and its components, and one package per mode.

Each mode's package is a Django app (its ``apps.py``, one line of ``INSTALLED_APPS``) with
its own templates and static files; ``AnnotationConfig.ready()`` imports each installed
app's ``mode.py``, which registers the mode. Django imports this package and the modes'
packages before the models are ready, so none of them imports anything that reaches the
models: the contract's names are in ``annotation.modes.base``, and ``get_mode`` and
``register`` come from the registry, which imports nothing of the project. Mode packages
must not import ``annotation.services`` (services import this package; import-linter checks
it).
"""

from annotation.registry import get_mode, register

__all__ = ["get_mode", "register"]
