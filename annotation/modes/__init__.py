"""Protocol modes: one package per mode, registered by name when this package is imported.

Every sub-package here is a mode and is imported (so registered) below: adding a mode is
adding its package, and no file outside it changes. Mode packages must not import
``annotation.services`` (services import this package; import-linter checks it).
"""

import importlib
import pkgutil

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

# Each package registers its mode with @register when imported.
for _found in pkgutil.iter_modules(__path__):
    if _found.ispkg:
        importlib.import_module(f"{__name__}.{_found.name}")

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
