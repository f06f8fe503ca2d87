"""Participant pages, the same for every mode: crowd entry, intro, next item, submit.

The mode supplies templates and context; the services do assignment and storage.
A crowd worker has no account: their participant id lives in the session, keyed by study,
and the browser they first arrived with is named by a signed, HttpOnly cookie.
"""

import secrets
from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.addresses import client_address
from annotation.errors import ServiceError
from annotation.models import Assignment, Participant, Study
from annotation.modes import catch, get_mode
from annotation.modes.base import Mode
from annotation.services import participant_sql
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import (
    crowd_arrive,
    crowd_completion,
    crowd_identity,
    crowd_link_group,
    is_mturk_preview,
    participant_for_user,
    study_from_crowd_token,
)
from annotation.text import clean_answer
from annotation.views import submit_replies
from annotation.views.errors import error_page
from annotation.views.worker_preview import framed_by_mturk as _framed_by_mturk
from annotation.views.worker_preview import mturk_preview

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


PARTICIPANT_SESSION_PREFIX = "capeval.participant."


def _session_key(study: Study) -> str:
    return f"{PARTICIPANT_SESSION_PREFIX}{study.pk}"


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


class Unavailable(Exception):
    """The participation page cannot be shown; ``response`` is the friendly page instead.

    ``code`` and ``message`` say the same for the submit protocol's JSON (issue 42):
    ``not_participant`` or ``study_closed``.
    """

    def __init__(self, response: HttpResponse, *, code: str = "not_participant", message=""):
        super().__init__(response.status_code)
        self.response = response
        self.code = code
        self.message = message or submit_replies.NOT_PARTICIPANT


def unavailable_page(
    request: HttpRequest,
    *,
    title: str,
    message: str,
    status: int,
    study: Study | None = None,
    participant: Participant | None = None,
    source: str = "",
    next_url: str = "",
    mode: Mode | None = None,
) -> HttpResponse:
    """The site's page for participation that cannot go on, saying what to do next.

    What to do depends on who is asking: a crowd worker (``source``: the participant's, or
    the platform the link came from) returns the submission there, a registered annotator
    goes back to their studies. Never Django's own error pages: with DEBUG they show
    internals, and a crowd worker needs a way out. A worker who earned the completion code
    still sees it and the way back (``completion``). ``mode``: the study's, if the view has it.
    """
    if participant is not None:
        source = participant.source
    context = {
        "title": title,
        "message": message,
        "study": study,
        "participant": participant,
        "source": source,
        "next_url": next_url,
        "completion": crowd_completion(participant, mode) if participant is not None else {},
    }
    response = render(request, "participate/unavailable.html", context, status=status)
    if source == Participant.Source.MTURK:
        return _framed_by_mturk(response)
    return response


def _not_a_participant(request: HttpRequest) -> HttpResponse:
    # 404 and no study name: a study's address must not tell strangers what it is.
    return unavailable_page(
        request,
        title="Not found",
        message="There is no study for you at this address.",
        status=404,
    )


def _open_study(request: HttpRequest, public_id) -> Study:
    """The live study of ``public_id``; Unavailable with the friendly page otherwise.

    A closed study answers 410 Gone to its own participants only; anyone else gets the
    same 404 as for an address that names no study.
    """
    study = Study.objects.filter(public_id=public_id).first()
    if study is None:
        raise Unavailable(_not_a_participant(request))
    if study.status != Study.Status.LIVE:
        participant = current_participant(request, study)
        if participant is None:
            raise Unavailable(_not_a_participant(request))
        closed = study.status == Study.Status.CLOSED
        message = (
            "The researcher has closed this study, so it takes no more answers. "
            "Everything you submitted before is kept."
            if closed
            else "The researcher has not opened this study yet."
        )
        raise Unavailable(
            unavailable_page(
                request,
                title="This study is closed" if closed else "This study has not started",
                message=message,
                status=410 if closed else 404,
                study=study,
                participant=participant,
            ),
            code="study_closed",
            message=message,
        )
    return study


