"""How a page answers the services' ServiceError: the error page with the error's status."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.errors import ServiceError


def error_page(request: HttpRequest, exc: ServiceError, title: str) -> HttpResponse:
    """The error page titled ``title``, showing the service's message as is."""
    return render(
        request, "error.html", {"title": title, "message": exc.message}, status=exc.status
    )
