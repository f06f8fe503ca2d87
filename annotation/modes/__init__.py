"""Protocol modes: one package per mode, registered by name when this package is imported.

Mode packages must not import ``annotation.services`` (services import this package).
"""

from annotation.modes import humanr, thumb, vicr  # noqa: F401  (registers the modes)
from annotation.modes.base import (
    Export,
    Mode,
    Outcome,
    Pages,
    Report,
    get_mode,
    register,
)

__all__ = ["Export", "Mode", "Outcome", "Pages", "Report", "get_mode", "register"]
