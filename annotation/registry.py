"""The registry of modes: name -> the registered mode, filled by ``modes.base.register``.

It lives outside ``annotation/modes/`` and imports nothing of the project, so that
``models.py`` can take ``Study.mode``'s choices from it (``mode_choices``, a callable Django
reads when it needs them) without importing the modes, which import the models. Adding a
mode therefore needs no migration: the migration stores this function's path, not the list.
"""

from __future__ import annotations

from typing import Any

#: Registered modes by name.
MODES: dict[str, Any] = {}


def _listed() -> list[Any]:
    # Pages list modes by their ``menu_order`` (the first is the new-study page's default),
    # then by name: the order packages are found in must not matter.
    return sorted(MODES.values(), key=lambda mode: (mode.menu_order, mode.name))


def mode_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every registered mode, in menu order: ``Study.mode``'s choices."""
    return [(mode.name, mode.label or mode.name) for mode in _listed()]


def mode_names() -> list[str]:
    """Names of every registered mode, in menu order."""
    return [mode.name for mode in _listed()]
