"""The judges page of a study and its API: import a judge's answers, read how far each
judge agrees with the humans (``services/judges.py``, ``rubrics/judge_alignment.py``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.errors import InvalidInput, ServiceError
from annotation.models import Judge
from annotation.services.judges import MAX_RESAMPLES, RESAMPLES, judge_import, judges_report
from annotation.views.access import researcher_required

#: Largest answers file read (a 200,000-line file of short answers is about 40 MB).
MAX_FILE_BYTES = 50 * 1024 * 1024


class JudgeImportForm(forms.Form):
    judge = forms.CharField(max_length=100, label="Judge name")
    model = forms.CharField(max_length=200, required=False, label="Model (optional)")
    prompt_version = forms.CharField(
        max_length=50, required=False, label="Prompt version (optional)"
    )
    file = forms.FileField(label="Answers (JSON Lines)")


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
            )
        except ServiceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            refused = (exc.details or {}).get("errors", [])
        else:
            return redirect("study_judges", study_id=study.pk)
    report = judges_report(study)
    context = {
        "study": study,
        "form": form,
        "refused": refused,
        "report": report,
        "sections": _sections(report),
        "resamples": RESAMPLES,
    }
    return render(
        request, "judges/study.html", context, status=400 if request.method == "POST" else 200
    )


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


class JudgesReportOutput(serializers.Serializer):
    unit = serializers.CharField(help_text='"caption", "pair", or "" (the mode takes no judge).')
    judges = JudgeOutput(many=True)
    drift = serializers.ListField(child=serializers.DictField())
    tie_rule = serializers.CharField(required=False)
    reliability = serializers.DictField(
        allow_null=True, help_text="Dawid-Skene with the judges as raters (marked judge)."
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
            ref_name = "JudgeImportRequest"

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "resamples",
                int,
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

    @extend_schema(request=InputSerializer, responses={201: JudgeImportOutput})
    def post(self, request, study_id: int):
        """Import one judge's answers; every bad line is listed and nothing is written."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if "file" in values:
            text = _read_upload(values["file"])
        elif "lines" in values:
            text = values["lines"]
        else:
            raise InvalidInput("Send the answers as file or as lines.", field="file")
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
            body = {exc.field or "detail": [exc.message], "code": exc.code}
            return Response(
                {**body, "errors": (exc.details or {}).get("errors", [])}, status=exc.status
            )
        return Response(counts, status=status.HTTP_201_CREATED)
