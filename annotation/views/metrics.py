"""The metric lab page of a study: compute the metrics (a job with a progress bar), read the
meta-evaluation tables, and fit an ensemble on this study to evaluate on another."""

from __future__ import annotations

import io
from typing import Any

import matplotlib
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRefresh
from matplotlib.figure import Figure

from annotation import selectors
from annotation.errors import ServiceError, Unavailable
from annotation.models import Job, Reference
from annotation.services import metrics as lab
from annotation.services.imports.references import FORMATS as REFERENCE_FORMATS
from annotation.services.imports.references import references_request
from annotation.services.jobs import job_sweep_stale
from annotation.services.metrics_clip import CLIP_NAMES, clip_folder
from annotation.services.metrics_ensemble import metrics_ensemble
from annotation.services.metrics_labels import DATASET, label_sources
from annotation.tasks import enqueue
from annotation.views.access import researcher_required
from annotation.views.errors import job_not_started
from rubrics import metrics as metric_rules


@require_http_methods(["GET", "POST"])
@researcher_required
def study_metrics(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    if request.method == "POST":
        try:
            job = enqueue(
                lab.metrics_request(
                    study=study,
                    user=request.user,
                    names=request.POST.getlist("metrics"),
                    cider_documents=request.POST.get("cider_documents", lab.CIDER_DEFAULT),
                    labels=request.POST.get("labels", DATASET),
                )
            )
        except ServiceError as exc:
            if isinstance(exc, Unavailable):  # the task queue is down: the job failed
                return job_not_started(request, exc, "Metrics not started")
            running = lab.metrics_pending(study)
            if request.htmx and running is not None:
                # A second click while a job runs: keep showing that job's progress.
                context = {"job": running, "study": study, "oob": True, "note": exc.message}
                return render(request, "metrics/_job.html", context)
            # A refusal of the request itself: shown where the job goes.
            return _refused(request, study, exc)
        job.refresh_from_db()  # without a broker the job has already run
        if request.htmx and job.status == Job.Status.DONE:
            # Already done (no broker): reload, so the new tables replace "no metrics yet".
            return HttpResponseClientRefresh()
        if request.htmx:
            # oob: the fragment also swaps the form's button, off while the job runs.
            return render(request, "metrics/_job.html", {"job": job, "study": study, "oob": True})
        return redirect("study_metrics", study_id=study.pk)
    latest = lab.metrics_latest(study)
    java = metric_rules.java_available()
    clip_ready = clip_folder() is not None
    others = (
        selectors.studies_for_researcher(request.user)
        .exclude(pk=study.pk)
        .filter(jobs__kind=Job.Kind.METRICS, jobs__status=Job.Status.DONE)
        .distinct()
        .order_by("name")
    )
    context: dict[str, Any] = {
        "study": study,
        "latest": latest,
        "pending": lab.metrics_pending(study),
        "java": java,
        "choices": [
            {
                "name": name,
                "checked": java or not spec.needs_java,
                "disabled": spec.needs_java and not java,
                "implementation": spec.implementation,
            }
            for name, spec in metric_rules.METRICS.items()
        ]
        + [
            {
                "name": name,
                "checked": clip_ready,
                "disabled": not clip_ready,
                "implementation": "onnxruntime",
                "help": "clip-help",
            }
            for name in CLIP_NAMES
        ],
        "clip_ready": clip_ready,
        "references": Reference.objects.filter(study=study).count(),
        "reference_formats": REFERENCE_FORMATS,
        "imported": lab.imported_columns(study),
        "cider_conventions": [
            {"value": key, "label": label, "default": key == lab.CIDER_DEFAULT}
            for key, label in lab.CIDER_CONVENTIONS.items()
        ],
        "cider_default": lab.CIDER_DEFAULT,
        "label_sources": _label_choices(study),
        "others": others,
        **(report_tables(latest.result) if latest else {}),
    }
    evaluate_on = request.GET.get("evaluate_on", "")
    if latest and evaluate_on:
        context["evaluate_on"] = evaluate_on
        if not evaluate_on.isascii() or not evaluate_on.isdigit():
            context["ensemble_error"] = "Choose a study from the list."
        else:
            other = others.filter(pk=int(evaluate_on)).first()
            if other is None:
                context["ensemble_error"] = "Choose a study whose metrics are computed."
            else:
                try:
                    context["ensemble"] = ensemble_tables(metrics_ensemble(train=study, test=other))
                except ServiceError as exc:
                    context["ensemble_error"] = exc.message
    return render(request, "metrics/study.html", context)


def _label_choices(study) -> list[dict[str, Any]]:
    """The imported pairs' label sources as the form's choice, offered only when the pairs
    have labels of more than one release (issue 47)."""
    sources = label_sources(study)
    if len(sources) < 2:
        return []
    return [
        {"value": key, "label": words, "default": key == DATASET} for key, words in sources.items()
    ]


def _refused(request: HttpRequest, study, exc: ServiceError) -> HttpResponse:
    if request.htmx:
        # htmx swaps only 2xx answers: the refusal goes where the progress bar would have.
        return render(request, "metrics/_refused.html", {"message": exc.message})
    return render(
        request,
        "error.html",
        {"title": "Metrics not started", "message": exc.message},
        status=exc.status,
    )


@require_http_methods(["POST"])
@researcher_required
def study_references(request: HttpRequest, study_id: int) -> HttpResponse:
    """Queue an import of the uploaded references file; its job shows the importer's line
    errors when the file is refused (nothing is stored then)."""
    study = selectors.study_for_researcher(request.user, study_id)
    upload = request.FILES.get("file")
    try:
        if upload is None:
            raise ServiceError("Choose a references file.", field="file")
        job = enqueue(
            references_request(
                study=study, user=request.user, upload=upload, fmt=request.POST.get("format", "")
            )
        )
    except ServiceError as exc:
        if isinstance(exc, Unavailable):
            return job_not_started(request, exc, "References not imported")
        if request.htmx:
            return render(request, "metrics/_refused.html", {"message": exc.message})
        context = {"title": "References not imported", "message": exc.message}
        return render(request, "error.html", context, status=exc.status)
    job.refresh_from_db()  # without a broker the job has already run
    if request.htmx:
        return render(request, "partials/job_status.html", {"job": job})
    return redirect("job_status", job_id=job.pk)


@require_GET
@researcher_required
def metrics_job(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    """The metrics job's progress fragment, polled by the page until the job ends."""
    study = selectors.study_for_researcher(request.user, study_id)
    job = study.jobs.filter(pk=job_id, kind=Job.Kind.METRICS).first()
    if job is None:
        raise Http404("No such job.")
    if job_sweep_stale(job_ids=[job.pk]):  # its process vanished: say so, stop polling
        job.refresh_from_db()
    if request.htmx and job.status == Job.Status.DONE:
        # The page polled its job to the end: show the new tables themselves (a "Show the
        # new tables" button beside "No metrics have been computed yet" misled, issue 46).
        return HttpResponseClientRefresh()
    context = {"job": job, "study": study, "oob": bool(request.htmx)}
    return render(request, "metrics/_job.html", context)


@require_GET
@researcher_required
def robustness_figure(request: HttpRequest, study_id: int, kind: str) -> HttpResponse:
    """One transformation's robustness curves (normalised score against gamma, a line per
    metric) as an SVG drawn by matplotlib, served as an image file like the report figures:
    the page's CSP forbids inline style, which an inline SVG from matplotlib would need."""
    study = selectors.study_for_researcher(request.user, study_id)
    latest = lab.metrics_latest(study)
    robustness = (latest.result or {}).get("robustness") if latest else None
    if not robustness or kind not in robustness["curves"]:
        raise Http404("No such robustness curve; compute the metrics first.")
    # Metric names are fixed, but "$" must never be parsed as maths (as for report figures).
    with matplotlib.rc_context({"text.parse_math": False}):
        figure = _robustness_curves(kind, robustness, latest.result.get("computed", []))
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", bbox_inches="tight")
    response = HttpResponse(buffer.getvalue(), content_type="image/svg+xml")
    # As report figures: the SVG document may style itself and do nothing else.
    response._csp_replace = {
        "default-src": ["'none'"],
        "script-src": ["'none'"],
        "style-src": ["'unsafe-inline'"],
        "img-src": ["data:"],
    }
    return response


def _robustness_curves(kind: str, robustness: dict[str, Any], names: list[str]) -> Figure:
    figure = Figure(figsize=(5, 3.4))
    axes = figure.subplots()
    gammas = robustness["gammas"]
    # Markers as well as colours: a dozen lines are told apart without colour vision.
    markers = "os^vD<>ph*xP"
    for index, name in enumerate(names):
        curve = robustness["curves"][kind].get(name)
        if curve:
            axes.plot(gammas, curve["normalised"], marker=markers[index % len(markers)], label=name)
    axes.set_xlabel("gamma (share transformed)")
    axes.set_ylabel("score / unmodified score")
    axes.set_title(kind)
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend(fontsize="x-small", loc="best")
    return figure


# ---------------------------------------------------------------------- presentation


def _scaled(value: float | None, percent: bool) -> str:
    if value is None:
        return "–"
    return f"{value * 100:.1f}" if percent else f"{value:.3f}"


def _interval(cell: dict[str, Any] | None) -> str:
    if not cell or cell.get("value") is None:
        return "–"
    text = f"{cell['value']:.3f}"
    if cell.get("low") is not None:
        text += f" [{cell['low']:.3f}, {cell['high']:.3f}]"
    return text


def report_tables(result: dict[str, Any]) -> dict[str, Any]:
    """The stored report as rows of display strings, one list per table of the page.

    Computed metrics that papers print x100 are shown x100 (their ``percent``); imported
    columns as imported.
    """
    names = result.get("metrics", [])
    info = result.get("metric_info", {})
    percent = {name: info.get(name, {}).get("percent", False) for name in names}
    computed = set(result.get("computed", []))
    system_list = result.get("systems", [])
    # One row per metric and one column per system: a study has a few systems but up to a
    # dozen metrics, so this way round the table fits at 1280 px; below 600 px metrics.css
    # stacks each row (a cell's data-label names its system).
    systems = {
        "systems": [{"name": row["system"], "captions": row["captions"]} for row in system_list],
        "rows": [
            {
                "metric": name,
                "scaled": percent[name],
                "computed": name in computed,
                "cells": [
                    {
                        "system": row["system"],
                        "value": _scaled(row["means"].get(name), percent[name]),
                    }
                    for row in system_list
                ],
            }
            for name in names
        ],
    }
    labels = [lab.WITHOUT_HUMAN, lab.WITH_HUMAN]
    correlations = []
    for score, per_metric in result.get("correlations", {}).items():
        shown = [label for label in labels if any(label in c for c in per_metric.values())]
        correlations.append(
            {
                "score": score,
                "labels": shown,
                "rows": [
                    {"metric": name, "cells": [_interval(cells.get(label)) for label in shown]}
                    for name, cells in per_metric.items()
                ],
            }
        )
    pairwise = [
        {
            "group": group,
            "pairs": data["pairs"],
            "rows": [
                {
                    "metric": name,
                    "accuracy": f"{cell['mean'] * 100:.1f} ± {cell['std'] * 100:.1f}",
                    "misses": _scaled(cell.get("ties_as_misses"), True),
                    "half": _scaled(cell.get("ties_as_half"), True),
                    "ties": cell.get("metric_ties", "–"),
                    "n": cell["n"],
                }
                for name, cell in data["metrics"].items()
            ],
        }
        for group, data in result.get("pairwise", {}).items()
    ]
    robustness = result.get("robustness")
    robust_rows = []
    if robustness:
        kinds = list(robustness["curves"])
        for name in result.get("computed", []):
            curves = [robustness["curves"][kind].get(name) for kind in kinds]
            robust_rows.append(
                {
                    "metric": name,
                    "areas": [f"{c['area']:.3f}" if c else "–" for c in curves],
                    # The figure's table fallback: one cell per (kind, gamma).
                    "points": [
                        f"{v:.2f}" if c else "–"
                        for c in curves
                        for v in (c["normalised"] if c else [None] * len(robustness["gammas"]))
                    ],
                }
            )
    return {
        "result": result,
        "metric_names": [
            {"name": name, "scaled": percent[name], "computed": name in result.get("computed", [])}
            for name in names
        ],
        "system_table": systems,
        "correlation_tables": correlations,
        "pairwise_tables": pairwise,
        "robustness": robustness,
        "robustness_kinds": list(robustness["curves"]) if robustness else [],
        "robustness_rows": robust_rows,
        "robustness_gammas": [f"{g:g}" for g in robustness["gammas"]] if robustness else [],
        "coefficient_label": COEFFICIENTS.get(result.get("coefficient", ""), ""),
        "cider_label": lab.CIDER_CONVENTIONS.get(result.get("cider_documents") or "", ""),
    }


COEFFICIENTS = {
    "pearson": "Pearson's r",
    "kendall_tau_c": "Kendall's tau-c",
    "kendall_tau_b": "Kendall's tau-b",
}


def ensemble_tables(ensemble: dict[str, Any]) -> dict[str, Any]:
    """The ensemble's coefficients and its correlation beside each single metric's."""
    return {
        **ensemble,
        "coefficient_label": COEFFICIENTS.get(ensemble["coefficient"], ""),
        "weights": [
            {"name": name, "value": f"{value:.4f}"}
            for name, value in ensemble["coefficients"].items()
        ],
        "rows": [{"name": "Ensemble", "value": _interval(ensemble["ensemble"])}]
        + [{"name": name, "value": _interval(cell)} for name, cell in ensemble["single"].items()],
    }
