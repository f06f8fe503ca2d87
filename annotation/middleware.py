"""Request-level guards."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string


class RequestSizeLimitMiddleware:
    """Answer 413 to a request whose declared body exceeds CAPEVAL_MAX_UPLOAD_BYTES.

    Checked before Django reads the body, so an oversized upload is never spooled to disk.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.CAPEVAL_MAX_UPLOAD_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            message = (
                f"The upload is {length / 1048576:.1f} MB; the limit is "
                f"{limit / 1048576:.0f} MB. Split it into smaller files."
            )
            body = render_to_string("error.html", {"title": "Upload too large", "message": message})
            return HttpResponse(body, status=413)
        return self.get_response(request)
