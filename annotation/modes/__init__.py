"""Protocol modes. Importing this package registers every mode module listed here."""

from annotation.modes.base import Mode, SubmissionError, get_mode, register

__all__ = ["Mode", "SubmissionError", "get_mode", "register"]
