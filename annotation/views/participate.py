"""Participant pages, the same for every mode: crowd entry, intro, next item, submit.

The mode supplies templates and context; the services do assignment and storage.
A crowd worker has no account: their participant id lives in the session, keyed by study,
and the browser they first arrived with is named by a signed, HttpOnly cookie.
"""

import secrets

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.addresses import client_address
from annotation.errors import ServiceError
from annotation.models import Assignment, Participant, Study
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import (
    crowd_arrive,
    crowd_completion,
    crowd_identity,
    is_mturk_preview,
    participant_for_user,
    study_from_crowd_token,
)
from annotation.views.errors import error_page

BROWSER_COOKIE = "capeval_browser"
BROWSER_SALT = "capeval.browser"
BROWSER_COOKIE_MAX_AGE = 365 * 24 * 3600


def _browser_id(request: HttpRequest) -> str:
    """The id of this browser from its signed cookie, or a new one (set by the caller)."""
    value = request.get_signed_cookie(BROWSER_COOKIE, default="", salt=BROWSER_SALT)
    if len(value) == 32 and all(c in "0123456789abcdef" for c in value):
        return value
    return secrets.token_hex(16)


def _set_browser_cookie(response: HttpResponse, browser_id: str) -> None:
    response.set_signed_cookie(
        BROWSER_COOKIE,
        browser_id,
        salt=BROWSER_SALT,
        max_age=BROWSER_COOKIE_MAX_AGE,
        httponly=True,
        secure=settings.SESSION_COOKIE_SECURE,
        samesite=settings.SESSION_COOKIE_SAMESITE,
    )


def _session_key(study: Study) -> str:
    return f"capeval.participant.{study.pk}"


def current_participant(request: HttpRequest, study: Study) -> Participant | None:
    """The participant this browser acts as in the study, or None."""
    participant_id = request.session.get(_session_key(study))
    user = request.user
    # Asked on every request, not remembered in the session: removing an annotator from
    # the study must stop their /next/ and submissions at once, not when the session ends.
    is_annotator = user.is_authenticated and study.annotators.filter(pk=user.pk).exists()
    if participant_id:
        participant = Participant.objects.filter(pk=participant_id, study=study).first()
        # An account's participation follows the account, not a session someone else
        # may be holding, and lasts only while the account annotates the study.
        if participant is not None and (
            participant.user_id is None or (participant.user_id == user.pk and is_annotator)
        ):
            participant.study = study
            return participant
    if is_annotator:
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
    # django-csp's per-response override (what its @csp_replace decorator sets): the site's
    # policy stays whole; only frame-ancestors names MTurk's hosts instead of 'none'.
    response._csp_replace = {"frame-ancestors": settings.CAPEVAL_MTURK_ORIGINS}
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
                request,
                get_mode(study.mode).pages.intro_template,
                {"study": study, "preview": True},
            )
            return _framed_by_mturk(response)
        source, external_id, meta = crowd_identity(params)
    except ServiceError as exc:
        response = error_page(request, exc, "Link problem")
        return _framed_by_mturk(response) if from_mturk else response
    browser_id = _browser_id(request)
    try:
        arrival = crowd_arrive(
            study=study,
            source=source,
            external_id=external_id,
            meta=meta,
            browser_id=browser_id,
            address=client_address(request),
        )
    except ServiceError as exc:
        response = error_page(request, exc, "You cannot join this study now")
        return _framed_by_mturk(response) if from_mturk else response
    participant = arrival.participant
    request.session[_session_key(study)] = participant.pk
    response = redirect("participate_intro", public_id=study.public_id)
    _set_browser_cookie(response, browser_id)
    return _allow_mturk_frame(response, participant)


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
    context = {"study": study, "participant": participant, "config": mode.settings(study)}
    response = render(request, mode.pages.intro_template, context)
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
        "completion": crowd_completion(participant),
        **mode.pages.item_context(assignment, part),
    }
    return _allow_mturk_frame(
        render(request, mode.pages.item_template, context, status=status), participant
    )


@require_GET
def participate_next(request: HttpRequest, public_id) -> HttpResponse:
    """Show the participant's current item; a reload shows the same one, clock unchanged."""
    study, participant = _study_and_participant(request, public_id)
    try:
        assignment = assignment_next(participant=participant)
    except ServiceError as exc:
        return _allow_mturk_frame(error_page(request, exc, "Please wait"), participant)
    if assignment is None:
        mode = get_mode(study.mode)
        context = {
            "study": study,
            "participant": participant,
            "mode_finished_template": mode.pages.finished_template,
            "completion": crowd_completion(participant),
            **mode.pages.finished_context(participant),
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
    raw_part = request.POST.get("part", "0").strip()
    # Only ASCII digits: int() would also read "３" or "٣" as 3.
    part = int(raw_part) if raw_part.isascii() and raw_part.isdigit() else -1
    try:
        outcome = judgment_submit(
            participant=participant,
            token=token,
            data=mode.pages.parse_form(request.POST, part),
            part=part,
        )
    except ServiceError as exc:
        assignment = (
            Assignment.objects.select_related("item")
            .filter(token=token, participant=participant)
            .first()
        )
        if assignment is None or assignment.status != Assignment.Status.OPEN:
            return _allow_mturk_frame(error_page(request, exc, "Not saved"), participant)
        assignment.participant = participant
        return _render_item(request, study, participant, assignment, error=exc, status=exc.status)
    # judgment_submit left the participant's state and status as stored: no reload.
    feedback = mode.pages.feedback_context(outcome.judgment)
    if feedback:
        context = {
            "study": study,
            "participant": participant,
            "judgment": outcome.judgment,
            "next_url": reverse("participate_next", args=[study.public_id]),
            "completion": crowd_completion(participant),
            **feedback,
        }
        return _allow_mturk_frame(
            render(request, mode.pages.feedback_template, context), participant
        )
    return redirect("participate_next", public_id=study.public_id)
