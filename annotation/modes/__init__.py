"""Protocol modes. Importing this package registers every mode module listed here.

Mode modules must not import ``annotation.services`` at module level (services import
this package).
"""

from annotation.modes import humanr, thumb, vicr  # noqa: F401  (registers the modes)
from annotation.modes.base import Mode, SubmissionError, get_mode, register

__all__ = ["Mode", "SubmissionError", "get_mode", "register"]
