"""The registry of modes: name -> the registered mode, filled by ``modes.base.register``.

It lives outside ``annotation/modes/`` and imports nothing of the project, so that
``models.py`` can take ``Study.mode``'s choices from it (``mode_choices``, a callable Django
reads when it needs them) without importing the modes, which import the models. Adding a
mode therefore needs no migration: the migration stores this function's path, not the list.
"""

from __future__ import annotations

from typing import Any

#: Registered modes by name, in registration order (the order forms list them).
MODES: dict[str, Any] = {}


def mode_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every registered mode: ``Study.mode``'s choices."""
    return [(name, mode.label or name) for name, mode in MODES.items()]


def mode_names() -> list[str]:
    """Names of every registered mode, in registration order."""
    return list(MODES)
