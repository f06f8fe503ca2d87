"""The vision question: asked once, with consent, before a participant's first item, and
only in a study whose mode asks it (``Mode.asks_vision``).

A self-reported vision (blind, low vision, sighted) decides which items a participant is
served (a blind or low-vision rater is never shown an image) and whose ratings theirs are
reported with. It is sensitive: stored on the participant by the service alone
(``participant_declare_vision``), never shown per participant on a researcher's page.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation.errors import Conflict, Forbidden, ServiceError
from annotation.models import Participant, Study
from annotation.modes import get_mode
from annotation.services.participants import participant_declare_vision
from annotation.views.participate import (
    _allow_mturk_frame,
    _field_errors,
    _study_and_participant,
    friendly,
    unavailable_page,
)

#: The form's words for the screen-reader question, read into the service's boolean.
YES_NO = {"yes": True, "no": False}


@require_http_methods(["GET", "POST"])
@friendly
def participate_vision(request: HttpRequest, public_id) -> HttpResponse:
    """Ask the vision question (GET) or store the answer and go on to the first item (POST).

    A participant who has answered, or whose study does not ask, is sent on to the items;
    a refusal shows the form again with each field's error, a link meant for the other group
    the page that says so (and nothing is served), a second answer the page that says the
    first one stands.
    """
    study, participant = _study_and_participant(request, public_id)
    mode = get_mode(study.mode)
    next_url = reverse("participate_next", args=[study.public_id])
    if request.method == "GET":
        if not mode.asks_vision or participant.vision:
            return redirect(next_url)
        return _form(request, study, participant)
    answers = {
        "vision": request.POST.get("vision", ""),
        "screen_reader": request.POST.get("screen_reader", ""),
        "consent": request.POST.get("consent", ""),
    }
    try:
        participant_declare_vision(
            participant,
            vision=answers["vision"],
            screen_reader=YES_NO.get(answers["screen_reader"]),
            consent=answers["consent"] == "yes",
        )
    except (Forbidden, Conflict) as exc:
        forbidden = isinstance(exc, Forbidden)
        return unavailable_page(
            request,
            title="This link is for another group" if forbidden else "Already answered",
            message=exc.message,
            status=exc.status,
            study=study,
            participant=participant,
            # Nothing to go on to for a worker on the other group's link.
            next_url="" if forbidden else next_url,
            mode=mode,
        )
    except ServiceError as exc:
        return _form(request, study, participant, error=exc, answers=answers)
    # POST, redirect, GET: a reload of the first item never posts the answer again.
    return redirect(next_url)


def _form(
    request: HttpRequest,
    study: Study,
    participant: Participant,
    *,
    error: ServiceError | None = None,
    answers: dict[str, str] | None = None,
) -> HttpResponse:
    """The question page, with each refused field's message beside it."""
    problems = _field_errors(error)
    context = {
        "study": study,
        "participant": participant,
        "problems": problems,
        "errors": {problem["field"]: problem["message"] for problem in problems},
        "answers": answers or {},
    }
    status = error.status if error is not None else 200
    response = render(request, "participate/vision.html", context, status=status)
    return _allow_mturk_frame(response, participant)
