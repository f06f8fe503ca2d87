"""The judges page of a study and its API: import a judge's answers, read how far each
judge agrees with the humans (``services/judges.py``, ``rubrics/judge_alignment.py``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.api_schema import CONFLICT
from annotation.errors import InvalidInput, ServiceError, Unavailable
from annotation.judges.network import ALLOW_SETTING, url_refusal
from annotation.models import Job, Judge, JudgeFailure
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.services import judge_endpoints as endpoints
from annotation.services import judge_runs as runs
from annotation.services.jobs import job_sweep_stale
from annotation.services.judges import MAX_RESAMPLES, RESAMPLES, judge_import, judges_report
from annotation.tasks import enqueue
from annotation.views.access import researcher_required
from annotation.views.errors import job_not_started

#: Largest answers file read (a 200,000-line file of short answers is about 40 MB).
MAX_FILE_BYTES = 50 * 1024 * 1024


class JudgeImportForm(forms.Form):
    judge = forms.CharField(max_length=100, label="Judge name")
    model = forms.CharField(max_length=200, required=False, label="Model (optional)")
    prompt_version = forms.CharField(
        max_length=50, required=False, label="Prompt version (optional)"
    )
    file = forms.FileField(label="Answers (JSON Lines)")


class JudgeEndpointForm(forms.Form):
    """The judge's endpoint settings. Types only: bounds are the service's
    (``judge_endpoints.NUMBERS``), so the form and a direct call refuse the same values."""

    name = forms.CharField(max_length=100, initial="VLM judge", label="Name in the report")
    base_url = forms.CharField(
        max_length=500,
        label="Endpoint base URL",
        widget=forms.TextInput(attrs={"placeholder": "http://localhost:11434/v1"}),
        # The rest (whether this deployment reaches a local server) is _endpoint_form's.
        help_text="OpenAI-compatible, ending in /v1: a hosted API (e.g. "
        "https://api.openai.com/v1) or a server of your own, e.g. Ollama at "
        "http://localhost:11434/v1 or vLLM at http://localhost:8000/v1.",
    )
    model = forms.CharField(max_length=200, label="Model")
    api_key = forms.CharField(
        max_length=500,
        required=False,
        label="API key",
        # Never rendered back: the page shows only the masked form beside the field.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=(
            "A local server (Ollama, vLLM) needs no API key: leave it empty. A hosted API's "
            "key is stored encrypted and never shown again; leave empty to keep the saved "
            "key (a new base URL needs the key again: a key goes only where it was entered)."
        ),
    )
    clear_key = forms.BooleanField(required=False, label="Remove the saved key")
    concurrency = forms.IntegerField(label="Concurrent requests (1-64)")
    timeout = forms.FloatField(label="Timeout per attempt, seconds (0.5-600)")
    max_retries = forms.IntegerField(label="Retries on 429, 5xx and timeouts (0-10)")
    temperature = forms.FloatField(label="Temperature (0-2)")
    repeats = forms.IntegerField(label="Runs of each question (1-10; >1 with temperature > 0)")
    swap = forms.BooleanField(
        required=False, label="Ask each pair both ways (position swap; pair modes)"
    )
    price_prompt_per_1k = forms.FloatField(label="Price per 1k prompt tokens")
    price_completion_per_1k = forms.FloatField(label="Price per 1k completion tokens")


class JudgePromptForm(forms.Form):
    text = forms.CharField(
        max_length=runs.MAX_PROMPT,
        label="Prompt template",
        widget=forms.Textarea(attrs={"rows": 14}),
        strip=False,
    )


def _endpoint_form(study, data=None) -> JudgeEndpointForm:
    saved = endpoints.judge_endpoint_view(study)
    initial = {key: default for key, (default, *_rest) in endpoints.NUMBERS.items()}
    if saved:
        initial.update({k: v for k, v in saved.items() if k in JudgeEndpointForm.base_fields})
        initial.pop("api_key", None)
    # Own ids: the import form on the same page has fields of the same names.
    form = JudgeEndpointForm(data, initial=initial, auto_id="endpoint_%s")
    if url_refusal("http://localhost:11434/v1", endpoints.judge_address_policy()):
        # Said before the user tries: the form would refuse a local address here.
        form.fields["base_url"].help_text += (
            " This server reaches only public addresses: for a server on its own machine "
            f"or network, its administrator lists the host in {ALLOW_SETTING}."
        )
    return form


def _run_context(
    study, mode: Mode, user, *, endpoint_form=None, prompt_form=None
) -> dict[str, Any]:
    """What the page's "Run a judge" section shows."""
    judging = mode.judging
    current = runs.judge_prompt_current(study)
    default = judging.default_prompt(study)
    text = current.text if current else default
    # The saved prompt was built from other guidelines than the people's now (issue 46).
    guide = mode.guidelines(study)
    stale = current is not None and current.guidelines_version != guide.version
    jobs = runs.judge_runs_list(study, limit=10)
    pending = runs.judge_run_pending(study)
    return {
        "endpoint": endpoints.judge_endpoint_view(study),
        "endpoint_form": endpoint_form or _endpoint_form(study),
        "prompt_form": prompt_form or JudgePromptForm(initial={"text": text}, auto_id="prompt_%s"),
        "prompt": current,
        # Not "guidelines": _base.html opens the participants' guidelines dialog on any
        # page whose context has that name (it put the dialog's button on this page).
        "prompt_guidelines": guide,
        "guidelines_stale": stale,
        "default_prompt": default,
        # The mode's named prompts (a context-aware and a context-free one), each savable
        # as a version so that a study can run both and compare them.
        "prompt_versions": sorted(judging.prompt_versions(study).items()),
        "placeholders": " and ".join(runs._placeholders(judging.unit)),
        "judge_jobs": jobs,
        "pending": pending,
        # At most one run is pending: the Stop button is for it, shown to who may use it.
        "may_stop": bool(pending) and runs.judge_run_may_stop(pending, user),
    }


