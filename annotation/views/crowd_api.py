"""The crowd in the REST API (DRF): the study's crowd panel (links, URLs, codes, MTurk XML;
for everyone who sees the study page) and, for the study's owner and staff only (they pay
the workers, like the review page), sync, review (approve, reject, bonus; dry run) and the
ledger of a study. Thin over ``annotation/services/crowd`` and the panel's own reads."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.api_schema import CONFLICT
from annotation.crowd import PlatformError
from annotation.errors import Unavailable
from annotation.models import CrowdLedgerEntry
from annotation.modes import get_mode
from annotation.parsers import DepthSafeJSONParser
from annotation.services.crowd import review
from annotation.services.crowd.sync import crowd_sync
from annotation.views.dashboard import crowd_panel_context


def _owned(request, study_id: int):
    study = selectors.study_for_researcher(request.user, study_id)
    if not (request.user.is_staff or request.user.pk == study.owner_id):
        raise Http404("No such study.")
    return study


class CrowdPanelOutput(serializers.Serializer):
    status = serializers.CharField(help_text="The study's status: a link exists while live.")
    crowd_link = serializers.URLField(
        allow_null=True, help_text="The stable crowd link (null unless the study is live)."
    )
    crowd_link_expires_at = serializers.DateTimeField(allow_null=True)
    crowd_link_expired = serializers.BooleanField(
        help_text="The link is past its age limit: close and reopen the study to renew it."
    )
    prolific_study_url = serializers.CharField(
        allow_null=True, help_text="What Prolific's study URL field takes (with placeholders)."
    )
    prolific_completion_url = serializers.URLField(
        help_text="Where finished Prolific workers are sent."
    )
    completion_code = serializers.CharField(help_text="The code a finished worker reports.")
    screen_out_code = serializers.CharField(help_text="Empty: the study pays no screen-out.")
    prolific_screen_out_url = serializers.URLField(allow_null=True)
    failed_check_code = serializers.CharField(
        help_text="Prolific's failed attention check code; empty: such workers return."
    )
    failed_check_url = serializers.URLField(allow_null=True)
    prolific_study_id = serializers.CharField(help_text="Empty: any STUDY_ID is accepted.")
    mturk_external_question = serializers.CharField(
        allow_null=True, help_text="The HIT's ExternalQuestion XML (null unless live)."
    )


class StudyCrowdPanelApi(APIView):
    @extend_schema(responses={200: CrowdPanelOutput})
    def get(self, request, study_id: int):
        """The study page's crowd panel: what to paste into Prolific and MTurk (issue 46)."""
        study = selectors.study_for_researcher(request.user, study_id)
        panel = crowd_panel_context(request, study, get_mode(study.mode))
        live = bool(panel["crowd_link"])
        return Response(
            CrowdPanelOutput(
                {
                    **panel,
                    "status": study.status,
                    "crowd_link": panel["crowd_link"] or None,
                    "crowd_link_expires_at": panel.get("crowd_link_expires"),
                    "crowd_link_expired": panel.get("crowd_link_expired", False),
                    "prolific_study_url": panel.get("prolific_study_url") if live else None,
                    "mturk_external_question": panel.get("mturk_question") if live else None,
                }
            ).data
        )


class LedgerOutput(serializers.ModelSerializer):
    participant = serializers.CharField(source="participant.pseudonym")
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = CrowdLedgerEntry
        fields = [
            "id",
            "participant",
            "action",
            "reason",
            "amount_cents",
            "status",
            "platform_ref",
            "answer",
            "attempts",
            "created_by",
            "created_at",
            "updated_at",
        ]


class ReviewInput(serializers.Serializer):
    action = serializers.ChoiceField(choices=CrowdLedgerEntry.Action.values)
    filter = serializers.ChoiceField(choices=list(review.FILTERS), default="completed_clean")
    participants = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=10_000
    )
    amount_cents = serializers.IntegerField(min_value=0, default=0)
    per_judgment_cents = serializers.IntegerField(min_value=0, default=0)
    reason = serializers.CharField(max_length=200, default="", allow_blank=True)
    message = serializers.CharField(max_length=2000, default="", allow_blank=True)
    category = serializers.ChoiceField(choices=review.REJECT_CATEGORIES, default="FAILED_CHECK")
    dry_run = serializers.BooleanField(default=False)

    class Meta:
        ref_name = "Review"  # the schema's ReviewRequest (requests are split)


