"""The report page of any mode: start a report job, watch its progress, read the result,
download its figures as SVG or PNG (drawn server-side with matplotlib)."""

import io

import matplotlib
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRefresh

from annotation import selectors
from annotation.errors import ServiceError
from annotation.modes import get_mode
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from annotation.views.access import researcher_required
from annotation.views.errors import job_not_started

FIGURE_TYPES = {"svg": "image/svg+xml", "png": "image/png"}


@require_http_methods(["GET", "POST"])
@researcher_required
def study_report(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    mode = get_mode(study.mode)
    if request.method == "POST":
        try:
            job = enqueue(report_request(study=study, user=request.user))
        except ServiceError as exc:
            return job_not_started(request, exc, "Report not started")
        job.refresh_from_db()  # without a broker the job has already run
        if request.htmx and not job.is_finished:
            # The progress bar polls; when the job ends, job_status reloads this page.
            return render(request, "partials/job_status.html", {"job": job})
        if request.htmx:
            # Already done (no broker): reload the page so the new report replaces the old
            # content (swapping only the status showed "done" above "no report yet").
            return HttpResponseClientRefresh()
        return redirect("study_report", study_id=study.pk)
    latest = selectors.report_latest(study)
    pending = selectors.report_pending(study)
    result = latest.result if latest else None
    context = {
        "study": study,
        "report_job": latest,
        "pending_job": pending,
        "result": result,
        "figure_names": mode.report.figure_names,
        **(mode.report.context(result, request.GET.dict()) if result else {}),
    }
    return render(request, mode.report.template or "reports/base.html", context)


@require_GET
@researcher_required
def report_figure(request: HttpRequest, study_id: int, name: str, fmt: str) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    if fmt not in FIGURE_TYPES:
        raise Http404("Figures come as .svg or .png.")
    latest = selectors.report_latest(study)
    mode = get_mode(study.mode)
    if latest is None or name not in mode.report.figure_names:
        raise Http404("No such figure; compute the report first.")
    # Labels come from imports (system names, captions): "$...$" in them must be drawn as
    # written, not parsed as maths text (which fails with a 500 on "$x_$" and turns
    # "$\frac{a}{b}$" into a fraction). Text objects read this setting when created, so
    # the whole drawing happens inside it; every mode's figures go through here.
    with matplotlib.rc_context({"text.parse_math": False}):
        try:
            figure = mode.report.figure(name, latest.result)
        except KeyError:
            # The stored report has nothing to draw it from (an arena without scores yet).
            raise Http404("This report has no data for that figure yet.") from None
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
    response = HttpResponse(buffer.getvalue(), content_type=FIGURE_TYPES[fmt])
    if fmt == "svg":
        # Opened on its own, an SVG is a document under the site's CSP, which would strip
        # matplotlib's style attributes. This document may style itself and nothing else:
        # no script, no fetch (django-csp's per-response override, as @csp_replace sets).
        response._csp_replace = {
            "default-src": ["'none'"],
            "script-src": ["'none'"],
            "style-src": ["'unsafe-inline'"],
            "img-src": ["data:"],
        }
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{study.pk}-{name}.{fmt}"'
    return response
