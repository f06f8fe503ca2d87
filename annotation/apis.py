"""REST API (DRF): thin views with nested input/output serializers, calling selectors and
services. A study or job the user may not manage answers 404, like a missing one."""

from django import forms
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from annotation import selectors, storage
from annotation.api_schema import CONFLICT
from annotation.errors import Conflict, ServiceError
from annotation.forms import MAX_SIZES, MAX_STUDY_SIZE, PlanForm, setting_specs
from annotation.models import Job, Study
from annotation.modes import get_mode
from annotation.registry import mode_choices
from annotation.serializers import GuidelinesInput, GuidelinesOutput, JobOutput, PairLabelsInput
from annotation.services.exports import EXPORT_FORMATS, EXPORT_TABLES, export_request
from annotation.services.exports.captions import (
    caption_metric_json,
    caption_metric_rows,
    metric_column_names,
    metric_names,
)
from annotation.services.jobs import job_sweep_stale
from annotation.services.metrics import (
    CIDER_CONVENTIONS,
    CIDER_DEFAULT,
    RESAMPLES,
    metric_names_available,
    metrics_latest,
    metrics_pending,
    metrics_request,
    metrics_unavailable,
)
from annotation.services.metrics_ensemble import metrics_ensemble
from annotation.services.planning import JUDGE_PLAN_HELP
from annotation.services.reports import report_request
from annotation.services.studies import (
    MAX_SEED,
    study_close,
    study_create,
    study_open,
    study_reopen,
)
from annotation.tasks import enqueue
from annotation.text import DESCRIPTION_MAX_CHARS, TextValidator


class StudyOutput(GuidelinesOutput):
    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "description",
            "mode",
            "status",
            "settings",
            "seed",
            "owner",
            "public_id",
            "created_at",
            "guidelines",
            "guidelines_version",
        ]


