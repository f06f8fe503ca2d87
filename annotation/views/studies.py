"""Researcher pages: dashboard, study creation and detail, job progress and downloads."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import selectors
from annotation.errors import ServiceError
from annotation.forms import StudyForm
from annotation.models import Job
from annotation.services.assignments import assignment_release
from annotation.services.jobs import job_sweep_stale
from annotation.services.participants import crowd_link_token
from annotation.services.studies import (
    study_close,
    study_create,
    study_open,
    study_set_people,
)
from annotation.views.access import researcher_required
from annotation.views.errors import error_page


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    studies = selectors.studies_for_researcher(request.user).select_related("owner")
    to_annotate = selectors.studies_for_annotator(request.user)
    return render(request, "home.html", {"studies": studies, "to_annotate": to_annotate})


@require_http_methods(["GET", "POST"])
@researcher_required
def study_new(request: HttpRequest) -> HttpResponse:
    form = StudyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            study = study_create(owner=request.user, **form.cleaned_data)
        except ServiceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("study_detail", study_id=study.pk)
    return render(request, "studies/new.html", {"form": form})


@require_GET
@researcher_required
def study_detail(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    context = {
        "study": study,
        "counts": selectors.study_counts(study),
        "jobs": study.jobs.all()[:10],
        "crowd_link": _crowd_link(request, study),
        "annotator_names": " ".join(study.annotators.values_list("username", flat=True)),
        "member_names": " ".join(study.members.values_list("username", flat=True)),
        "may_change_members": request.user.is_staff or request.user.pk == study.owner_id,
        "leases": selectors.open_leases(study),
        "integrity": selectors.crowd_integrity(study),
        **selectors.crowd_setup(study),
    }
    return render(request, "studies/detail.html", context)


@require_POST
@researcher_required
def study_change_status(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    action = request.POST.get("action")
    try:
        if action == "open":
            study_open(study=study)
        elif action == "close":
            study_close(study=study)
        else:
            raise ServiceError(f"Unknown action {action!r}.")
    except ServiceError as exc:
        return error_page(request, exc, "Cannot change status")
    return redirect("study_detail", study_id=study.pk)


@require_POST
@researcher_required
def study_release_lease(request: HttpRequest, study_id: int, assignment_id: int) -> HttpResponse:
    """Give back one open lease (a worker who walked away), so its item is served again."""
    study = selectors.study_for_researcher(request.user, study_id)
    if assignment_release(
        study=study, assignment_id=assignment_id, released_by=request.user.username
    ):
        messages.success(request, "Lease released; its item is served again.")
    else:
        messages.info(request, "That lease was no longer open (answered or released).")
    return redirect("study_detail", study_id=study.pk)


@require_GET
@login_required
def job_status(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job's progress bar; htmx polls this fragment until the job finishes.

    A running job whose process vanished is failed here (the embedded default has no beat
    to sweep it), so the page shows why and stops polling.
    """
    job = selectors.job_for_user(request.user, job_id)
    if job_sweep_stale(job_ids=[job.pk]):
        job.refresh_from_db()
    template = "partials/job_status.html" if request.htmx else "jobs/detail.html"
    return render(request, template, {"job": job})


@require_GET
@login_required
def job_download(request: HttpRequest, job_id: int) -> FileResponse:
    job = selectors.job_for_user(request.user, job_id)
    if job.status != Job.Status.DONE or not job.result_file:
        raise Http404("This job has no file.")
    path = selectors.job_file_path(job)
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)


def _crowd_link(request: HttpRequest, study) -> str:
    """The absolute crowd link of a live study (Prolific/MTurk append their parameters)."""
    if study.status != study.Status.LIVE:
        return ""
    return request.build_absolute_uri(reverse("crowd_entry", args=[crowd_link_token(study)]))


def _names(raw: str) -> list[str]:
    return [name for name in raw.replace(",", " ").split() if name]


@require_POST
@researcher_required
def study_people(request: HttpRequest, study_id: int) -> HttpResponse:
    """Set the study's annotators (and, for its owner, the researchers who share it)."""
    study = selectors.study_for_researcher(request.user, study_id)
    members = _names(request.POST["members"]) if "members" in request.POST else None
    try:
        study_set_people(
            study=study,
            changed_by=request.user,
            annotators=_names(request.POST.get("annotators", "")),
            members=members,
        )
    except ServiceError as exc:
        return error_page(request, exc, "People not changed")
    return redirect("study_detail", study_id=study.pk)
