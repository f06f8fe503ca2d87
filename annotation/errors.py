"""The services' refusals: one class per kind, each with its HTTP status and a
machine-readable code (Zulip's ``zerver/lib/exceptions.py`` model).

Every service raises a ``ServiceError`` for input or state it refuses (a bad upload, a
submission the protocol rejects, a crowd arrival over its limit), before anything is
written. The kind says what went wrong; the status it maps to is the class's, never chosen
at the raise site. Views map it in one place (``views/errors.py``), the API in another
(``apis.exception_handler``, whose body carries ``code``), a job shows the message on its
failed row, a command raises ``CommandError``. Anything else that escapes a service is a
bug, and is left to become a 500 and a log entry.
"""

from typing import Any, ClassVar


class ServiceError(Exception):
    """A refusal; ``message`` is shown to the person as is.

    ``field`` names the form field or setting it concerns (empty: the whole request);
    ``details`` carries structured extras (an import's per-row errors in ``"errors"``, a
    submission's fields in ``"fields"``, a setting in ``"setting"``, a job's id and when to
    try again). ``status`` and ``code`` belong to the class: raise the subclass that says
    what kind of refusal it is. ``ServiceError`` itself is invalid input.
    """

    status: ClassVar[int] = 400
    code: ClassVar[str] = "invalid"

    def __init__(self, message: str, *, field: str = "", details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details

    def __str__(self) -> str:
        return self.message

    def report(self) -> str:
        """The message with the listed problems (``details["errors"]``), one per line."""
        return "\n".join([self.message, *(self.details or {}).get("errors", [])])


class InvalidInput(ServiceError):
    """Input the service refuses as it is: a bad value, a bad file (400)."""


class Forbidden(ServiceError):
    """The person may see the thing but not do this with it (403)."""

    status = 403
    code = "forbidden"


class NotFound(ServiceError):
    """No such thing, or one this person may not know of (404)."""

    status = 404
    code = "not_found"


class Conflict(ServiceError):
    """The thing's state forbids it now: a closed study, a lease already answered (409)."""

    status = 409
    code = "conflict"


class LeaseExpired(Conflict):
    """An answer to a lease whose time ran out and that cannot be stored any more: the item
    went to someone else, or the lease was taken back (409; the submit protocol's
    ``lease_expired``, docs/participation.md)."""

    code = "lease_expired"


class Gone(ServiceError):
    """It existed and is over for good: a closed study's crowd link (410)."""

    status = 410
    code = "gone"


class TooFast(ServiceError):
    """Too soon or too often: an answer under the minimum time, arrivals over a limit (429)."""

    status = 429
    code = "too_fast"


class Unavailable(ServiceError):
    """A component it needs is down (the task queue); try again later (503)."""

    status = 503
    code = "unavailable"


class StorageUnavailable(Unavailable):
    """The file store (the object store of ``STORAGES``) did not answer: refused the
    connection, timed out or failed on its side; try again later (503). Raised by
    ``annotation/storage.py``, the one place that talks to the backends."""

    code = "storage_unavailable"


class DiskFull(ServiceError):
    """The disk (or quota) is full (507)."""

    status = 507
    code = "disk_full"


#: The class of each status a raise site used to pass (for converting them, and tests).
BY_STATUS: dict[int, type[ServiceError]] = {
    cls.status: cls
    for cls in (InvalidInput, Forbidden, NotFound, Conflict, Gone, TooFast, Unavailable, DiskFull)
}
