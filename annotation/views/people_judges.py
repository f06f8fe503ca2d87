"""The "people + judge" page of a study (issue 40): the prediction-powered estimates the
latest report stored (``services/people_judges.py``, ``result["people_judge"]``), read,
never recomputed on a GET; the judge and score choice (report settings, saved through
``study_update_settings``, then a new report); the sampling design panel
(``services/people_design.py``)."""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation import selectors
from annotation.errors import ServiceError
from annotation.models import Judge, Study
from annotation.services.people_design import people_design_apply, people_design_state
from annotation.services.reports import report_request
from annotation.services.studies import study_update_settings
from annotation.tasks import enqueue
from annotation.views.access import researcher_required

#: The design kinds a researcher picks from ("" is every unit to people: no design).
DESIGN_KINDS = [
    ("", "Everyone judges every unit (no design)"),
    ("uniform", "People judge a uniform random share of the units"),
    ("uncertainty", "People judge more where the judge is unsure"),
]
ESTIMATES = (
    ("people", "People only"),
    ("judge", "Judge only"),
    ("combined", "People + judge"),
)


def _judge_choices(study: Study) -> list[tuple[int, str]]:
    """The study's judges as they are now (one imported after the report is a choice too)."""
    return [(judge.pk, str(judge)) for judge in Judge.objects.filter(study=study)]


class JudgeChoiceForm(forms.Form):
    """Which judge predicts which human score: the report settings ``people_judge`` and
    ``people_judge_score``. Choices only; the settings' own checks are the service's."""

    judge = forms.TypedChoiceField(coerce=int, label="Judge")
    score = forms.ChoiceField(label="Human score the judge predicts", required=False)

    def __init__(self, study: Study, scores: list[str], *args, **kwargs):
        kwargs.setdefault("auto_id", "choice_%s")
        super().__init__(*args, **kwargs)
        self.fields["judge"].choices = [(0, "The study's first judge"), *_judge_choices(study)]
        current = str(study.settings.get("people_judge_score") or "")
        names = list(dict.fromkeys([*scores, *([current] if current else [])]))
        self.fields["score"].choices = [("", "The first human score"), *((s, s) for s in names)]


class DesignForm(forms.Form):
    """The sampling design: which units people answer (CrowdSettings ``people_design``,
    ``people_share``, ``people_floor``, ``people_judge_second``). Bounds are the settings'."""

    kind = forms.ChoiceField(choices=DESIGN_KINDS, required=False, label="Design")
    share = forms.FloatField(
        label="Share of the units people judge (0.05 to 1)",
        help_text="The human budget as a share of the judge-answered units.",
    )
    floor = forms.FloatField(
        label="Lowest chance a unit goes to people (0.01 to 1)",
        help_text="Keeps every unit's sampling probability away from 0, so the weights stay "
        "bounded and the estimate valid.",
    )
    second = forms.TypedChoiceField(
        coerce=int,
        label="Second judge",
        help_text="When set, the uncertainty is the two judges' disagreement; else the "
        "judge's spread over repeated runs or over the two orders of a pair.",
    )

    def __init__(self, study: Study, *args, **kwargs):
        kwargs.setdefault("auto_id", "design_%s")
        super().__init__(*args, **kwargs)
        self.fields["second"].choices = [(0, "None"), *_judge_choices(study)]


#: Form field -> study setting.
CHOICE_SETTINGS = {"judge": "people_judge", "score": "people_judge_score"}
DESIGN_SETTINGS = {
    "kind": "people_design",
    "share": "people_share",
    "floor": "people_floor",
    "second": "people_judge_second",
}
DESIGN_DEFAULTS = {"kind": "", "share": 0.5, "floor": 0.1, "second": 0}


