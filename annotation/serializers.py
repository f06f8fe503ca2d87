"""API output shapes shared by the API views in ``apis.py`` and ``views/*_api.py``.

A layer below both (pyproject's import contract), so the study data API in ``views`` and
the studies API in ``apis`` answer with one job shape without importing each other.
"""

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation import selectors
from annotation.models import Job


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
            selectors.job_file_path(job)
        except Http404:  # deleted since (old-export cleanup, an operator): nothing to offer
            return None
        url = reverse("api_job_file", args=[job.pk])  # Basic auth works there, not on pages
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url
