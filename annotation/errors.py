"""The one error type of the services: a refusal a person can act on.

Every service raises ``ServiceError`` for input or state it refuses (a bad upload, a
submission the protocol rejects, a crowd arrival over its limit), before anything is
written. Views, API views, tasks and commands map it onto their own response: a page or
form error with ``status``, a JSON body, a failed job row, a command error. Anything else
that escapes a service is a bug, and is left to become a 500 and a log entry.
"""

from typing import Any


class ServiceError(Exception):
    """A refusal; ``message`` is shown to the person as is.

    ``field`` names the form field or setting it concerns (empty: the whole request),
    ``status`` is the HTTP status a view answers with, and ``details`` carries structured
    extras for a job's result (e.g. an import's per-row errors).
    """

    def __init__(
        self,
        message: str,
        *,
        field: str = "",
        status: int = 400,
        details: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status
        self.details = details

    def __str__(self) -> str:
        return self.message

    def report(self) -> str:
        """The message with the listed problems (``details["errors"]``), one per line."""
        return "\n".join([self.message, *(self.details or {}).get("errors", [])])