def _initial(study: Study, names: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
    return {f: study.settings.get(s, defaults.get(f)) for f, s in names.items()}


# ------------------------------------------------------------------------------ the figure

#: Narrow enough that a phone (about 350 px of content) shrinks the text little.
_WIDTH = 460
_LABEL_W = 118  # the estimates' names left of the plot
_RIGHT = 16
_ROW = 22  # one interval's line
_HEAD = 24  # a system's name above its three lines
_GAP = 10
_TOP = 34  # the axis' tick labels
COLOURS = {"people": "#0b57d0", "judge": "#a4001d", "combined": "#0b6b2f"}


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values from ``low`` to ``high``: the step nearest
    ``span / count`` of 1, 2 or 5 times a power of 10."""
    span = high - low
    if span <= 0:
        return [low]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = min((m * power for m in (1, 2, 5, 10)), key=lambda step: abs(math.log(step / raw)))
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def intervals_svg(systems: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Geometry of the figure, drawn by the template as inline SVG (no request, no script):
    per system its people-only, judge-only and combined intervals on one shared axis, a dot
    at each estimate. None when no system has an interval to draw."""
    values = [
        v
        for s in systems
        for key, _ in ESTIMATES
        for v in ((s.get(key) or {}).get("low"), (s.get(key) or {}).get("high"))
        if _finite(v)
    ]
    if not values:
        return None
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 or 0.5
    low, high = low - pad, high + pad
    plot = _WIDTH - _LABEL_W - _RIGHT

    def x(value: float) -> float:
        return round(_LABEL_W + (value - low) / (high - low) * plot, 1)

    rows, y = [], _TOP
    for system in systems:
        group = {"name": system["system"], "y": y + 16, "lines": []}
        y += _HEAD
        for key, label in ESTIMATES:
            interval = system.get(key) or {}
            if all(_finite(interval.get(k)) for k in ("estimate", "low", "high")):
                group["lines"].append(
                    {
                        "label": label,
                        "colour": COLOURS[key],
                        "x1": x(interval["low"]),
                        "x2": x(interval["high"]),
                        "cx": x(interval["estimate"]),
                        "y": y + _ROW // 2,
                        "ty": y + _ROW // 2 + 5,
                    }
                )
            y += _ROW
        rows.append(group)
        y += _GAP
    ticks = [{"x": x(t), "label": f"{t:g}"} for t in _ticks(low, high)]
    return {
        "width": _WIDTH,
        "height": y,
        "label_x": _LABEL_W - 8,
        "plot_left": _LABEL_W,
        "plot_right": _WIDTH - _RIGHT,
        "axis_y": _TOP - 6,
        "tick_y": _TOP - 12,
        "ticks": ticks,
        "systems": rows,
    }


# ------------------------------------------------------------------------------ the page


def _stored(latest) -> dict[str, Any] | None:
    """The stored section of the latest report; None when the report has none (a report
    computed before issue 40, or none yet)."""
    result = latest.result if latest else None
    section = result.get("people_judge") if isinstance(result, dict) else None
    return section if isinstance(section, dict) else None


def _page(
    request: HttpRequest, study: Study, *, status: int = 200, choice=None, design=None
) -> HttpResponse:
    latest = selectors.report_latest(study)
    section = _stored(latest)
    scores = list((section or {}).get("scores") or [])
    alpha = (section or {}).get("alpha", 0.05)
    context = {
        "study": study,
        "report_job": latest,
        "pending_job": selectors.report_pending(study),
        "section": section,
        "level": round((1 - alpha) * 100) if _finite(alpha) else 95,
        "figure": intervals_svg(section.get("systems") or []) if section else None,
        "ranked": bool(section) and section.get("estimate") == "bradley_terry",
        "choice_form": choice
        or JudgeChoiceForm(study, scores, initial=_initial(study, CHOICE_SETTINGS, {})),
        "design_form": design
        or DesignForm(study, initial=_initial(study, DESIGN_SETTINGS, DESIGN_DEFAULTS)),
        "design_state": people_design_state(study),
        "is_owner": request.user.is_staff or request.user.pk == study.owner_id,
    }
    return render(request, "reports/people_judge.html", context, status=status)


def _save(study: Study, user, form: forms.Form, names: dict[str, str]) -> bool:
    """Save the form's values as the study's settings; a refusal goes under the field
    it names (or the form's top). True when saved."""
    changed = {setting: form.cleaned_data[field] for field, setting in names.items()}
    try:
        study_update_settings(study=study, settings={**study.settings, **changed}, changed_by=user)
    except ServiceError as exc:
        setting = (exc.details or {}).get("setting", "")
        field = next((f for f, s in names.items() if s == setting), None)
        form.add_error(field, exc.message)
        return False
    return True


def _start_report(request: HttpRequest, study: Study, done: str) -> None:
    """Queue a new report; say so, or why it did not start."""
    try:
        enqueue(report_request(study=study, user=request.user))
    except ServiceError as exc:
        messages.error(request, f"{done} The report was not started: {exc.message}")
    else:
        messages.success(request, f"{done} A new report is being computed.")


def _apply(request: HttpRequest, study: Study, form: DesignForm) -> bool:
    """Draw the saved design onto the study's items (``people_design_apply``: the owner's,
    before the first judgment); a refusal at the form's top. True when applied."""
    try:
        done = people_design_apply(study=study, user=request.user)
    except ServiceError as exc:
        form.add_error(None, f"The design settings were saved but not applied: {exc.message}")
        return False
    if done["applied"]:
        messages.success(
            request,
            f"Design applied: {done['items_drawn']} of {done['items_in_design']} items go to "
            f"people, {done['items_left_out']} are left to the judge.",
        )
    else:
        messages.success(request, "No design: every item goes to people.")
    return True


@require_http_methods(["GET", "POST"])
@researcher_required
def study_people_judge(request: HttpRequest, study_id: int) -> HttpResponse:
    """The page; its forms post here with ``action``: ``choice`` (judge and score, then a
    new report), ``report`` (a new report), ``design`` (the design settings) or ``apply``
    (the design settings, then the design drawn onto the items)."""
    study = selectors.study_for_researcher(request.user, study_id)
    here = reverse("study_people_judge", args=[study.pk])
    action = request.POST.get("action") if request.method == "POST" else None
    if action == "report":
        _start_report(request, study, "")
        return redirect(here)
    if action == "choice":
        scores = list((_stored(selectors.report_latest(study)) or {}).get("scores") or [])
        form = JudgeChoiceForm(study, scores, request.POST)
        if form.is_valid() and _save(study, request.user, form, CHOICE_SETTINGS):
            _start_report(request, study, "Judge and score saved.")
            return redirect(here)
        return _page(request, study, status=400, choice=form)
    if action in ("design", "apply"):
        form = DesignForm(study, request.POST)
        saved = form.is_valid() and _save(study, request.user, form, DESIGN_SETTINGS)
        if saved and action == "design":
            messages.success(request, "Design settings saved; apply them to draw the items.")
        if saved and (action == "design" or _apply(request, study, form)):
            return redirect(f"{here}#design-heading")
        return _page(request, study, status=400, design=form)
    if request.method == "POST":
        messages.error(request, "Unknown action: nothing was changed.")
        return redirect(here)
    return _page(request, study)
