"""What an MTurk worker sees before accepting the HIT (issue 46, row 14).

MTurk shows a HIT's page to anyone browsing it, with ``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``
and no worker id. That preview showed the intro with the *researcher's* preview banner (its
links empty) and no task at all, so a worker could not tell what they would be doing. Now
it is the intro for workers, with a link to one example task: the study's first item as a
new worker would get it, rendered by the mode's own item template with the unsaved
stand-ins of the researcher's preview (``views/preview.py``). Nothing is recorded: no
participant, no lease, no judgment; a submitted example answer is dropped and the page
says so. Both pages may be framed by MTurk only.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from annotation.errors import ServiceError
from annotation.models import Item, Study
from annotation.modes import catch, get_mode
from annotation.modes.base import Mode
from annotation.services.participants import (
    MTURK_PREVIEW,
    is_mturk_preview,
    study_from_crowd_token,
)
from annotation.views.errors import error_page
from annotation.views.preview import _stand_ins

#: MTurk's parameters of the HIT that the preview's links keep (a preview has no worker).
HIT_KEYS = ("hitId", "turkSubmitTo")


def framed_by_mturk(response: HttpResponse) -> HttpResponse:
    """Let MTurk (and only MTurk) frame ``response``: MTurk shows tasks in its own frame."""
    response.xframe_options_exempt = True
    # django-csp's per-response override (what its @csp_replace decorator sets): the site's
    # policy stays whole; only frame-ancestors names MTurk's hosts instead of 'none'.
    response._csp_replace = {"frame-ancestors": settings.CAPEVAL_MTURK_ORIGINS}
    return response


def _links(token: str, params: dict[str, str]) -> dict[str, str]:
    """The preview's two pages, with the HIT's parameters kept."""
    kept = {key: params[key][:128] for key in HIT_KEYS if params.get(key)}
    query = urlencode({**kept, "assignmentId": MTURK_PREVIEW})
    return {
        "intro_url": f"{reverse('crowd_entry', args=[token])}?{query}",
        "example_url": f"{reverse('crowd_example', args=[token])}?{query}",
    }


def mturk_preview(
    request: HttpRequest, study: Study, token: str, extras=None, mode: Mode | None = None
) -> HttpResponse:
    """The intro for a worker previewing the HIT, with a link to an example task;
    ``extras``: what every intro shows besides the mode's own context; ``mode``: the
    study's, when the calling view has looked it up."""
    mode = mode or get_mode(study.mode)
    context = {
        "study": study,
        # The intro's "Accept the task to begin" instead of its start button.
        "preview": True,
        "worker_preview": _links(token, request.GET.dict()),
        "config": mode.settings(study),
        **(extras or {}),
        **mode.pages.intro_context(study),
    }
    return framed_by_mturk(render(request, mode.pages.intro_template, context))


def _example_item(study: Study) -> Item | None:
    """The item a new worker is served first: by position, never a catch trial (those are
    made for one worker and show an altered caption)."""
    return (
        Item.objects.filter(study=study)
        .exclude(kind=catch.CATCH)
        .order_by("position", "id")[:1]
        .first()
    )


@csrf_exempt  # Nothing is recorded, and MTurk's frame may not send the CSRF cookie.
@require_http_methods(["GET", "POST"])
def crowd_example(request: HttpRequest, token: str) -> HttpResponse:
    """One example task for a worker previewing the HIT, read-only (GET shows it; POST, the
    example's own form, records nothing and shows it again saying so)."""
    params = request.GET.dict()
    try:
        if not is_mturk_preview(params):
            # An accepted HIT goes through the crowd link; this page is only a preview.
            raise ServiceError("This page is only a preview of the task.", field="link")
        study = study_from_crowd_token(token)
    except ServiceError as exc:
        return framed_by_mturk(error_page(request, exc, "Link problem"))
    item = _example_item(study)
    mode = get_mode(study.mode)
    if item is None:
        return mturk_preview(request, study, token, mode=mode)
    assignment = _stand_ins(study, item)
    links = _links(token, params)
    context = {
        "study": study,
        "participant": assignment.participant,
        "assignment": assignment,
        "part": 0,
        "field_errors": [],
        "error_fields": [],
        # The example's form posts back here, where the answer is dropped.
        "submit_url": links["example_url"],
        "worker_preview": {**links, "example": True, "posted": request.method == "POST"},
        "completion": None,
        "crowd_progress": mode.completion_progress(assignment.participant),
        "guidelines": mode.guidelines(study),
        **mode.pages.item_context(assignment, 0),
    }
    return framed_by_mturk(render(request, mode.pages.item_template, context))
