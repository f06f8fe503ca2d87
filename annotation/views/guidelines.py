"""The study's task guidelines page (issue 46, row 5): the researcher edits the Markdown
participants read and sees it as they will; ``/api/studies/<id>/guidelines/`` reads and
sets the same text (the studies API takes it at creation and shows its version)."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.errors import ServiceError
from annotation.forms import GuidelinesForm
from annotation.modes import get_mode
from annotation.serializers import GuidelinesPatch
from annotation.services.studies import study_set_guidelines
from annotation.views.access import researcher_required


@require_http_methods(["GET", "POST"])
@researcher_required
def study_guidelines(request: HttpRequest, study_id: int) -> HttpResponse:
    """Show and change the guidelines; the text starts as the study's own, else the mode's
    default, so the researcher edits what participants read."""
    study = selectors.study_for_researcher(request.user, study_id)
    mode = get_mode(study.mode)
    shown = mode.guidelines(study)
    form = GuidelinesForm(request.POST or None, initial={"guidelines": shown.text})
    if request.method == "POST" and form.is_valid():
        try:
            study_set_guidelines(study=study, text=form.cleaned_data["guidelines"], mode=mode)
        except ServiceError as exc:
            form.add_error("guidelines", exc.message)
        else:
            messages.success(request, "Guidelines saved.")
            return redirect("study_guidelines", study_id=study.pk)
    context = {"study": study, "form": form, "shown": shown}
    return render(request, "studies/guidelines.html", context)


class GuidelinesOutput(serializers.Serializer):
    guidelines = serializers.CharField(help_text="The Markdown participants read now.")
    version = serializers.CharField(help_text="Its short SHA-256 (judgments store it).")
    default = serializers.BooleanField(help_text="Whether it is the mode's default.")
    html = serializers.CharField(help_text="It rendered as the pages show it (sanitised).")


def _output(study) -> dict:
    shown = get_mode(study.mode).guidelines(study)
    return {"guidelines": shown.text, "version": shown.version, "default": shown.default,
            "html": shown.html}  # fmt: skip


class StudyGuidelinesApi(APIView):
    """A study's task guidelines: read them, or set them (the study's own text; empty or
    the mode's default text: the mode's default)."""

    @extend_schema(responses=GuidelinesOutput)
    def get(self, request, study_id: int):
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(_output(study))

    @extend_schema(request=GuidelinesPatch, responses=GuidelinesOutput)
    def put(self, request, study_id: int):
        """Set the guidelines at any time: each judgment records the version it was shown."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = GuidelinesPatch(data=request.data)
        data.is_valid(raise_exception=True)
        study_set_guidelines(study=study, text=data.validated_data["guidelines"])
        return Response(_output(study))
