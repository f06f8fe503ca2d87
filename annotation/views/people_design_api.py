"""The study's sampling design in the REST API (issue 40): ``GET`` the design settings and
the items' counts, ``POST`` to draw the design from the study's settings (the owner or
staff, before the first judgment). Thin over ``services/people_design.py``; a member or
the owner reads, anyone else gets 404 (``selectors.study_for_researcher``), and the
service refuses a member's draw (403) and a draw the study's state forbids (409)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.api_schema import CONFLICT
from annotation.services.people_design import people_design_apply, people_design_state


class PeopleDesignOutput(serializers.Serializer):
    design = serializers.ChoiceField(
        choices=["", "uniform", "uncertainty"],
        help_text="The setting people_design: empty, every item to people.",
    )
    share = serializers.FloatField(help_text="The setting people_share.")
    floor = serializers.FloatField(help_text="The setting people_floor.")
    judge_id = serializers.IntegerField(help_text="The setting people_judge (0: the first).")
    second_judge_id = serializers.IntegerField(help_text="people_judge_second (0: none).")
    applied = serializers.CharField(help_text="The design the items carry; empty: none.")
    items = serializers.IntegerField(help_text="The study's items.")
    items_in_design = serializers.IntegerField(help_text="Items with a sampling probability.")
    items_drawn = serializers.IntegerField(help_text="Of those, drawn for people.")
    items_left_out = serializers.IntegerField(help_text="Of those, left out (target 0).")
    items_expected = serializers.FloatField(help_text="The sum of their probabilities.")
    judgments = serializers.IntegerField(help_text="People's judgments (a design needs none).")


class PeopleDesignApplied(PeopleDesignOutput):
    judge = serializers.DictField(required=False, help_text="The judge the design read.")
    score = serializers.CharField(required=False, help_text="The judge's score read.")
    uncertainty = serializers.CharField(
        required=False, help_text="second_judge, runs or swaps; empty: the uniform design."
    )
    uncertainty_words = serializers.CharField(required=False)
    units = serializers.IntegerField(required=False, help_text="Units the judge answered.")
    groups = serializers.IntegerField(required=False, help_text="Units drawn together.")
    drawn_groups = serializers.IntegerField(required=False)
    expected_groups = serializers.FloatField(required=False)


class StudyPeopleDesignApi(APIView):
    @extend_schema(responses={200: PeopleDesignOutput})
    def get(self, request, study_id: int):
        """The design settings, the design the items carry, and the items' counts."""
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(PeopleDesignOutput(people_design_state(study)).data)

    @extend_schema(request=None, responses={200: PeopleDesignApplied, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Draw the study's design (its settings) onto its items: the owner's, before the
        first judgment, with the judge's answer on every unit."""
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(
            PeopleDesignApplied(people_design_apply(study=study, user=request.user)).data
        )
