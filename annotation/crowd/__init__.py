"""Clients of the paid crowd platforms (Prolific over httpx, MTurk over boto3) and the pure
check of Prolific's webhook signature. No database here: ``annotation/services/crowd.py``
decides what to call and records every call in the ledger (docs/crowd.md).
"""


class PlatformError(Exception):
    """The platform answered with an error (``status``) or could not be reached.

    ``sent`` is False when the request certainly never reached the platform (a refused
    connection, a connect timeout), True when it may have (a read timeout): a payment whose
    request may have been sent must not be sent again blindly.
    """

    def __init__(
        self, message: str, *, status: int | None = None, sent: bool = True, code: str = ""
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.sent = sent
        self.code = code

    def __str__(self) -> str:
        return self.message

    @property
    def outcome_unknown(self) -> bool:
        """Whether the platform may have acted although the call failed.

        True when the request was sent and no answer says what happened: none came (a
        timeout, a reset) or a 5xx came, which may be a gateway's in front of a platform
        that went on and acted. A 4xx is the platform's own refusal (nothing done); a
        connect error means the request never left.
        """
        return self.sent and (self.status is None or self.status >= 500)
