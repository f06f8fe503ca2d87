"""How a page answers the services' ServiceError: the error page with the status of the
refusal's class (``annotation/errors.py``); the API's mapping is ``apis.exception_handler``."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation import selectors
from annotation.errors import ServiceError


def error_page(request: HttpRequest, exc: ServiceError, title: str) -> HttpResponse:
    """The error page titled ``title``, showing the service's message as is.

    A refusal that says when to try again (``details["retry_after"]``, seconds: the task
    queue is unavailable) sends it as ``Retry-After``.
    """
    response = render(
        request, "error.html", {"title": title, "message": exc.message}, status=exc.status
    )
    retry_after = (exc.details or {}).get("retry_after")
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def job_not_started(request: HttpRequest, exc: ServiceError, title: str) -> HttpResponse:
    """The answer to a job request the service refused, e.g. with the task queue down.

    htmx swaps only 2xx answers into the page, so an htmx request gets the failed job's
    status fragment (it shows the reason) where the progress bar would have gone; a plain
    request gets the error page with the status.
    """
    job_id = (exc.details or {}).get("job_id")
    if request.htmx and job_id:
        job = selectors.job_for_user(request.user, job_id)
        return render(request, "partials/job_status.html", {"job": job})
    return error_page(request, exc, title)
