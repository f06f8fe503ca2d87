"""``handler400``: a request Django itself refuses before any view (more form fields than
``DATA_UPLOAD_MAX_NUMBER_FIELDS``, a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, a suspicious
header) is answered under ``/api/`` as the API's JSON refusal, the shape its schema
documents (``annotation/api_schema.py``), not as Django's HTML page; pages keep that page.
"""

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request as django_bad_request

#: Refusals whose message is Django's own fixed text, safe to show; others say less.
_SAID = (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not request.path.startswith("/api/"):
        return django_bad_request(request, exception)
    detail = str(exception) if isinstance(exception, _SAID) else "The request is malformed."
    return JsonResponse({"detail": detail, "code": "invalid"}, status=400)