def _read_upload(upload) -> str:
    if upload.size > MAX_FILE_BYTES:
        raise InvalidInput(
            f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB.", field="file"
        )
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("The file is not UTF-8 text.", field="file") from None


# ------------------------------------------------------------------------------ the page

_CELL = 44  # px of one confusion-matrix cell in the inline SVG
_LABEL = 70


def confusion_svg(confusion: dict[str, Any]) -> dict[str, Any]:
    """Geometry of the confusion-matrix figure, drawn by the template as inline SVG
    (no request for an image, no script): cells shaded by their share of the row."""
    labels = [str(c) for c in confusion["categories"]]
    counts = confusion["counts"]
    k = len(labels)
    cells = []
    for i, row in enumerate(counts):
        total = sum(row) or 1
        for j, count in enumerate(row):
            share = count / total
            # From white to the site's dark blue; text turns white on dark cells (contrast).
            shade = round(255 - share * (255 - 40))
            cells.append(
                {
                    "x": _LABEL + j * _CELL,
                    "y": _LABEL + i * _CELL,
                    "fill": f"rgb({shade},{min(255, shade + 20)},255)",
                    "text_fill": "#fff" if share > 0.55 else "#111",
                    "count": count,
                    "tx": _LABEL + j * _CELL + _CELL // 2,
                    "ty": _LABEL + i * _CELL + _CELL // 2 + 5,
                }
            )
    return {
        "size": _LABEL + k * _CELL + 10,
        "cells": cells,
        "cell": _CELL,
        "columns": [
            {"x": _LABEL + j * _CELL + _CELL // 2, "label": label} for j, label in enumerate(labels)
        ],
        "rows": [
            {"y": _LABEL + i * _CELL + _CELL // 2 + 5, "label": label}
            for i, label in enumerate(labels)
        ],
        "label_y": _LABEL - 10,
        "row_label_x": _LABEL - 8,
        "rows_name": confusion["rows"],
        "columns_name": confusion["columns"],
        "counts": counts,
        "labels": labels,
    }


def _sections(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One section per (judge, human score) for the template, figures attached."""
    sections = []
    for judge in report["judges"]:
        parts = judge.get("scores") or ({"choice": judge["pairs"]} if "pairs" in judge else {})
        for score, body in parts.items():
            figure = None
            confusion = body.get("confusion")
            if confusion and "counts" in confusion:
                figure = confusion_svg(confusion)
            sections.append({"judge": judge, "score": score, "body": body, "figure": figure})
    return sections


@require_http_methods(["GET", "POST"])
@researcher_required
def study_judges(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    mode = get_mode(study.mode)
    form = JudgeImportForm(request.POST or None, request.FILES or None)
    refused: list[str] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            judge_import(
                study=study,
                text=_read_upload(data["file"]),
                name=data["judge"],
                model=data["model"],
                prompt_version=data["prompt_version"],
                mode=mode,
            )
        except ServiceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            refused = (exc.details or {}).get("errors", [])
        else:
            return redirect("study_judges", study_id=study.pk)
    return _page(request, study, mode=mode, form=form, refused=refused)


def _page(
    request, study, *, mode: Mode | None = None, status: int | None = None, **forms_
) -> HttpResponse:
    """The whole judges page; a refused form's view passes its bound form back (and the
    study's mode, when it has looked it up: the page's one lookup)."""
    mode = mode or get_mode(study.mode)
    report = judges_report(study, mode=mode)
    form = forms_.pop("form", None) or JudgeImportForm()
    context = {
        "study": study,
        "form": form,
        "refused": forms_.pop("refused", []),
        "report": report,
        "sections": _sections(report),
        "resamples": RESAMPLES,
        # What a line's "answer" holds, shown beside the import form (issue 46, row 17).
        "answer_format": mode.judging.answer_help,
        **_run_context(study, mode, request.user, **forms_),
    }
    if status is None:
        status = 400 if request.method == "POST" else 200
    return render(request, "judges/study.html", context, status=status)


def _say_if_key_removed(request: HttpRequest, study, before: dict[str, Any] | None) -> None:
    """Tell whoever changed the settings or the prompt that the saved key went with it."""
    after = endpoints.judge_endpoint_view(study)
    if before and before["has_key"] and not (after and after["has_key"]):
        saver = before["key_saved_by"] or "a command on the server"
        messages.warning(request, (
            f"The API key saved by {saver} was removed: a key pays only for the address, "
            "model, numbers and prompt its saver saved. Enter a key to run the judge."
        ))  # fmt: skip


@require_POST
@researcher_required
def study_judge_settings(request: HttpRequest, study_id: int) -> HttpResponse:
    """Save the judge's endpoint settings (the key encrypted); errors under their field."""
    study = selectors.study_for_researcher(request.user, study_id)
    form = _endpoint_form(study, request.POST)
    if form.is_valid():
        before = endpoints.judge_endpoint_view(study)
        try:
            endpoints.judge_endpoint_save(study=study, by=request.user, **form.cleaned_data)
        except ServiceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            if not form.cleaned_data["clear_key"]:
                _say_if_key_removed(request, study, before)
            return redirect(f"{reverse('study_judges', args=[study.pk])}#run-heading")
    return _page(request, study, endpoint_form=form)


@require_POST
@researcher_required
def study_judge_prompt(request: HttpRequest, study_id: int) -> HttpResponse:
    """Save the prompt template as a new version (the same text saves nothing new)."""
    study = selectors.study_for_researcher(request.user, study_id)
    mode = get_mode(study.mode)
    form = JudgePromptForm(request.POST, auto_id="prompt_%s")
    if form.is_valid():
        before = endpoints.judge_endpoint_view(study)
        try:
            runs.judge_prompt_save(
                study=study, text=form.cleaned_data["text"], by=request.user, mode=mode
            )
        except ServiceError as exc:
            form.add_error("text", exc.message)
        else:
            _say_if_key_removed(request, study, before)
            return redirect(f"{reverse('study_judges', args=[study.pk])}#prompt-heading")
    return _page(request, study, mode=mode, prompt_form=form)


@require_POST
@researcher_required
def study_judge_run(request: HttpRequest, study_id: int) -> HttpResponse:
    """Queue a judge run and answer at once: the progress fragment (htmx) or the page."""
    study = selectors.study_for_researcher(request.user, study_id)
    try:
        job = enqueue(runs.judge_run_request(study=study, by=request.user))
    except Unavailable as exc:  # the task queue is down: the job failed, say so
        return job_not_started(request, exc, "Judge run not started")
    except ServiceError as exc:
        return _refused(request, exc, "Judge run not started")
    if request.htmx:
        job.refresh_from_db()  # without a broker the job has already run
    return _job_answer(request, study, job)


def _refused(request: HttpRequest, exc: ServiceError, title: str) -> HttpResponse:
    """A refused run or stop: its message in the runs list (htmx), else the error page."""
    if request.htmx:
        return render(request, "metrics/_refused.html", {"message": exc.message})
    return render(request, "error.html", {"title": title, "message": exc.message},
                  status=exc.status)  # fmt: skip


def _job_answer(request: HttpRequest, study, job: Job) -> HttpResponse:
    """The run's progress fragment (htmx), else back to the runs on the page."""
    if request.htmx:
        return render(request, "judges/_job.html", _job_context(study, job, request.user))
    return redirect(f"{reverse('study_judges', args=[study.pk])}#runs-heading")


def _job_context(study, job: Job, user) -> dict[str, Any]:
    failures = JudgeFailure.objects.filter(job=job).count() if job.is_finished else 0
    may_stop = not job.is_finished and runs.judge_run_may_stop(job, user)
    return {"study": study, "job": job, "failure_count": failures, "may_stop": may_stop}


@require_POST
@researcher_required
def study_judge_stop(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    """Stop a judge run (the progress fragment's button); what was answered is kept."""
    study = selectors.study_for_researcher(request.user, study_id)
    try:
        job = runs.judge_run_stop(study=study, job_id=job_id, by=request.user)
    except ServiceError as exc:
        return _refused(request, exc, "Run not stopped")
    return _job_answer(request, study, job)


@require_GET
@researcher_required
def study_judge_job(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    """A judge run's progress fragment, polled by the page until the run ends."""
    study = selectors.study_for_researcher(request.user, study_id)
    job = study.jobs.filter(pk=job_id, kind=Job.Kind.JUDGE).first()
    if job is None:
        raise Http404("No such judge run.")
    if job_sweep_stale(job_ids=[job.pk]):  # its process vanished: say so, stop polling
        job.refresh_from_db()
    return render(request, "judges/_job.html", _job_context(study, job, request.user))


# ------------------------------------------------------------------------------ the API


class JudgeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField()
    prompt_version = serializers.CharField()
    kind = serializers.ChoiceField(choices=Judge.Kind.choices)
    answers = serializers.IntegerField()
    runs = serializers.IntegerField()
    scores = serializers.DictField(
        required=False,
        help_text="Caption units: per human score, the caption report (correlation with "
        "intervals, kappa, alpha, confusion, system level, human ceiling, self-consistency).",
    )
    pairs = serializers.DictField(
        required=False,
        help_text="Pair units: accuracy, confusion, system level, human ceiling, position "
        "bias, length bias, self-consistency.",
    )
    guidelines_version = serializers.CharField(
        allow_null=True,
        help_text="The guidelines its prompt held; empty: none; null: unknown (imported).",
    )


class JudgesReportOutput(serializers.Serializer):
    unit = serializers.CharField(help_text='"caption", "pair", or "" (the mode takes no judge).')
    judges = JudgeOutput(many=True)
    drift = serializers.ListField(child=serializers.DictField())
    tie_rule = serializers.CharField(required=False)
    reliability = serializers.DictField(
        allow_null=True, help_text="Dawid-Skene with the judges as raters (marked judge)."
    )
    guidelines = serializers.DictField(
        required=False,
        help_text="Which guidelines people and judges were given: current, people "
        "[{version, judgments}], unrecorded, judges {id: version}, warnings [sentences].",
    )


class JudgeImportOutput(serializers.Serializer):
    judge = serializers.IntegerField(help_text="The judge's id.")
    answers = serializers.IntegerField(help_text="Answers imported.")
    created = serializers.BooleanField(help_text="Whether the judge is new.")


class StudyJudgesApi(APIView):
    """Automatic judges of a study: their alignment with the humans, and imports."""

    parser_classes = [MultiPartParser, FormParser, JSONParser]

    class InputSerializer(serializers.Serializer):
        judge = serializers.CharField(max_length=100)
        model = serializers.CharField(max_length=200, required=False, default="")
        prompt_version = serializers.CharField(max_length=50, required=False, default="")
        kind = serializers.ChoiceField(choices=Judge.Kind.values, default=Judge.Kind.IMPORTED)
        file = serializers.FileField(required=False, help_text="JSON Lines of answers.")
        lines = serializers.CharField(
            required=False, help_text="The same JSON Lines as text (instead of a file)."
        )

        class Meta:
            ref_name = "JudgeImport"  # the schema's JudgeImportRequest (requests are split)
            required_any = ("file", "lines")  # annotation/api_schema.py

        def validate(self, attrs):
            if not any(name in attrs for name in self.Meta.required_any):
                raise serializers.ValidationError(
                    {"file": ["Send the answers as file or as lines."]}
                )
            return attrs

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "resamples",
                {"type": "integer", "minimum": 0, "maximum": MAX_RESAMPLES},
                required=False,
                description=f"Bootstrap resamples of the intervals, 0 to {MAX_RESAMPLES} "
                f"(default {RESAMPLES}).",
            )
        ],
        responses=JudgesReportOutput,
    )
    def get(self, request, study_id: int):
        """The alignment report of every judge of the study (computed on request)."""
        study = selectors.study_for_researcher(request.user, study_id)
        raw = request.query_params.get("resamples", str(RESAMPLES))
        if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_RESAMPLES:
            return Response(
                {"resamples": [f"A whole number from 0 to {MAX_RESAMPLES}."], "code": "invalid"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(judges_report(study, resamples=int(raw)))

    @extend_schema(request=InputSerializer, responses={201: JudgeImportOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Import one judge's answers; every bad line is listed and nothing is written."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        text = _read_upload(values["file"]) if "file" in values else values["lines"]
        try:
            counts = judge_import(
                study=study,
                text=text,
                name=values["judge"],
                model=values["model"],
                prompt_version=values["prompt_version"],
                kind=values["kind"],
            )
        except ServiceError as exc:
            # The common handler's shape, plus every refused line (``errors``).
            body = {exc.field: [exc.message]} if exc.field else {"detail": exc.message}
            body["code"] = exc.code
            return Response(
                {**body, "errors": (exc.details or {}).get("errors", [])}, status=exc.status
            )
        return Response(counts, status=status.HTTP_201_CREATED)


class JudgeRunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    progress = serializers.IntegerField()
    message = serializers.CharField()
    error = serializers.CharField()
    prompt_version = serializers.CharField(source="params.prompt_version", default="")
    settings = serializers.DictField(
        source="params.settings", default=dict, help_text="The endpoint as run (no key)."
    )
    result = serializers.DictField(
        help_text="answered, failed, failures (the first 50), requests_sent, cached, "
        "prompt_tokens, completion_tokens, cost, seconds, judge (id), not_asked (and "
        "stopped_by) when the run was stopped."
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class StudyJudgeRunsApi(APIView):
    """Judge runs of a study: start one with the saved endpoint and prompt, list them."""

    @extend_schema(responses=JudgeRunOutput(many=True))
    def get(self, request, study_id: int):
        """The study's latest judge runs, newest first."""
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(JudgeRunOutput(runs.judge_runs_list(study), many=True).data)

    @extend_schema(request=None, responses={202: JudgeRunOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Queue a judge run; poll ``GET`` (or ``/api/jobs/<id>/``) for its progress."""
        study = selectors.study_for_researcher(request.user, study_id)
        job = enqueue(runs.judge_run_request(study=study, by=request.user))
        job.refresh_from_db()
        return Response(JudgeRunOutput(job).data, status=status.HTTP_202_ACCEPTED)


class StudyJudgeRunStopApi(APIView):
    """Stop a queued or running judge run; what it answered by then is stored."""

    @extend_schema(request=None, responses={202: JudgeRunOutput, 409: CONFLICT})
    def post(self, request, study_id: int, job_id: int):
        """Ask the run to stop (403 unless you started it or it spends your key; 409 once
        it has ended); poll ``GET`` of the runs for its end."""
        study = selectors.study_for_researcher(request.user, study_id)
        job = runs.judge_run_stop(study=study, job_id=job_id, by=request.user)
        return Response(JudgeRunOutput(job).data, status=status.HTTP_202_ACCEPTED)