def _crowd_participant_of_live_study(request: HttpRequest, public_id) -> Participant | None:
    """The crowd participant this session holds in the live study ``public_id``, read with
    its study in one query; None when that does not settle it (then the full path decides).

    A crowd worker's every request starts here (issue 27): the study and the participant
    are one join instead of two queries. Only the plain case is taken: a live study and a
    participant with no account, stored in this session under that study's key, which
    is exactly when ``current_participant`` returns it whoever is logged in. Accounts
    (whose annotator check is asked each time) and every other case go the full way. The
    join is a hand-written statement (issue 48): through the ORM, building it cost more
    than the rest of the view's reads.
    """
    ids = [
        value
        for key, value in request.session.items()
        if key.startswith(PARTICIPANT_SESSION_PREFIX) and isinstance(value, int)
    ]
    if not ids:
        return None
    participant = participant_sql.crowd_participant(ids, public_id)
    if (
        participant is None
        or participant.study.status != Study.Status.LIVE
        or request.session.get(_session_key(participant.study)) != participant.pk
    ):
        return None
    return participant


def _study_and_participant(request: HttpRequest, public_id) -> tuple[Study, Participant]:
    participant = _crowd_participant_of_live_study(request, public_id)
    if participant is not None:
        return participant.study, participant
    study = _open_study(request, public_id)
    participant = current_participant(request, study)
    if participant is None:
        raise Unavailable(_not_a_participant(request))
    return study, participant


