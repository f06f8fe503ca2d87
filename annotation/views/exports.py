"""Exports of a study's judgments: start the job here, watch and download it on the job page.

The data file downloads through ``job_download``; ``job_datasheet`` serves the datasheet
written beside it (both confined to the export folder).
"""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors, storage
from annotation.errors import ServiceError, StorageUnavailable
from annotation.models import Job
from annotation.services.exports import export_request
from annotation.tasks import enqueue
from annotation.views.access import researcher_required
from annotation.views.errors import error_page, job_not_started


@require_POST
@researcher_required
def study_export(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    try:
        job = enqueue(
            export_request(
                study=study,
                user=request.user,
                export_format=request.POST.get("format", "csv"),
                table=request.POST.get("table", "judgments"),
                raw_ids=request.POST.get("raw_ids") == "on",
                images=request.POST.get("images") == "on",
            )
        )
    except ServiceError as exc:
        return job_not_started(request, exc, "Cannot export")
    if request.htmx:
        return render(request, "partials/job_status.html", {"job": job})
    return redirect("job_status", job_id=job.pk)


@require_GET
@login_required
def job_datasheet(request: HttpRequest, job_id: int) -> HttpResponse:
    """The datasheet of a finished export job (``job.result["datasheet"]``)."""
    job = selectors.job_for_user(request.user, job_id)
    name = job.result.get("datasheet") if isinstance(job.result, dict) else None
    if job.kind != Job.Kind.EXPORT or job.status != Job.Status.DONE or not name:
        raise Http404("This job has no datasheet.")
    try:
        # The same confinement as the data file: a plain name of the export storage.
        return storage.download(selectors.job_file_name(name), content_type="application/json")
    except StorageUnavailable as exc:  # the object store is down: say so, not a 500
        return error_page(request, exc, "Download not available")
