"""Researcher pages: dashboard, study creation and detail, job progress and downloads."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from annotation import selectors, storage
from annotation.dashboard import study_completion_reach
from annotation.errors import ServiceError, StorageUnavailable
from annotation.forms import SettingsForm, StudyForm
from annotation.models import Job, Study
from annotation.modes import get_mode
from annotation.registry import mode_names
from annotation.services.assignments import assignment_release
from annotation.services.exports import export_table_choices
from annotation.services.jobs import job_sweep_stale
from annotation.services.studies import (
    study_close,
    study_create,
    study_open,
    study_reopen,
    study_update_settings,
)
from annotation.views.access import researcher_required
from annotation.views.dashboard import crowd_panel_context, dashboard_context
from annotation.views.errors import error_page
from annotation.views.people import people_context


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    studies = selectors.studies_with_counts(
        selectors.studies_for_researcher(request.user).select_related("owner")
    ).order_by("-created_at", "-id")
    context = {
        "studies": studies,
        "to_annotate": selectors.studies_for_annotator(request.user),
        "invitations": selectors.invitations_for(request.user),
    }
    return render(request, "home.html", context)


def _chosen_mode(request: HttpRequest) -> str:
    """The mode whose settings the new-study page shows: the one asked for, else the first."""
    asked = (request.POST if request.method == "POST" else request.GET).get("mode", "")
    return asked if asked in mode_names() else mode_names()[0]


@require_http_methods(["GET", "POST"])
@researcher_required
def study_new(request: HttpRequest) -> HttpResponse:
    """Create a study: its name and mode, then the mode's settings as typed fields.

    Changing the mode swaps the settings fieldset (htmx asks for it with ``?mode=``); without
    JavaScript the "Show this mode's settings" button posts ``choose_mode`` and the page comes
    back with the typed name kept. Settings are checked by the same ``clean()`` as the API's,
    and a refusal is shown under the setting it names.
    """
    mode = _chosen_mode(request)
    if request.method == "GET" and request.htmx:
        return render(
            request, "studies/_settings_fields.html", {"settings_form": SettingsForm(mode)}
        )
    data = request.POST if request.method == "POST" else None
    others_shown = data is not None and any(
        SettingsForm(other, data).changed_from_defaults() for other in mode_names() if other != mode
    )
    if data is not None and ("choose_mode" in data or others_shown):
        # The page showed another mode's settings (no JavaScript): show this mode's first.
        typed = ("name", "description", "seed", "settings")
        keep = {key: data[key] for key in typed if key in data}
        form = StudyForm(initial={**keep, "mode": mode})
        if others_shown and "choose_mode" not in data:
            messages.info(request, "The mode changed: check its settings, then create the study.")
        context = {"form": form, "settings_form": SettingsForm(mode)}
        return render(request, "studies/new.html", context)
    form = StudyForm(data, initial={"mode": mode})
    settings_form = SettingsForm(mode, data)
    if data is not None and all([form.is_valid(), settings_form.is_valid()]):
        fields = dict(form.cleaned_data)
        typed_json = fields.pop("settings")
        try:
            study = study_create(
                owner=request.user, settings={**settings_form.values(), **typed_json}, **fields
            )
        except ServiceError as exc:
            if exc.field == "settings":
                settings_form.show_error(exc, fallback=form, json_keys=frozenset(typed_json))
            else:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("study_detail", study_id=study.pk)
    return render(request, "studies/new.html", {"form": form, "settings_form": settings_form})


@require_http_methods(["GET", "POST"])
@researcher_required
def study_settings(request: HttpRequest, study_id: int) -> HttpResponse:
    """Change a study's settings with the fields and checks of creation: every setting of
    a draft, only the crowd and report settings of an opened study (``study_update_settings``)."""
    study = selectors.study_for_researcher(request.user, study_id)
    data = request.POST if request.method == "POST" else None
    settings_form = SettingsForm(study.mode, data, initial=study.settings)
    if study.status != Study.Status.DRAFT:
        # The items were built with the mode's settings: only the crowd and report ones stay
        # editable (a disabled field keeps its stored value whatever is posted).
        for field in settings_form.fields.values():
            field.disabled = field.disabled or not getattr(field, "live", True)
    if data is not None and settings_form.is_valid():
        try:
            # Over the stored ones: a post without the fieldset changes nothing.
            stored = {k: v for k, v in study.settings.items() if k in settings_form.fields}
            changed = {**stored, **settings_form.values()}
            study_update_settings(study=study, settings=changed, changed_by=request.user)
        except ServiceError as exc:
            settings_form.show_error(exc, fallback=settings_form)
        else:
            messages.success(request, "Settings saved.")
            return redirect("study_detail", study_id=study.pk)
    context = {"study": study, "settings_form": settings_form}
    return render(request, "studies/settings.html", context)


@require_GET
@researcher_required
def study_detail(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    mode = get_mode(study.mode)  # the page's one lookup, handed to every part of it
    context = {
        "study": study,
        "counts": selectors.study_counts(study),
        "caption_notes": mode.caption_notes(study),
        "jobs": selectors.study_jobs_for_user(request.user, study)[:10],
        **people_context(request, study),
        # The captions with their metric scores (every mode), then the mode's own tables.
        "export_extra_tables": export_table_choices(study, mode),
        # The crowd setup panel and the live dashboard (views/dashboard.py).
        **crowd_panel_context(request, study, mode),
        **dashboard_context(request, study, mode),
    }
    return render(request, "studies/detail.html", context)


@require_POST
@researcher_required
def study_change_status(request: HttpRequest, study_id: int) -> HttpResponse:
    """Open, close or reopen the study; a refusal is shown on the study's status page.

    The study page's "Close the study" leads to ``study_close_confirm`` first, which says
    what closing does and posts here.
    """
    study = selectors.study_for_researcher(request.user, study_id)
    action = request.POST.get("action")
    changes = {"open": study_open, "close": study_close, "reopen": study_reopen}
    try:
        if action not in changes:
            raise ServiceError(f"Unknown action {action!r}.")
        changes[action](study=study)
    except ServiceError as exc:
        context = {"study": study, "error": exc.message, "counts": selectors.study_counts(study)}
        return render(request, "studies/status.html", context, status=exc.status)
    if action in ("open", "reopen") and (reach := study_completion_reach(study)):
        # Warned, not refused: a lab study of accounts pays no code (issue 46, row 2).
        messages.warning(request, reach)
    if action == "close":
        messages.success(request, "The study is closed; its judgments are kept. Reopen serves it.")
    elif action == "reopen":
        messages.success(request, f"The study is {study.get_status_display().lower()} again.")
    return redirect("study_detail", study_id=study.pk)


@require_GET
@researcher_required
def study_close_confirm(request: HttpRequest, study_id: int) -> HttpResponse:
    """Ask before closing: what closing does to participants, leases, judgments and the link."""
    study = selectors.study_for_researcher(request.user, study_id)
    context = {
        "study": study,
        "counts": selectors.study_counts(study),
        "leases": selectors.open_leases(study)["count"],
    }
    return render(request, "studies/status.html", context)


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
    if request.htmx and _report_done_on_its_page(request, job):
        # The report page polled its job: show the new report itself, not only "done".
        return HttpResponseClientRefresh()
    template = "partials/job_status.html" if request.htmx else "jobs/detail.html"
    return render(request, template, {"job": job})


def _report_done_on_its_page(request: HttpRequest, job: Job) -> bool:
    """Whether a finished report job was polled from its own study's report page."""
    if job.kind != Job.Kind.REPORT or job.status != Job.Status.DONE or not job.study_id:
        return False
    page = request.htmx.current_url_abs_path or ""
    return page.split("?")[0] == reverse("study_report", args=[job.study_id])


@require_GET
@login_required
def job_download(request: HttpRequest, job_id: int) -> HttpResponse:
    job = selectors.job_for_user(request.user, job_id)
    if job.status != Job.Status.DONE or not job.result_file:
        raise Http404("This job has no file.")
    try:
        return storage.download(selectors.job_file_name(job.result_file))
    except StorageUnavailable as exc:  # the object store is down: say so, not a 500
        return error_page(request, exc, "Download not available")