def friendly(view):
    """Answer a view's ``Unavailable`` with its page (one place, every participation view)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Unavailable as refused:
            return refused.response

    return wrapper


def _allow_mturk_frame(response: HttpResponse, participant: Participant | None) -> HttpResponse:
    """MTurk shows tasks inside its own frame; every other page keeps X-Frame-Options DENY."""
    if participant is not None and participant.source == Participant.Source.MTURK:
        return _framed_by_mturk(response)
    return response


@require_GET
def crowd_entry(request: HttpRequest, token: str) -> HttpResponse:
    """A crowd worker arrives from Prolific or MTurk with a signed study link.

    An MTurk preview (``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``) shows the intro for
    workers with an example task (``views/worker_preview.py``) and creates nothing. Only
    what MTurk opens may be framed, and only by MTurk.
    """
    params = request.GET.dict()
    from_mturk = "assignmentId" in params or "workerId" in params
    # Who is refused, so the page can say where to go back to (no participant exists yet).
    if from_mturk:
        source = Participant.Source.MTURK
    elif "PROLIFIC_PID" in params:
        source = Participant.Source.PROLIFIC
    else:
        source = ""
    try:
        study = study_from_crowd_token(token)
        if is_mturk_preview(params):
            # The intro for workers and an example task (views/worker_preview.py; issue 46,
            # row 14), not the researcher's preview banner.
            mode = get_mode(study.mode)
            return mturk_preview(
                request,
                study,
                token,
                _intro_extras(
                    mode, study, Participant(study=study, source=Participant.Source.MTURK)
                ),
                mode=mode,
            )
        source, external_id, meta = crowd_identity(params)
        link_group = crowd_link_group(params)
    except ServiceError as exc:
        response = unavailable_page(
            request, title="Link problem", message=exc.message, status=exc.status, source=source
        )
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
            link_group=link_group,
        )
    except ServiceError as exc:
        response = unavailable_page(
            request,
            title="You cannot join this study now",
            message=exc.message,
            status=exc.status,
            source=source,
        )
        return _framed_by_mturk(response) if from_mturk else response
    participant = arrival.participant
    if arrival.reentry:
        # Paid before, back from another browser (issue 46, row 3): the code again, and
        # nothing that lets this browser act as the participant (no session, no cookie).
        participant.study = study
        context = {
            "study": study,
            "participant": participant,
            "completion": crowd_completion(participant),
            "catch_failed": False,
        }
        return _allow_mturk_frame(
            render(request, "participate/finished.html", context), participant
        )
    request.session[_session_key(study)] = participant.pk
    response = redirect("participate_intro", public_id=study.public_id)
    _set_browser_cookie(response, browser_id)
    return _allow_mturk_frame(response, participant)


@require_GET
@friendly
def participate_intro(request: HttpRequest, public_id) -> HttpResponse:
    study = _open_study(request, public_id)
    participant = current_participant(request, study)
    if participant is None:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return _not_a_participant(request)
    mode = get_mode(study.mode)
    context = {
        "study": study,
        "participant": participant,
        "config": mode.settings(study),
        **_intro_extras(mode, study, participant),
    }
    context.update(mode.pages.intro_context(study))
    response = render(request, mode.pages.intro_template, context)
    return _allow_mturk_frame(response, participant)


def completion_rule(progress) -> str:
    """What earns a crowd worker the completion code, in a sentence built from the mode's
    ``completion_progress`` (issue 46, row 20: every intro says it); "" when none."""
    if progress is None or progress.needed <= 0:
        return ""
    note = progress.note.strip()
    if note and not note.startswith("and "):
        note = f"({note})"
    tail = f" {note}" if note else ""
    return (
        f"You receive this study's completion code after {progress.needed} "
        f"{progress.unit}{tail}; every page shows how far you are."
    )


def _intro_extras(mode, study: Study, participant: Participant) -> dict:
    """What every mode's intro shows: the guidelines inline (issue 46, row 5) and, to a crowd
    worker, what earns the completion code (row 20)."""
    rule = ""
    if participant.source != Participant.Source.ACCOUNT:
        rule = completion_rule(mode.completion_progress(participant))
    return {
        "guidelines": mode.guidelines(study),
        "guidelines_inline": True,
        "completion_rule": rule,
    }


def _crowd_context(mode, participant: Participant) -> dict:
    """The completion code (or screen-out) a crowd worker is shown, else their progress."""
    completion = crowd_completion(participant, mode)
    progress = None
    if not completion and participant.source != Participant.Source.ACCOUNT:
        progress = mode.completion_progress(participant)
    return {"completion": completion, "crowd_progress": progress}


def _field_errors(error: ServiceError | None) -> list[dict[str, str]]:
    """Each field a refusal names with its message: a mode may refuse several at once
    (``details["fields"]``, e.g. every missing THumB score), else the one ``field``."""
    if error is None:
        return []
    listed = (error.details or {}).get("fields")
    if listed:
        return list(listed)
    return [{"field": error.field, "message": error.message}] if error.field else []


def _render_item(
    request,
    study,
    mode: Mode,
    participant,
    assignment: Assignment,
    error=None,
    status=200,
    answers=None,
):
    # An open lease of a one-part item has no judgment yet: its only part closes it.
    part = assignment.judgments.count() if mode.parts(assignment.item) > 1 else 0
    # A mode whose pages can show a refused submission's answers gets them back.
    keep = {"answers": answers} if answers and mode.pages.keeps_answers else {}
    field_errors = _field_errors(error)
    submit_url = reverse("participate_submit", args=[study.public_id, assignment.token])
    context = {
        "study": study,
        "participant": participant,
        "assignment": assignment,
        "part": part,
        "error": error,
        "field_errors": field_errors,
        "error_fields": [problem["field"] for problem in field_errors],
        "submit_url": submit_url,
        # What the page's script keeps the work in progress under until the server has it
        # (issue 42, docs/participation.md), the same for every mode.
        "draft": {
            "key": f"{assignment.token}:{part}",
            "expires_at": assignment.expires_at.isoformat(),
            "submit_url": submit_url,
        },
        # The header's "Guidelines" dialog (templates/_base.html), the same for every mode.
        "guidelines": mode.guidelines(study),
        **_crowd_context(mode, participant),
        **mode.pages.item_context(assignment, part, **keep),
    }
    return _allow_mturk_frame(
        render(request, mode.pages.item_template, context, status=status), participant
    )


@require_GET
@friendly
def participate_next(request: HttpRequest, public_id) -> HttpResponse:
    """Show the participant's current item; a reload shows the same one, clock unchanged."""
    study, participant = _study_and_participant(request, public_id)
    # The request's one lookup of the mode: the services and the page are handed it.
    mode = get_mode(study.mode)
    if mode.asks_vision and not participant.vision:
        # Asked once, before the first item: the answer decides which items are served.
        return redirect("participate_vision", public_id=study.public_id)
    try:
        # The study as read above: the service locks the participant and reads nothing else
        # it was handed (issue 48).
        assignment = assignment_next(participant=participant, mode=mode, study=study)
    except ServiceError as exc:
        return _allow_mturk_frame(error_page(request, exc, "Please wait"), participant)
    if assignment is None:
        context = {
            "study": study,
            "participant": participant,
            "mode_finished_template": mode.pages.finished_template,
            "completion": crowd_completion(participant, mode),
            "catch_failed": catch.is_flagged(participant),
            **mode.pages.finished_context(participant),
        }
        return _allow_mturk_frame(
            render(request, "participate/finished.html", context), participant
        )
    return _render_item(request, study, mode, participant, assignment)