class StudyPage(serializers.Serializer):
    count = serializers.IntegerField(help_text="Studies in all pages.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = StudyOutput(many=True)


class StudyListApi(APIView):
    class InputSerializer(serializers.Serializer):
        # DRF's max_length checks the length; TextValidator the characters.
        name = serializers.CharField(max_length=200, validators=[TextValidator("name")])
        mode = serializers.ChoiceField(choices=[])

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # The registry is the list of modes, read when asked (a mode registered after
            # this class was defined is a choice too).
            self.fields["mode"].choices = mode_choices()

        description = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=DESCRIPTION_MAX_CHARS,
            validators=[TextValidator("description", multiline=True)],
        )
        settings = serializers.DictField(required=False, default=dict)
        seed = serializers.IntegerField(required=False, min_value=0, max_value=MAX_SEED, default=0)
        guidelines = GuidelinesInput(required=False, default="")

        class Meta:
            ref_name = "StudyCreate"

    class Pagination(LimitOffsetPagination):
        default_limit = 100
        max_limit = 1000

    @extend_schema(
        operation_id="studies_list",  # a page object, not a list, but the list of studies
        parameters=[
            OpenApiParameter("limit", int, required=False, description="Studies per page."),
            OpenApiParameter("offset", int, required=False, description="Studies skipped."),
        ],
        responses=StudyPage,
    )
    def get(self, request):
        """The studies the user owns or was added to (every study for staff), newest first."""
        paginator = self.Pagination()
        studies = selectors.studies_for_researcher(request.user).order_by("-created_at", "-id")
        page = paginator.paginate_queryset(studies, request, view=self)
        return paginator.get_paginated_response(StudyOutput(page, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: StudyOutput})
    def post(self, request):
        """Create a draft study owned by the user (researchers only)."""
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        study = study_create(owner=request.user, **data.validated_data)
        return Response(StudyOutput(study).data, status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    @extend_schema(responses=StudyOutput)
    def get(self, request, study_id: int):
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(StudyOutput(study).data)


class StudyOpenApi(APIView):
    @extend_schema(request=None, responses={200: StudyOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Build the study's items (first time only) and make it live."""
        study = selectors.study_for_researcher(request.user, study_id)
        study_open(study=study)
        return Response(StudyOutput(study).data)


class StudyCloseApi(APIView):
    @extend_schema(request=None, responses={200: StudyOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Stop serving the study; its judgments stay."""
        study = selectors.study_for_researcher(request.user, study_id)
        study_close(study=study)
        return Response(StudyOutput(study).data)


class StudyReopenApi(APIView):
    @extend_schema(request=None, responses={200: StudyOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Serve a closed study again (live; draft when it was closed before any item)."""
        study = selectors.study_for_researcher(request.user, study_id)
        study_reopen(study=study)
        return Response(StudyOutput(study).data)


class ModeSettingOutput(serializers.Serializer):
    name = serializers.CharField(help_text="The key in a study's settings object.")
    kind = serializers.ChoiceField(choices=["whole", "number", "flag", "text", "url"])
    label = serializers.CharField(help_text="What the study form calls it, in plain words.")
    group = serializers.CharField(help_text="The study form's group of settings it is in.")
    doc = serializers.CharField()
    default = serializers.JSONField(allow_null=True)
    low = serializers.FloatField(allow_null=True, help_text="Lowest value (whole, number).")
    high = serializers.FloatField(allow_null=True, help_text="Highest value (whole, number).")
    optional = serializers.BooleanField(help_text="Whether null is allowed (whole).")
    open_ends = serializers.BooleanField(help_text="Whether low and high are excluded.")
    max_length = serializers.IntegerField(allow_null=True, help_text="Longest text (text, url).")


class ModeOutput(serializers.Serializer):
    name = serializers.CharField(help_text="The value of a study's mode.")
    label = serializers.CharField()
    settings = ModeSettingOutput(many=True)


class ModeListApi(APIView):
    @extend_schema(responses=ModeOutput(many=True))
    def get(self, request):
        """Every mode with its settings: the keys ``settings`` takes, their bounds, defaults
        and meaning (the same declaration that checks them)."""
        modes = [
            {"name": value, "label": label, "settings": setting_specs(value)}
            for value, label in mode_choices()
        ]
        return Response(ModeOutput(modes, many=True).data)


class ReportOutput(serializers.Serializer):
    study = serializers.IntegerField(help_text="Id of the study.")
    mode = serializers.CharField(help_text="The study's mode; it decides the result's shape.")
    job = serializers.IntegerField(help_text="Id of the report job that computed it.")
    finished_at = serializers.DateTimeField()
    result = serializers.JSONField(
        help_text="The report as the page shows it. An arena study's holds `leaderboard` "
        "([{system, score, ci_low, ci_high, rank_low, rank_high, battles}], bootstrap 95% "
        "intervals on LMArena's scale), `length_leaderboard` (same fields but battles, "
        "sandwich intervals) and `length_coefficient` ({value, ci_low, ci_high, unit}). "
        "Every mode's has `people_judge`: per system people-only, judge-only, combined intervals."
    )


class StudyReportApi(APIView):
    @extend_schema(responses={200: ReportOutput})
    def get(self, request, study_id: int):
        """The study's latest finished report, any mode; 404 when none has been computed."""
        study = selectors.study_for_researcher(request.user, study_id)
        latest = selectors.report_latest(study)
        if latest is None:
            raise Http404("No report has been computed for this study yet.")
        return Response(
            ReportOutput(
                {
                    "study": study.pk,
                    "mode": study.mode,
                    "job": latest.pk,
                    "finished_at": latest.finished_at,
                    "result": latest.result,
                }
            ).data
        )

    @extend_schema(request=None, responses={202: JobOutput})
    def post(self, request, study_id: int):
        """Queue a report job (the report page's button); poll the job, then GET this."""
        study = selectors.study_for_researcher(request.user, study_id)
        job = enqueue(report_request(study=study, user=request.user))
        job.refresh_from_db()
        return Response(
            JobOutput(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
        )


class StudyJobsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "kind",
                enum=Job.Kind.values,
                required=False,
                description="Only jobs of this kind (e.g. import).",
            ),
        ],
        responses=JobOutput(many=True),
    )
    def get(self, request, study_id: int):
        """The study's jobs, newest first: import status, exports, reports (a member does
        not see the owner's raw-id exports)."""
        study = selectors.study_for_researcher(request.user, study_id)
        job_sweep_stale(job_ids=study.jobs.values_list("pk", flat=True))
        jobs = selectors.study_jobs_for_user(request.user, study).order_by("-created_at", "-id")
        kind = request.query_params.get("kind")
        if kind:
            if kind not in Job.Kind.values:
                choices = ", ".join(Job.Kind.values)
                return Response(
                    {"kind": [f"Unknown job kind {kind!r}; choose {choices}."]},
                    status=status.HTTP_400_BAD_REQUEST,
                )
            jobs = jobs.filter(kind=kind)
        return Response(JobOutput(jobs[:100], many=True, context={"request": request}).data)


class StudyExportsApi(APIView):
    class InputSerializer(serializers.Serializer):
        format = serializers.ChoiceField(
            choices=list(EXPORT_FORMATS),
            default="csv",
            help_text="dataset: a zip of Parquet tables with a README dataset card.",
        )
        # A mode may add tables (Export.extra_tables): any mode's table is a choice here,
        # and the service answers 404 for one the study's mode does not have.
        table = serializers.ChoiceField(
            choices=[],
            default="judgments",
            help_text=f"One of {', '.join(EXPORT_TABLES)} (the mode's judgments table, one "
            "row per participant) or a table the study's mode adds; a dataset holds them all.",
            error_messages={"invalid_choice": "Unknown table '{input}'."},
        )
        raw_ids = serializers.BooleanField(
            default=False,
            help_text="Add raw Prolific/MTurk ids to the participants table (owner only).",
        )
        images = serializers.BooleanField(
            default=False, help_text="Dataset: add the display images."
        )

        class Meta:
            ref_name = "Export"  # the schema's ExportRequest (requests are split)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.fields["table"].choices = [
                *EXPORT_TABLES,
                *sorted(
                    {
                        t.name
                        for name, _ in mode_choices()
                        for t in get_mode(name).export.extra_tables()
                    }
                ),
            ]

    @extend_schema(request=InputSerializer, responses={202: JobOutput})
    def post(self, request, study_id: int):
        """Queue an export of the study; poll the job until it is done."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        options = data.validated_data
        job = enqueue(
            export_request(
                study=study,
                user=request.user,
                export_format=options["format"],
                table=options["table"],
                raw_ids=options["raw_ids"],
                images=options["images"],
            )
        )
        job.refresh_from_db()
        return Response(
            JobOutput(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
        )


class MetricsReportOutput(serializers.Serializer):
    job = JobOutput(allow_null=True, help_text="The finished metrics job the report is from.")
    pending = JobOutput(allow_null=True, help_text="A metrics job queued or running now.")
    report = serializers.JSONField(
        allow_null=True,
        help_text="System-level table, caption-level correlations with bootstrap intervals "
        "(with and without Human), pairwise accuracy, robustness curves; null until computed.",
    )
    ensemble = serializers.JSONField(
        allow_null=True,
        help_text="With evaluate_on: the linear ensemble fitted on this study, its "
        "coefficients and its correlation on the other study.",
    )
    captions = serializers.JSONField(
        help_text="Per-caption scores, a page of the study's captions in id order (limit, "
        "default 100, at most 1,000; offset): {count, next, previous, columns: {metric "
        "name: column}, results: [{caption_id, image, system, purpose, raw_caption, "
        "metrics: {column: score or null}}]}. Columns are named as in the export's "
        "caption_metrics table (metric_cider_pycocoevalcap).",
    )


class MetricNameField(serializers.ChoiceField):
    """A metric this server computes now (the schema lists only those); a metric of the lab
    this server cannot run is refused with what it needs (Java, CLIP's encoders)."""

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError:
            reason = metrics_unavailable([data]) if isinstance(data, str) else None
            if reason:
                raise serializers.ValidationError(reason) from None
            raise


class StudyMetricsApi(APIView):
    """The metric lab: compute caption metrics (a job) and read the meta-evaluation report."""

    class InputSerializer(serializers.Serializer):
        metrics = serializers.ListField(
            child=MetricNameField(
                choices=[],
                error_messages={
                    "invalid_choice": '"{input}" is not a metric this server computes (Java '
                    "metrics need a Java runtime, CLIP-S needs CAPEVAL_CLIP_DIR: "
                    "docs/metrics.md)."
                },
            ),
            required=False,
            help_text='Metric names, e.g. "CIDEr (pycocoevalcap)" (default: all this '
            "server can compute; an empty list: report the imported columns only).",
        )
        cider_documents = serializers.ChoiceField(
            choices=list(CIDER_CONVENTIONS),
            default=CIDER_DEFAULT,
            help_text="CIDEr's document frequencies: "
            + "; ".join(f"{k}: {v}" for k, v in CIDER_CONVENTIONS.items())
            + f" (default {CIDER_DEFAULT}).",
        )
        resamples = serializers.IntegerField(
            min_value=0,
            max_value=RESAMPLES,
            default=RESAMPLES,
            help_text="Bootstrap resamples of each correlation interval.",
        )
        labels = PairLabelsInput()

        class Meta:
            ref_name = "Metrics"  # the schema's MetricsRequest

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # The names this server computes now (Java, CLIP encoders): the schema lists them.
            self.fields["metrics"].child.choices = metric_names_available()

    class Pagination(LimitOffsetPagination):
        default_limit = 100
        max_limit = 1000

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "evaluate_on",
                {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},
                required=False,
                description="Another study's id: fit the ensemble here, evaluate it there.",
            ),
            OpenApiParameter("limit", int, required=False, description="Captions per page."),
            OpenApiParameter("offset", int, required=False, description="Captions skipped."),
        ],
        responses={200: MetricsReportOutput, 409: CONFLICT},
    )
    def get(self, request, study_id: int):
        """The study's latest meta-evaluation report (and a pending job, if any), and a
        page of the captions' metric scores."""
        study = selectors.study_for_researcher(request.user, study_id)
        latest, pending = metrics_latest(study), metrics_pending(study)
        ensemble = None
        other_id = request.query_params.get("evaluate_on")
        if other_id:
            if not (other_id.isascii() and other_id.isdigit()) or len(other_id) > 18:
                return Response(
                    {"evaluate_on": ["A study id."]}, status=status.HTTP_400_BAD_REQUEST
                )
            other = selectors.study_for_researcher(request.user, int(other_id))
            if latest is None:
                raise Conflict("Compute this study's metrics first.", field="evaluate_on")
            ensemble = metrics_ensemble(train=study, test=other)
        context = {"request": request}
        return Response(
            {
                "job": JobOutput(latest, context=context).data if latest else None,
                "pending": JobOutput(pending, context=context).data if pending else None,
                "report": latest.result if latest else None,
                "ensemble": ensemble,
                "captions": self._captions(request, study),
            }
        )

    def _captions(self, request, study: Study) -> dict:
        paginator = self.Pagination()
        page = paginator.paginate_queryset(caption_metric_rows(study), request, view=self)
        columns = metric_column_names(metric_names(study))
        return {
            "count": paginator.count,
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
            "columns": columns,
            "results": caption_metric_json(page, columns),
        }

    @extend_schema(request=InputSerializer, responses={202: JobOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Queue a metrics job for the study; poll the job until it is done."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        asked = dict(data.validated_data)  # the other fields are metrics_request's keywords
        names = asked.pop("metrics", None)
        job = enqueue(metrics_request(study=study, user=request.user, names=names, **asked))
        job.refresh_from_db()
        return Response(
            JobOutput(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
        )


class JobDetailApi(APIView):
    @extend_schema(responses=JobOutput)
    def get(self, request, job_id: int):
        job = selectors.job_for_user(request.user, job_id)
        if job_sweep_stale(job_ids=[job.pk]):  # its process vanished: say so, stop polling
            job.refresh_from_db()
        return Response(JobOutput(job, context={"request": request}).data)


class JobFileApi(APIView):
    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The finished job's file (an export's data)."
            )
        }
    )
    def get(self, request, job_id: int):
        """A finished job's file, with the API's credentials (a job's ``download_url``);
        404 while it has none."""
        job = selectors.job_for_user(request.user, job_id)
        if job.status != Job.Status.DONE or not job.result_file:
            raise Http404("This job has no file.")
        # What the schema says, any format: application/octet-stream.
        name = selectors.job_file_name(job.result_file)
        return storage.download(name, content_type="application/octet-stream")


