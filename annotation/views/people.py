"""The People form of a study page, and the invitee's answer on their start page.

Naming someone invites them (``services/people.py``): the form's answer is the same for
every well-formed name, and the person joins only by accepting.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotation import selectors
from annotation.errors import ServiceError
from annotation.models import Study, StudyInvitation
from annotation.services.people import (
    invitation_accept,
    invitation_decline,
    study_people_names,
    study_set_people,
)
from annotation.views.access import researcher_required
from annotation.views.errors import error_page


def people_context(request: HttpRequest, study: Study) -> dict:
    """What ``studies/_people.html`` shows: the names as stored, pending invitations."""
    return {
        "annotator_names": " ".join(study_people_names(study, StudyInvitation.Role.ANNOTATOR)),
        "member_names": " ".join(study_people_names(study, StudyInvitation.Role.MEMBER)),
        "may_change_members": request.user.is_staff or request.user.pk == study.owner_id,
        "pending_invitations": selectors.study_pending_invitations(study),
    }


def _names(raw: str) -> list[str]:
    return [name for name in raw.replace(",", " ").split() if name]


def _saved_message(invited: dict[str, list[str]]) -> str:
    """The one answer to a save: it names what was typed, never what it found."""
    names = [name for role_names in invited.values() for name in role_names]
    if not names:
        return "People saved."
    return (
        f"People saved. Invited: {', '.join(names)}. Each joins when they accept the "
        "invitation on their start page."
    )


@require_http_methods(["GET", "POST"])
@researcher_required
def study_people(request: HttpRequest, study_id: int) -> HttpResponse:
    """Set the study's annotators (and, for its owner, the researchers who share it).

    A GET (a bookmarked or reloaded form address) goes to the study page's People section
    rather than an empty 405.

    A refused name is shown under its field with every typed name kept: in the People
    form itself (htmx swaps it), or, without JavaScript, on a page holding that form.
    """
    study = selectors.study_for_researcher(request.user, study_id)
    if request.method == "GET":
        return redirect(reverse("study_detail", args=[study.pk]) + "#people-heading")
    members = _names(request.POST["members"]) if "members" in request.POST else None
    try:
        change = study_set_people(
            study=study,
            changed_by=request.user,
            annotators=_names(request.POST.get("annotators", "")),
            members=members,
        )
    except ServiceError as exc:
        context = {
            **people_context(request, study),
            "study": study,
            "annotator_names": request.POST.get("annotators", ""),
            "member_names": request.POST.get("members", ""),
            "people_errors": {exc.field or "annotators": exc.message},
        }
        if request.htmx:  # htmx swaps only 2xx answers
            return render(request, "studies/_people.html", context)
        return render(request, "studies/people.html", context, status=exc.status)
    if request.htmx:
        context = {
            **people_context(request, study),
            "study": study,
            "people_saved": _saved_message(change.invited),
        }
        return render(request, "studies/_people.html", context)
    messages.success(request, _saved_message(change.invited))
    return redirect("study_detail", study_id=study.pk)


@require_POST
@login_required
def invitation_answer(request: HttpRequest, invitation_id: int, answer: str) -> HttpResponse:
    """Accept or decline one's own invitation (the start page's buttons); anyone else's, or
    one already answered, is a 404."""
    answer_with = invitation_accept if answer == "accept" else invitation_decline
    try:
        invitation = answer_with(invitation_id=invitation_id, user=request.user)
    except ServiceError as exc:
        return error_page(request, exc, "Invitation not answered")
    role = "a member" if invitation.role == StudyInvitation.Role.MEMBER else "an annotator"
    if answer == "accept":
        messages.success(request, f"You joined {invitation.study.name} as {role}.")
    else:
        messages.info(request, f"You declined to join {invitation.study.name} as {role}.")
    return redirect("home")
