"""Request-level guards."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from annotation.views import health


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


class HealthCheckMiddleware:
    """Answer ``GET /healthz`` (``views/health.py``) before Host validation.

    The container-local probe asks ``http://127.0.0.1:8000/healthz``, and 127.0.0.1 is not
    a production host name: ``CommonMiddleware`` would refuse it (DisallowedHost, 400), and
    so would SecurityMiddleware's HTTPS redirect, which production skips for this path
    (``SECURE_REDIRECT_EXEMPT``). So this middleware sits after SecurityMiddleware (its
    headers still apply) and before CommonMiddleware, and answers only that exact path;
    the answer is "ok" or "database unavailable", builds no URL and reads nothing a Host
    header could change.
    """

    PATH = "/healthz"

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == self.PATH:
            return health.healthz(request)
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    """Answer 503 with ``Retry-After`` when a view fails because the database is
    unreachable (PostgreSQL restarting, a connection cut), instead of a 500; log it.

    ``process_exception`` sees what views raise, and that is where sessions and users are
    loaded (lazily, on first use); a database error raised by a middleware's own code is
    turned into a response by Django before any other middleware could see it, and reaches
    the project's ``handler500`` (``health.server_error``), which answers the same way.
    Only connection-class failures count (``health.database_unreachable``): a real bug stays
    a 500.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not health.database_unreachable(exception):
            return None
        health.log_unavailable(request, exception)
        return health.unavailable_response(request)