class SyncOutput(serializers.Serializer):
    seen = serializers.IntegerField(help_text="Submissions read from the platforms.")
    matched = serializers.IntegerField(help_text="Matched to a participant.")
    reclaimed = serializers.IntegerField(help_text="Workers who left, reclaimed now.")
    released = serializers.IntegerField(help_text="Open leases released.")


class ReviewRowOutput(serializers.Serializer):
    participant = serializers.CharField()
    amount_cents = serializers.IntegerField()
    message = serializers.CharField()
    ledger = LedgerOutput(allow_null=True)


class ReviewCostOutput(serializers.Serializer):
    platform = serializers.CharField(help_text="prolific or mturk.")
    currency = serializers.CharField(help_text="The ISO 4217 code the platform pays in.")
    paid_cents = serializers.IntegerField(help_text="What the workers get.")
    fee_percent = serializers.FloatField(help_text="The platform's service fee (a setting).")
    fee_cents = serializers.IntegerField(help_text="The fee, rounded to the cent (no VAT).")
    charged_cents = serializers.IntegerField(help_text="Paid plus the fee.")


class ReviewOutput(serializers.Serializer):
    action = serializers.CharField()
    total_cents = serializers.IntegerField()
    rows = ReviewRowOutput(many=True)
    costs = ReviewCostOutput(many=True, help_text="A bonus's cost per platform (else empty).")
    missing_credentials = serializers.ListField(
        child=serializers.CharField(),
        help_text="Credentials the study's owner has not stored that sending needs.",
    )


def _plan_output(plan: dict) -> dict:
    return {
        "action": plan["action"],
        "total_cents": plan["total_cents"],
        "costs": ReviewCostOutput(plan["costs"], many=True).data,
        "missing_credentials": plan["missing_credentials"],
        "rows": [
            {
                "participant": row["participant"].pseudonym,
                "amount_cents": row["amount_cents"],
                "message": row["message"],
                "ledger": LedgerOutput(row["entry"]).data if row.get("entry") else None,
            }
            for row in plan["rows"]
        ],
    }


class StudyCrowdSyncApi(APIView):
    @extend_schema(request=None, responses={200: SyncOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Read the linked Prolific study / MTurk HITs and reclaim leases of workers who left."""
        study = _owned(request, study_id)
        try:
            return Response(crowd_sync(study=study))
        except PlatformError as exc:
            raise Unavailable(f"crowd platform: {exc}") from None


class StudyCrowdReviewApi(APIView):
    # A JSON body: up to 10,000 participant ids would be more form fields than Django takes.
    parser_classes = [DepthSafeJSONParser]

    @extend_schema(request=ReviewInput, responses={200: ReviewOutput, 409: CONFLICT})
    def post(self, request, study_id: int):
        """Approve, reject or bonus a filtered selection (``dry_run``: the plan and total only)."""
        study = _owned(request, study_id)
        data = ReviewInput(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        people = review.review_selection(
            study=study, filter=given["filter"], ids=given.get("participants")
        )
        try:
            plan = review.crowd_review(
                study=study,
                user=request.user,
                action=given["action"],
                participants=people,
                amount_cents=given["amount_cents"],
                per_judgment_cents=given["per_judgment_cents"],
                reason=given["reason"],
                message=given["message"],
                category=given["category"],
                dry_run=given["dry_run"],
            )
        except PlatformError as exc:
            raise Unavailable(f"crowd platform: {exc}") from None
        return Response(_plan_output(plan))


class StudyCrowdLedgerApi(APIView):
    @extend_schema(responses={200: LedgerOutput(many=True)})
    def get(self, request, study_id: int):
        """Every approve, reject and bonus call of the study, newest first."""
        study = _owned(request, study_id)
        return Response(LedgerOutput(review.ledger_rows(study, limit=10_000), many=True).data)
