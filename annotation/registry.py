"""The registry of modes: name -> the registered mode, filled by ``register``.

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


#: The purpose every mode's captions may have: the captions the study is about.
STUDY_PURPOSE = ("study", "Study")


def caption_purpose_choices() -> list[tuple[str, str]]:
    """``(value, label)`` of every caption purpose: ``study``, then each registered mode's
    own (its ``caption_purposes``, VICR's tutorial and probation sets), in menu order:
    ``Caption.purpose``'s choices, which therefore need no migration per mode either."""
    choices = [STUDY_PURPOSE]
    for mode in _listed():
        choices += [choice for choice in mode.caption_purposes if choice not in choices]
    return choices


def register(mode_class: type) -> type:
    """Class decorator: make a mode available by its ``name`` (and a choice of ``Study.mode``:
    no migration per mode). Each mode app's ``mode.py`` applies it when
    ``AnnotationConfig.ready()`` imports it."""
    MODES[mode_class.name] = mode_class()
    return mode_class


def get_mode(name: str) -> Any:
    """Return the registered mode called ``name``; KeyError names the known modes."""
    try:
        return MODES[name]
    except KeyError:
        known = ", ".join(sorted(MODES)) or "none"
        raise KeyError(f"unknown mode {name!r} (registered: {known})") from None
