"""What a mode's component (``Export``, ``Judging``, ...) reads of the mode that owns it.

``base.py`` defines ``Mode`` and imports the components' modules to build them, so those
modules cannot import ``Mode`` back, not even for a type (a circle import-linter and readers
would have to step around). They name the mode by this protocol instead.
"""

from __future__ import annotations

from typing import Any, Protocol

from annotation.models import Study


class ModeOf(Protocol):
    """The owning mode, as its components see it (``annotation.modes.base.Mode`` is one)."""

    name: str
    label: str
    #: Its other components, e.g. ``report`` (``Report``), which ``Judging`` reads.
    report: Any

    def settings(self, study: Study) -> Any:
        """The study's typed settings."""
        ...

    def guidelines(self, study: Study) -> Any:
        """The study's task guidelines (``modes/guidelines.py``)."""
        ...
