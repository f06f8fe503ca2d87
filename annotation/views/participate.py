"""Participant pages, the same for every mode: crowd entry, intro, next item, submit.

The mode supplies templates and context; the services do assignment and storage.
A crowd worker has no account: their participant id lives in the session, keyed by study.
"""

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.models import Assignment, Participant, Study
from annotation.modes import SubmissionError, get_mode
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import (
    CrowdLinkError,
    crowd_identity,
    is_mturk_preview,
    participant_for_crowd_worker,
    participant_for_user,
    study_from_crowd_token,
)

MTURK_FRAME_ANCESTORS = "frame-ancestors https://www.mturk.com https://workersandbox.mturk.com"


def _session_key(study: Study) -> str:
    return f"capeval.participant.{study.pk}"


def current_participant(request: HttpRequest, study: Study) -> Participant | None:
    """The participant this browser acts as in the study, or None."""
    participant_id = request.session.get(_session_key(study))
    user = request.user
    if participant_id:
        participant = Participant.objects.filter(pk=participant_id, study=study).first()
        # An account's participation follows the account, not a session someone else
        # may be holding.
        if participant is not None and participant.user_id in (None, user.pk):
            participant.study = study
            return participant
    if user.is_authenticated and study.annotators.filter(pk=user.pk).exists():
        participant = participant_for_user(study=study, user=user)
        participant.study = study
        request.session[_session_key(study)] = participant.pk
        return participant
    return None


def _study_and_participant(request: HttpRequest, public_id) -> tuple[Study, Participant]:
    study = Study.objects.filter(public_id=public_id, status=Study.Status.LIVE).first()
    if study is None:
        raise Http404("This study is not open.")
    participant = current_participant(request, study)
    if participant is None:
        raise Http404("You are not a participant of this study.")
    return study, participant


def _framed_by_mturk(response: HttpResponse) -> HttpResponse:
    response.xframe_options_exempt = True
    response["Content-Security-Policy"] = MTURK_FRAME_ANCESTORS
    return response


def _allow_mturk_frame(response: HttpResponse, participant: Participant | None) -> HttpResponse:
    """MTurk shows tasks inside its own frame; every other page keeps X-Frame-Options DENY."""
    if participant is not None and participant.source == Participant.Source.MTURK:
        return _framed_by_mturk(response)
    return response


@require_GET
def crowd_entry(request: HttpRequest, token: str) -> HttpResponse:
    """A crowd worker arrives from Prolific or MTurk with a signed study link.

    An MTurk preview (``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``) shows the intro read-only
    and creates nothing. Only what MTurk opens may be framed, and only by MTurk.
    """
    params = request.GET.dict()
    from_mturk = "assignmentId" in params or "workerId" in params
    try:
        study = study_from_crowd_token(token)
        if is_mturk_preview(params):
            response = render(
                request, get_mode(study.mode).intro_template, {"study": study, "preview": True}
            )
            return _framed_by_mturk(response)
        source, external_id, meta = crowd_identity(params)
    except CrowdLinkError as exc:
        response = render(
            request, "error.html", {"title": "Link problem", "message": str(exc)}, status=400
        )
        return _framed_by_mturk(response) if from_mturk else response
    participant, _ = participant_for_crowd_worker(
        study=study, source=source, external_id=external_id, meta=meta
    )
    request.session[_session_key(study)] = participant.pk
    return _allow_mturk_frame(redirect("participate_intro", public_id=study.public_id), participant)


@require_GET
def participate_intro(request: HttpRequest, public_id) -> HttpResponse:
    study = Study.objects.filter(public_id=public_id, status=Study.Status.LIVE).first()
    if study is None:
        raise Http404("This study is not open.")
    participant = current_participant(request, study)
    if participant is None:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        raise Http404("You are not a participant of this study.")
    mode = get_mode(study.mode)
    response = render(request, mode.intro_template, {"study": study, "participant": participant})
    return _allow_mturk_frame(response, participant)


def _render_item(request, study, participant, assignment: Assignment, error=None, status=200):
    mode = get_mode(study.mode)
    # An open lease of a one-part item has no judgment yet: its only part closes it.
    part = assignment.judgments.count() if mode.parts(assignment.item) > 1 else 0
    context = {
        "study": study,
        "participant": participant,
        "assignment": assignment,
        "part": part,
        "error": error,
        "submit_url": reverse("participate_submit", args=[study.public_id, assignment.token]),
        **mode.page_context(assignment, part),
    }
    return _allow_mturk_frame(
        render(request, mode.item_template, context, status=status), participant
    )


@require_GET
def participate_next(request: HttpRequest, public_id) -> HttpResponse:
    """Show the participant's current item; a reload shows the same one, clock unchanged."""
    study, participant = _study_and_participant(request, public_id)
    assignment = assignment_next(participant=participant)
    if assignment is None:
        mode = get_mode(study.mode)
        context = {
            "study": study,
            "participant": participant,
            "mode_finished_template": mode.finished_template,
            **mode.finished_context(participant),
        }
        return _allow_mturk_frame(
            render(request, "participate/finished.html", context), participant
        )
    return _render_item(request, study, participant, assignment)


@require_POST
def participate_submit(request: HttpRequest, public_id, token: str) -> HttpResponse:
    """Store a submission; show the mode's feedback or go on to the next item."""
    study, participant = _study_and_participant(request, public_id)
    mode = get_mode(study.mode)
    try:
        part = int(request.POST.get("part", "0"))
    except ValueError:
        part = -1
    try:
        outcome = judgment_submit(
            participant=participant,
            token=token,
            data=mode.parse_form(request.POST, part),
            part=part,
        )
    except SubmissionError as exc:
        assignment = (
            Assignment.objects.select_related("item")
            .filter(token=token, participant=participant)
            .first()
        )
        if assignment is None or assignment.status != Assignment.Status.OPEN:
            response = render(
                request,
                "error.html",
                {"title": "Not saved", "message": exc.message},
                status=exc.status,
            )
            return _allow_mturk_frame(response, participant)
        assignment.participant = participant
        return _render_item(request, study, participant, assignment, error=exc, status=exc.status)
    # judgment_submit left the participant's state and status as stored: no reload.
    feedback = mode.feedback_context(outcome.judgment)
    if feedback:
        context = {
            "study": study,
            "participant": participant,
            "judgment": outcome.judgment,
            "next_url": reverse("participate_next", args=[study.public_id]),
            **feedback,
        }
        return _allow_mturk_frame(render(request, mode.feedback_template, context), participant)
    return redirect("participate_next", public_id=study.public_id)
