"""REST API (DRF): thin views with nested input/output serializers, calling selectors and
services. Another researcher's study answers 404."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.models import Job, Study
from annotation.services.studies import study_create


class JobOutput(serializers.ModelSerializer):
    class Meta:
        model = Job
        fields = ["id", "kind", "study", "status", "progress", "message", "error", "result",
                  "created_at", "started_at", "finished_at"]


class StudyOutput(serializers.ModelSerializer):
    class Meta:
        model = Study
        fields = ["id", "name", "description", "mode", "status", "settings", "seed", "owner",
                  "public_id", "created_at"]


class StudyListApi(APIView):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        mode = serializers.ChoiceField(choices=Study.Mode.choices)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        settings = serializers.DictField(required=False, default=dict)
        seed = serializers.IntegerField(required=False, min_value=0, default=0)

    @extend_schema(responses=StudyOutput(many=True))
    def get(self, request):
        studies = selectors.studies_for_researcher(request.user)
        return Response(StudyOutput(studies, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: StudyOutput})
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            study = study_create(owner=request.user, **data.validated_data)
        except PermissionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
        except ValueError as exc:
            return Response({"settings": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(StudyOutput(study).data, status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    @extend_schema(responses=StudyOutput)
    def get(self, request, study_id: int):
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(StudyOutput(study).data)


class JobDetailApi(APIView):
    @extend_schema(responses=JobOutput)
    def get(self, request, job_id: int):
        return Response(JobOutput(selectors.job_for_user(request.user, job_id)).data)