@require_POST
@friendly
def participate_submit(request: HttpRequest, public_id, token: str) -> HttpResponse:
    """Store a submission, then go on to the mode's feedback page or the next item.

    Posted with ``Accept: application/json`` (the page's script, issue 42), every outcome is
    answered in the protocol's JSON (``views/submit_replies.py``); otherwise with pages and
    redirects as without JavaScript.
    """
    as_json = submit_replies.wants_json(request)
    try:
        study, participant = _study_and_participant(request, public_id)
    except Unavailable as refused:
        if as_json:
            return submit_replies.reply(refused.code, refused.message)
        raise
    mode = get_mode(study.mode)
    next_url = reverse("participate_next", args=[study.public_id])
    raw_part = request.POST.get("part", "0").strip()
    # Only ASCII digits: int() would also read "３" or "٣" as 3.
    part = int(raw_part) if raw_part.isascii() and raw_part.isdigit() else -1
    data: dict = {}
    try:
        # Every mode's answer, before the mode reads it (issue 45): no character PostgreSQL
        # cannot store, no JSON deep enough to run the mode's ``json`` out of recursion.
        clean_answer(request.POST.lists())
        data = mode.pages.parse_form(request.POST, part)
        outcome = judgment_submit(
            participant=participant, token=token, data=data, part=part, mode=mode, study=study
        )
    except ServiceError as exc:
        if as_json:
            return submit_replies.refused(exc, fields=_field_errors(exc), next_url=next_url)
        assignment = (
            Assignment.objects.select_related("item")
            .filter(token=token, participant=participant)
            .first()
        )
        if assignment is None or assignment.status != Assignment.Status.OPEN:
            return unavailable_page(
                request,
                title="Not saved",
                message=exc.message,
                status=exc.status,
                study=study,
                participant=participant,
                next_url=next_url,
                mode=mode,
            )
        assignment.participant = participant
        return _render_item(
            request,
            study,
            mode,
            participant,
            assignment,
            error=exc,
            status=exc.status,
            answers=data,
        )
    # The feedback is a page of its own (POST, redirect, GET): reloading it never posts the
    # answer again. judgment_submit left the participant's state as stored: no reload.
    if mode.pages.feedback_context(outcome.judgment):
        next_url = reverse("participate_feedback", args=[study.public_id, token])
    if as_json:
        return submit_replies.stored(outcome, token=token, next_url=next_url)
    # A redirect is not a page (the frame shows where it leads): it keeps DENY.
    return redirect(next_url)


@require_GET
@friendly
def participate_feedback(request: HttpRequest, public_id, token: str) -> HttpResponse:
    """The mode's feedback on the participant's latest stored answer of the lease ``token``.

    Only the lease's own participant sees it (anyone else: not found); when that answer has
    no feedback (a HUMANr trial before the group's last), on to the next item.
    """
    study, participant = _study_and_participant(request, public_id)
    judgment = participant_sql.latest_answer(token, participant.pk)
    if judgment is None:
        return _not_a_participant(request)
    judgment.participant = participant
    mode = get_mode(study.mode)
    next_url = reverse("participate_next", args=[study.public_id])
    feedback = mode.pages.feedback_context(judgment)
    if not feedback:
        return redirect(next_url)
    context = {
        "study": study,
        "participant": participant,
        "judgment": judgment,
        "next_url": next_url,
        "guidelines": mode.guidelines(study),
        **_crowd_context(mode, participant),
        **feedback,
    }
    return _allow_mturk_frame(render(request, mode.pages.feedback_template, context), participant)
