"""The import page: upload images and a captions file, then watch the import job."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from django_htmx.http import reselect, reswap, retarget

from annotation import selectors
from annotation.errors import ServiceError, StorageUnavailable, Unavailable
from annotation.forms import ImportForm
from annotation.models import Study
from annotation.modes import get_mode
from annotation.modes.importing import import_notes
from annotation.services.imports import import_request
from annotation.tasks import enqueue
from annotation.views.access import researcher_required
from annotation.views.errors import error_page, job_not_started


@require_http_methods(["GET", "POST"])
@researcher_required
def study_import(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    if study.status != Study.Status.DRAFT:
        message = "Images and captions can only be imported while the study is a draft."
        return render(
            request, "error.html", {"title": "Import closed", "message": message}, status=409
        )
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            job = enqueue(import_request(study=study, user=request.user, **form.cleaned_data))
        except StorageUnavailable as exc:
            # Nothing kept and no job made: the error page (503, Retry-After), or with htmx,
            # which swaps only 2xx answers, the form with the reason in place.
            if not request.htmx:
                return error_page(request, exc, "Import not started")
            form.add_error(None, exc.message)
        except ServiceError as exc:
            if isinstance(exc, Unavailable):  # not a problem of the form: the queue is down
                return job_not_started(request, exc, "Import not started")
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            if request.htmx:
                return render(request, "partials/job_status.html", {"job": job})
            return redirect("job_status", job_id=job.pk)
    context = {
        "study": study,
        "form": form,
        "max_megapixels": f"{settings.CAPEVAL_MAX_IMAGE_PIXELS / 1e6:g}",
        # What the study's mode says of its own files (VICR: its tutorial and probation sets).
        "import_notes": import_notes(get_mode(study.mode)),
    }
    response = render(request, "studies/import.html", context)
    if request.method == "POST":
        if not request.htmx:
            response.status_code = 400
        else:
            # htmx swaps 200 answers only: show the form with its errors in place.
            reselect(response, "#import-panel")
            retarget(response, "#import-panel")
            reswap(response, "outerHTML")
    return response
