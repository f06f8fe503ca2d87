"""API output shapes shared by the API views in ``apis.py`` and ``views/*_api.py``, and the
input fields they take alike (guidelines, the metric lab's pair labels).

A layer below both (pyproject's import contract), so the study data API in ``views`` and
the studies API in ``apis`` answer with one job shape without importing each other.
"""

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation import selectors
from annotation.models import Job, Study
from annotation.modes import get_mode
from annotation.modes.guidelines import MAX_CHARS as GUIDELINES_MAX_CHARS
from annotation.services.imports.captions import METRIC_NAME_MAX
from annotation.services.metrics_labels import DATASET
from annotation.text import TextValidator


class JobOutput(serializers.ModelSerializer):
    download_url = serializers.SerializerMethodField(
        help_text="Where the finished job's file downloads (GET /api/jobs/ID/file/, with the "
        "API's credentials); null until there is one."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "study",
            "status",
            "progress",
            "message",
            "error",
            "result",
            "created_at",
            "started_at",
            "finished_at",
            "download_url",
        ]

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_download_url(self, job: Job) -> str | None:
        if job.status != Job.Status.DONE or not job.result_file:
            return None
        try:
            selectors.job_file_name(job.result_file)
        except Http404:  # deleted since (old-export cleanup, an operator): nothing to offer
            return None
        url = reverse("api_job_file", args=[job.pk])  # Basic auth works there, not on pages
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


class GuidelinesInput(serializers.CharField):
    """A study's task guidelines as the API takes them (issue 46): Markdown, multi-line,
    checked as every text is (``annotation.text``); blank: the mode's default."""

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("max_length", GUIDELINES_MAX_CHARS)
        kwargs.setdefault(
            "help_text",
            "Markdown participants read and the judge's prompt holds; empty: the mode's.",
        )
        super().__init__(validators=[TextValidator("guidelines", multiline=True)], **kwargs)


class PairLabelsInput(serializers.CharField):
    """Which human labels of a study's imported pairs the metric lab scores against (issue
    47): ``dataset`` or an imported column's name, checked as every text is (the schema
    says so). A name the study's pairs lack is the study's refusal (409), not the input's."""

    def __init__(self, **kwargs):
        kwargs.setdefault("default", DATASET)
        kwargs.setdefault("max_length", METRIC_NAME_MAX)
        kwargs.setdefault(
            "help_text",
            f"The imported pairs' human labels: {DATASET} (those imported with the pairs) or "
            "an imported column whose pair files carried labels (FLEUR).",
        )
        super().__init__(validators=[TextValidator("labels")], **kwargs)


@extend_schema_field(serializers.CharField())
class GuidelinesVersion(serializers.Field):
    """The short SHA-256 of the guidelines a study's participants and judge get now."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "Short SHA-256 of the guidelines shown now.")
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, study: Study) -> str:
        return get_mode(study.mode).guidelines(study).version


class GuidelinesOutput(serializers.ModelSerializer):
    """A study's output with its guidelines' version (``apis.StudyOutput`` extends it)."""

    guidelines_version = GuidelinesVersion()


class GuidelinesPatch(serializers.Serializer):
    guidelines = GuidelinesInput()

    class Meta:
        ref_name = "StudyGuidelines"
