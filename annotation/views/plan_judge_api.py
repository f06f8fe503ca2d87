"""The planner's judge plan alone in the REST API (issue 40):
``GET /api/studies/<id>/plan/judge/?target_half_width=0.1``.

``GET /api/studies/<id>/plan/`` carries the same plan as its ``judge`` field, but only
where the mode has a planner model: an arena, spans or context study's curve is refused
there (400), while the judge plan needs only the study's own units that people and the
judge both answered. Thin over ``services/planning.py``'s ``study_judge_plan``."""

from __future__ import annotations

import math

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.services.planning import JUDGE_PLAN_HELP, study_judge_plan


class PlanJudgeQuery(serializers.Serializer):
    target_half_width = serializers.FloatField(
        required=False,
        min_value=1e-6,
        help_text="The interval half-width to reach, on the estimate's scale; without it "
        "the plan gives the pilot's correlation and the bound only.",
    )

    def validate_target_half_width(self, value: float) -> float:
        if not math.isfinite(value):
            raise serializers.ValidationError("Give a finite number.")
        return value


class StudyPlanJudgeApi(APIView):
    @extend_schema(
        parameters=[PlanJudgeQuery],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description=JUDGE_PLAN_HELP)},
    )
    def get(self, request, study_id: int):
        """Human units and judgments a target half-width needs, without and with the
        study's judge, per system and pooled (any mode that takes a judge)."""
        study = selectors.study_for_researcher(request.user, study_id)
        query = PlanJudgeQuery(data=request.query_params)
        if not query.is_valid():
            return Response(query.errors, status=status.HTTP_400_BAD_REQUEST)
        target = query.validated_data.get("target_half_width")
        return Response(study_judge_plan(study, target_half_width=target))
