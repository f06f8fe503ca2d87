"""The submit protocol's JSON replies (issue 42; the contract is docs/participation.md).

An item page's script posts the form with ``Accept: application/json`` and reads one of
these instead of an HTML page, so it knows whether to clear its draft, wait, or go on. Only
the shape lives here; what happened is decided by the view and the services.
"""

from django.http import HttpRequest, JsonResponse

from annotation.errors import LeaseExpired, NotFound, ServiceError, TooFast
from annotation.models import Judgment

#: Each status of the protocol and the HTTP status it is sent with.
HTTP_STATUS = {
    "stored": 200,
    "already_stored": 200,
    "invalid": 400,
    "not_participant": 403,
    "lease_expired": 409,
    "study_closed": 410,
    "too_fast": 429,
}

STORED = "Your answer is saved."
ALREADY_STORED = "Your answer was already saved; it was not saved twice."
STORED_LATE = (
    "Your time for this item ran out before your answer arrived, but the item still had "
    "room, so your answer is saved."
)
NOT_PARTICIPANT = (
    "This browser is no longer taking part in this study (the session may have ended), "
    "so this answer cannot be saved here."
)


def wants_json(request: HttpRequest) -> bool:
    """Whether the page's script asked for the protocol's JSON.

    Asked by name: a browser's own form post accepts ``*/*`` as well as HTML, and must keep
    getting the HTML pages.
    """
    accepted = [part.split(";")[0].strip() for part in request.headers.get("Accept", "").split(",")]
    return "application/json" in accepted and "text/html" not in accepted


def reply(
    status: str,
    message: str,
    *,
    next_url: str | None = None,
    judgment: Judgment | None = None,
    token: str = "",
    fields: list[dict[str, str]] | None = None,
    retry_after: int | None = None,
    work: str | None = None,
) -> JsonResponse:
    """One reply of the protocol; ``judgment`` (with the lease's ``token``) is the ack."""
    ack = None
    if judgment is not None:
        ack = {"lease": token, "part": judgment.part, "judgment_id": judgment.pk}
    body = {
        "status": status,
        "message": message,
        "next_url": next_url,
        "ack": ack,
        "fields": fields or [],
        "retry_after": retry_after,
        "work": work,
    }
    response = JsonResponse(body, status=HTTP_STATUS[status])
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def stored(submitted, *, token: str, next_url: str) -> JsonResponse:
    """The reply to a stored answer: now, before (a resend), or late (``Submitted``)."""
    ack = {"judgment": submitted.judgment, "token": token, "next_url": next_url}
    if not submitted.created:
        return reply("already_stored", ALREADY_STORED, **ack)
    if submitted.late:
        return reply("lease_expired", STORED_LATE, work="stored", **ack)
    return reply("stored", STORED, **ack)


def refused(error: ServiceError, *, fields: list[dict[str, str]], next_url: str) -> JsonResponse:
    """The reply to a refusal of the services, by its kind."""
    if isinstance(error, LeaseExpired):
        return reply("lease_expired", error.message, next_url=next_url, work="discarded")
    if isinstance(error, TooFast):
        retry_after = int((error.details or {}).get("retry_after") or 1)
        return reply("too_fast", error.message, retry_after=retry_after)
    if isinstance(error, NotFound):
        return reply("not_participant", error.message)
    if error.status == 410:
        return reply("study_closed", error.message)
    # Everything else the mode or the protocol refuses: the page stays, with the message.
    return reply("invalid", error.message, fields=fields)