def exception_handler(exc, context):
    """DRF's handler, plus the services' one error type (settings: EXCEPTION_HANDLER).

    The API's one mapping of a refusal: its class's status, with ``{field: [message]}``
    when it names a field (the shape of a serializer's errors) and ``{"detail": message}``
    otherwise, and always the class's machine-readable ``code`` (``annotation/errors.py``).
    """
    if isinstance(exc, ServiceError):
        body = {exc.field: [exc.message]} if exc.field else {"detail": exc.message}
        response = Response({**body, "code": exc.code}, status=exc.status)
        retry_after = (exc.details or {}).get("retry_after")
        if retry_after:  # the task queue is unavailable: say when to ask again
            response["Retry-After"] = str(retry_after)
        return response
    return drf_exception_handler(exc, context)


class PlanOutput(serializers.Serializer):
    mode = serializers.CharField()
    headline = serializers.CharField(help_text="What the half-widths are of.")
    confidence = serializers.FloatField()
    target_half_width = serializers.FloatField(allow_null=True)
    power_target = serializers.FloatField(allow_null=True)
    n_simulations = serializers.IntegerField()
    points = serializers.JSONField(
        help_text="Per size: n_images, judgments_per_item, half_width (per headline number), "
        "power, judgments, money, crowd_hours, undefined (simulations left out)."
    )
    recommended = serializers.JSONField(
        allow_null=True, help_text="The cheapest point meeting the targets; null if none."
    )
    pilot = serializers.CharField(
        help_text='"study" (its own judgments: VICR ratings, HUMANr comparisons) or "assumptions".'
    )
    seconds_per_judgment = serializers.FloatField(allow_null=True)
    price_per_judgment = serializers.FloatField(allow_null=True)
    judge = serializers.JSONField(help_text=JUDGE_PLAN_HELP)


