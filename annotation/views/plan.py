"""The planner page of a study (issue 15): how wide the headline intervals will be, and
what a study of each size costs, predicted by simulation with ``rubrics.planner``.

The same ``PlanForm`` reads the page's form (GET query or POST) and the API's query
(``apis.StudyPlanApi``), so both refuse the same input with the same messages. The work is
bounded by the form (at most ``MAX_SIZES`` sizes x ``MAX_SIMULATIONS`` simulations, the
planner's own caps behind them); the defaults draw the page in well under a second.
"""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import urlencode

import matplotlib
from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods
from matplotlib.figure import Figure

from annotation import selectors
from annotation.models import Study
from annotation.views.access import researcher_required

MAX_SIZES = 8
MAX_SIMULATIONS = 100
MAX_STUDY_SIZE = 5000
#: Judgments per item by default: THumB's two stages per caption, one HUMANr judgment per
#: comparison (the paper's), VICR's 3 ratings per pair (the planner's least).
DEFAULT_JUDGMENTS = {"thumb": 2, "humanr": 1, "vicr": 3}


class PlanForm(forms.Form):
    """The planner's parameters; every field has a default, so an empty query is valid."""

    sizes = forms.CharField(
        required=False,
        max_length=100,
        label="Numbers of images (pairs for VICR)",
        help_text=f"Comma-separated, 2 to {MAX_STUDY_SIZE}, at most {MAX_SIZES} of them.",
    )
    judgments_per_item = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=20,
        label="Judgments per item",
        help_text="THumB: judgments per caption (2 stages); HUMANr: workers per comparison; "
        "VICR: ratings per pair (at least 3).",
    )
    price_per_judgment = forms.FloatField(
        required=False, min_value=0, max_value=1000, label="Price per judgment"
    )
    seconds_per_judgment = forms.FloatField(
        required=False,
        min_value=0,
        max_value=3600,
        label="Seconds per judgment",
        help_text="Empty: the median time of this study's judgments, if it has any.",
    )
    target_half_width = forms.FloatField(
        required=False,
        min_value=0.0001,
        max_value=100,
        label="Target half-width",
        help_text="The recommended size is the cheapest whose every interval is this narrow "
        "(and, THumB and HUMANr, whose power reaches 80%).",
    )
    simulations = forms.IntegerField(
        required=False,
        min_value=5,
        max_value=MAX_SIMULATIONS,
        label="Simulations per size",
    )
    mean = forms.FloatField(
        required=False,
        min_value=1,
        max_value=5,
        label="THumB: mean score of the better system",
    )
    difference = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Smallest difference that matters",
        help_text="THumB: between the two systems' scores; HUMANr: a model below the Human "
        "baseline, on the -1 to 1 scale.",
    )
    spread = forms.FloatField(
        required=False, min_value=0.1, max_value=10, label="HUMANr: slider spread (steps)"
    )
    exact = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="VICR: share of ratings at the true level",
    )
    adjacent = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="VICR: share of ratings one level off",
    )

    DEFAULTS: dict[str, Any] = {
        "sizes": "20, 50, 100, 200",
        "simulations": 30,
        "price_per_judgment": 0.10,
        "mean": 4.0,
        "difference": 0.3,
        "spread": 2.0,
        "exact": 0.6,
        "adjacent": 0.3,
    }

    def __init__(self, data=None, *, mode: str, **kwargs):
        self.mode = mode
        super().__init__(data, **kwargs)

    def clean_sizes(self) -> list[int]:
        text = self.cleaned_data.get("sizes") or self.DEFAULTS["sizes"]
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts or len(parts) > MAX_SIZES:
            raise forms.ValidationError(f"Give 1 to {MAX_SIZES} sizes, separated by commas.")
        sizes = []
        for part in parts:
            if not (part.isascii() and part.isdigit()) or not 2 <= int(part) <= MAX_STUDY_SIZE:
                raise forms.ValidationError(
                    f"{part!r} is not a whole number from 2 to {MAX_STUDY_SIZE}."
                )
            sizes.append(int(part))
        return sorted(set(sizes))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name, value in self.DEFAULTS.items():
            if name != "sizes" and data.get(name) is None and name not in self.errors:
                data[name] = value
        if data.get("judgments_per_item") is None and "judgments_per_item" not in self.errors:
            data["judgments_per_item"] = DEFAULT_JUDGMENTS.get(self.mode, 1)
        if self.mode == "vicr" and (data.get("judgments_per_item") or 3) < 3:
            self.add_error("judgments_per_item", "VICR's agreement needs at least 3 ratings.")
        if (data.get("exact") or 0) + (data.get("adjacent") or 0) > 1:
            self.add_error("adjacent", "The two VICR shares together must not exceed 1.")
        return data

    def plan(self, study: Study) -> dict[str, Any]:
        """The planner's JSON for the valid form (``study_plan``); ValueError if refused."""
        return selectors.study_plan(study, **self.cleaned_data)

    def error_dict(self) -> dict[str, list[str]]:
        """Errors by field name, as the API returns them."""
        return {field: [str(e) for e in errors] for field, errors in self.errors.items()}


def plan_form(request: HttpRequest, study: Study) -> PlanForm:
    data = request.POST if request.method == "POST" else request.GET
    return PlanForm(data, mode=study.mode)


@require_http_methods(["GET", "POST"])
@researcher_required
def study_plan(request: HttpRequest, study_id: int) -> HttpResponse:
    """The planner: the form, then the curve as a table and a figure, with the recommendation."""
    study = selectors.study_for_researcher(request.user, study_id)
    form = plan_form(request, study)
    context: dict[str, Any] = {"study": study, "form": form}
    # A refused value is shown beside its field with status 200, as the settings form does
    # (the API and the figure answer 400).
    if form.is_valid():
        try:
            result = form.plan(study)
        except ValueError as exc:
            context["refused"] = str(exc)
        else:
            names = sorted({name for p in result["points"] for name in p["half_width"]})
            context["plan"] = result
            context["names"] = names
            # One width per column, in the header's order (None: undefined at that size).
            context["rows"] = [
                {"point": p, "widths": [p["half_width"].get(name) for name in names]}
                for p in result["points"]
            ]
            query = {k: v for k, v in form.data.items() if k != "csrfmiddlewaretoken" and v}
            context["figure_query"] = urlencode(query)
    return render(request, "plan/study.html", context)


@require_GET
@researcher_required
def study_plan_figure(request: HttpRequest, study_id: int) -> HttpResponse:
    """The curve as an SVG figure: predicted half-width per headline number against size."""
    study = selectors.study_for_researcher(request.user, study_id)
    form = PlanForm(request.GET, mode=study.mode)
    if not form.is_valid():
        return HttpResponse("Bad planner parameters.", status=400, content_type="text/plain")
    try:
        result = form.plan(study)
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    # Labels are fixed here, but "$" must never be parsed as maths (as for report figures).
    with matplotlib.rc_context({"text.parse_math": False}):
        figure = _curve(result)
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


def _curve(result: dict[str, Any]) -> Figure:
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
    axes.set_xlabel("images (pairs for VICR)")
    axes.set_ylabel(f"predicted half-width ({round(100 * result['confidence'])}%)")
    axes.set_title(result["headline"])
    if names:
        axes.legend()
    return figure
