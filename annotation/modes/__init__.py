"""Protocol modes: one package per mode, registered by name when this package is imported.

Mode packages must not import ``annotation.services`` (services import this package).
"""

# isort: off
# Importing a mode package registers it; the order is the order pages list the modes (the
# first is the new-study page's default), as Study.mode's choices were before the registry.
from annotation.modes import thumb  # noqa: F401
from annotation.modes import vicr  # noqa: F401
from annotation.modes import humanr  # noqa: F401
from annotation.modes import arena  # noqa: F401

# isort: on
from annotation.modes.base import (
    Export,
    Mode,
    Outcome,
    Pages,
    Planner,
    Report,
    SimulatedAnswer,
    WorkerChecks,
    get_mode,
    register,
)

__all__ = [
    "Export",
    "Mode",
    "Outcome",
    "Pages",
    "Planner",
    "Report",
    "SimulatedAnswer",
    "WorkerChecks",
    "get_mode",
    "register",
]