def plan_parameter(name: str, field: forms.Field) -> OpenApiParameter:
    """A planner field as a query parameter, with the bounds the form checks."""
    if name == "sizes":  # "10,20,40": a comma-separated list (OpenAPI's form style)
        schema = {
            "type": "array",
            "items": {"type": "integer", "minimum": 2, "maximum": MAX_STUDY_SIZE},
            "minItems": 1,
            "maxItems": MAX_SIZES,
        }
        return OpenApiParameter(
            name, schema, required=False, style="form", explode=False, description=field.help_text
        )
    # Django's FloatField is an IntegerField subclass: ask for it first.
    schema = {"type": "number" if isinstance(field, forms.FloatField) else "integer"}
    for key, bound in (("minimum", field.min_value), ("maximum", field.max_value)):
        if bound is not None:
            schema[key] = bound
    return OpenApiParameter(
        name, schema, required=False, description=str(field.help_text or field.label)
    )


class StudyPlanApi(APIView):
    """The planner (issues 15, 40): predicted interval widths, power and cost per study size,
    and the human judgments a target half-width needs with and without the study's judge.
    The query takes the page's fields (``forms.PlanForm``); a bad value answers 400."""

    @extend_schema(
        parameters=[plan_parameter(name, field) for name, field in PlanForm.base_fields.items()],
        responses=PlanOutput,
    )
    def get(self, request, study_id: int):
        study = selectors.study_for_researcher(request.user, study_id)
        form = PlanForm(request.query_params, mode=study.mode)
        if not form.is_valid():
            return Response(form.error_dict(), status=status.HTTP_400_BAD_REQUEST)
        try:
            return Response(form.plan(study))
        except ValueError as exc:
            return Response({"non_field_errors": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
