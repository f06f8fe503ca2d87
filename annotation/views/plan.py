"""The planner page of a study (issue 15): how wide the headline intervals will be, and
what a study of each size costs, predicted by simulation with ``rubrics.planner``.

The same ``annotation.forms.PlanForm`` reads the page's form (GET query or POST) and the API's query
(``apis.StudyPlanApi``), so both refuse the same input with the same messages. The work is
bounded by the form (at most ``forms.MAX_SIZES`` sizes x ``MAX_SIMULATIONS`` simulations, and
``rubrics.planner.MAX_SIMULATED_JUDGMENTS`` in all, so the dearest accepted request costs a
few seconds of CPU, not minutes); the defaults draw the page in well under a second.
"""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import urlencode

import matplotlib
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods
from matplotlib.figure import Figure

from annotation import dashboard as dashboard_reads
from annotation import selectors
from annotation.forms import PlanForm
from annotation.models import Study
from annotation.modes import get_mode
from annotation.services import planning
from annotation.views.access import researcher_required


def plan_form(request: HttpRequest, study: Study) -> PlanForm:
    data = request.POST if request.method == "POST" else request.GET
    return PlanForm(data, mode=study.mode)


@require_http_methods(["GET", "POST"])
@researcher_required
def study_plan(request: HttpRequest, study_id: int) -> HttpResponse:
    """The planner: the form, then the curve as a table and a figure, with the recommendation."""
    study = selectors.study_for_researcher(request.user, study_id)
    form = plan_form(request, study)
    # The mode's planner names what sizes count and how to read the widths.
    mode = get_mode(study.mode)
    planner = mode.planner
    context: dict[str, Any] = {
        "study": study,
        "form": form,
        "planner": planner,
        "fields": plan_fields(form, planner),
        "currency": settings.CAPEVAL_CURRENCY,
        # The distinct workers the remaining items need, as the dashboard warns (issue 26).
        "capacity": dashboard_reads.study_capacity(study, with_crowd=True, mode=mode),
    }
    # A refused value is shown beside its field with status 200, as the settings form does
    # (the API and the figure answer 400).
    if form.is_valid():
        try:
            result = form.plan(study)
        except ValueError as exc:
            context["refused"] = str(exc)
            # The curve refused (a mode with no planner model, the arena's, spans'): the
            # plan with the judge needs none, and is shown alone (issue 40).
            target = form.cleaned_data["target_half_width"]
            context["judge_plan"] = planning.study_judge_plan(study, target_half_width=target)
        else:
            names = sorted({name for p in result["points"] for name in p["half_width"]})
            context["plan"] = result
            # With the study's judge (issue 40): its own section, after the curve.
            context["judge_plan"] = result.get("judge")
            context["names"] = names
            # One width per column, in the header's order (None: undefined at that size).
            context["rows"] = [
                {"point": p, "widths": [p["half_width"].get(name) for name in names]}
                for p in result["points"]
            ]
            query = {k: v for k, v in form.data.items() if k != "csrfmiddlewaretoken" and v}
            context["figure_query"] = urlencode(query)
    return render(request, "plan/study.html", context)


#: The planner form's fields every mode shows; a mode adds its ``planner.fields``.
COMMON_FIELDS = (
    "sizes",
    "judgments_per_item",
    "price_per_judgment",
    "seconds_per_judgment",
    "target_half_width",
    "simulations",
)


def plan_fields(form: PlanForm, planner) -> list[dict[str, Any]]:
    """The fields the page shows (issue 26): the common ones and the study's own mode's
    assumptions only (not every mode's on every study), each filled with its default when
    left empty, so the researcher sees the value the plan uses. Seconds per judgment and
    the target stay empty: empty means "from the study" and "no target"."""
    defaults = {**PlanForm.DEFAULTS, "judgments_per_item": planner.default_judgments}
    labels = {
        "sizes": f"Numbers of {planner.unit}",
        "price_per_judgment": f"Price per judgment ({settings.CAPEVAL_CURRENCY})",
        **planner.fields,
    }
    # The form's help texts speak of every mode: this page speaks of its study's only.
    helps = {
        "judgments_per_item": planner.judgments_help,
        "target_half_width": "The recommended size is the cheapest whose every interval is "
        f"this narrow{planner.target_note}. Empty: no target.",
        **dict.fromkeys(planner.fields, ""),
    }
    shown = []
    for name in (*COMMON_FIELDS, *planner.fields):
        field = form[name]
        value = field.value()
        if value in (None, "") and name in defaults:
            value = defaults[name]
        shown.append(
            {
                "field": field,
                "label": labels.get(name, field.label),
                "help": helps.get(name, field.help_text),
                "value": "" if value is None else value,
            }
        )
    return shown


@require_GET
@researcher_required
def study_plan_figure(request: HttpRequest, study_id: int) -> HttpResponse:
    """The curve as an SVG figure: predicted half-width per headline number against size."""
    study = selectors.study_for_researcher(request.user, study_id)
    form = PlanForm(request.GET, mode=study.mode)
    if not form.is_valid():
        return HttpResponse("Bad planner parameters.", status=400, content_type="text/plain")
    try:  # the curve only: the judge plan's numbers are not drawn
        result = planning.study_plan(study, **form.cleaned_data, judge=False)
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    # Labels are fixed here, but "$" must never be parsed as maths (as for report figures).
    with matplotlib.rc_context({"text.parse_math": False}):
        figure = _curve(result, get_mode(study.mode).planner.unit)
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


def _curve(result: dict[str, Any], unit: str) -> Figure:
    figure = Figure(figsize=(6, 3.5))
    axes = figure.subplots()
    points = result["points"]
    names = sorted(points[0]["half_width"]) if points else []
    for name in names:
        xs = [p["n_images"] for p in points if name in p["half_width"]]
        ys = [p["half_width"][name] for p in points if name in p["half_width"]]
        axes.plot(xs, ys, marker="o", label=name)
    if result["target_half_width"] is not None:
        axes.axhline(result["target_half_width"], linestyle="--", color="grey", label="target")
    axes.set_xlabel(unit)
    axes.set_ylabel(f"predicted half-width ({round(100 * result['confidence'])}%)")
    axes.set_title(result["headline"])
    if names:
        axes.legend()
    return figure
