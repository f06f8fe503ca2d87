"""The data browser: a study's images with their captions by system, each caption with its
metric scores, human scores and judgments (``/studies/<id>/items/``), and the same through
the API (``GET /api/studies/<id>/items/`` and ``GET /api/studies/<id>/judgments/``).

Thin: the filters are parsed and the rows loaded by ``annotation/selectors_items.py``; what
a judgment says of a caption is the mode's (``mode.browse``). Only researchers who may
manage the study see it (anyone else: 404, as every study page). A bad filter or page
number shows the page with the reason and a 4xx status, never a traceback.
"""

from urllib.parse import urlencode

from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.views import APIView

from annotation import selectors, selectors_items
from annotation.errors import NotFound, ServiceError
from annotation.registry import caption_purpose_choices
from annotation.text import text_pattern
from annotation.views.access import researcher_required


def _page(paginator: Paginator, number: str):
    """The page ``number`` (1 when empty), or ServiceError saying which pages exist."""
    try:
        return paginator.page(number or 1)
    except PageNotAnInteger:
        raise ServiceError(
            f"The page number must be a whole number from 1 to {paginator.num_pages}.",
            field="page",
        ) from None
    except EmptyPage:
        raise NotFound(
            f"There is no page {number}; the pages run from 1 to {paginator.num_pages}.",
            field="page",
        ) from None


@require_GET
@researcher_required
def study_items(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    context = {
        "study": study,
        "systems": selectors_items.study_systems(study),
        "purposes": caption_purpose_choices(),
        "filters": selectors_items.BrowseFilters(),
        "rows": [],
        "page": None,
        "error": "",
        "per_item": selectors_items.JUDGMENTS_PER_ITEM,
        # Why the rows name no rater, in a study whose mode asks raters' vision.
        "unnamed_why": "" if selectors_items.names_raters(study) else selectors_items.UNNAMED_WHY,
    }
    try:
        filters = selectors_items.browse_filters(request.GET)
        context["filters"] = filters
        paginator = Paginator(
            selectors_items.browse_images(study, filters), selectors_items.IMAGES_PER_PAGE
        )
        page = _page(paginator, request.GET.get("page", ""))
    except ServiceError as exc:
        context["error"] = exc.message
        return render(request, "studies/items.html", context, status=exc.status)
    context["page"] = page
    context["rows"] = selectors_items.browse_rows(study, filters, list(page.object_list))
    context["query"] = urlencode(filters.query())
    return render(request, "studies/items.html", context)


# The API: the same rows as JSON.


class JudgmentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    item = serializers.IntegerField(help_text="Id of the item judged.")
    kind = serializers.CharField(help_text="The item's kind (the phase: stage1, game, ...).")
    part = serializers.IntegerField(help_text="Part of the lease (HUMANr: the trial, from 0).")
    participant = serializers.CharField(
        allow_null=True,
        help_text="The participant's pseudonym; null in a study whose mode asks raters' "
        "vision (the kind would tell the rater's group).",
    )
    source = serializers.CharField(help_text="Registered account, Prolific or MTurk.")
    created_at = serializers.DateTimeField()
    dwell_ms = serializers.IntegerField(help_text="Server-measured time since serving.")
    excluded = serializers.BooleanField()
    exclusion_reason = serializers.CharField(allow_blank=True)
    what = serializers.CharField(help_text="What the judgment says of this caption, in words.")


class HumanScoreOutput(serializers.Serializer):
    name = serializers.CharField()
    mean = serializers.FloatField(help_text="Mean over the judgments not excluded.")
    n = serializers.IntegerField(help_text="Judgments averaged.")


class PublishedScoreOutput(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.FloatField()


class LeftOutOutput(serializers.Serializer):
    item = serializers.IntegerField(help_text="An item of the caption with more judgments.")
    judgments = serializers.IntegerField(help_text="Its judgments in all.")


class CaptionOutput(serializers.Serializer):
    id = serializers.IntegerField(source="caption.pk")
    system = serializers.CharField(source="caption.system")
    purpose = serializers.CharField(source="caption.purpose")
    text = serializers.CharField(source="caption.text", help_text="As shown to annotators.")
    raw_text = serializers.CharField(source="caption.raw_text", help_text="As imported.")
    metrics = serializers.DictField(
        source="caption.metrics",
        child=serializers.FloatField(),
        help_text="The metric lab's stored scores, by implementation name.",
    )
    published = PublishedScoreOutput(
        many=True, help_text="Human scores a published dataset gives this caption."
    )
    human = HumanScoreOutput(many=True, help_text="The study's human scores of the caption.")
    judgments = JudgmentOutput(
        many=True,
        help_text="The first judgments of each of the caption's items (see left_out).",
    )
    left_out = LeftOutOutput(
        many=True,
        help_text="Items with more judgments than a page loads: only their first are listed "
        "and averaged; /judgments/?item= lists them all.",
    )


class ImageOutput(serializers.Serializer):
    id = serializers.IntegerField(source="image.pk")
    name = serializers.CharField(source="image.name")
    width = serializers.IntegerField(source="image.width")
    height = serializers.IntegerField(source="image.height")
    alt_text = serializers.CharField(source="image.alt_text")
    captions = CaptionOutput(many=True)
    image_judgments = JudgmentOutput(
        many=True, help_text="Judgments the mode ties to the image as a whole."
    )


class ItemsPageOutput(serializers.Serializer):
    count = serializers.IntegerField(help_text="Images the filters keep.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ImageOutput(many=True)


class NoteOutput(serializers.Serializer):
    caption = serializers.IntegerField(
        allow_null=True, help_text="The caption (null: the image as a whole)."
    )
    what = serializers.CharField()
    scores = serializers.DictField(child=serializers.FloatField())


class JudgmentFullOutput(JudgmentOutput):
    what = None
    payload = serializers.JSONField(help_text="What the participant submitted, validated.")
    result = serializers.JSONField(help_text="What the server computed.")
    notes = NoteOutput(many=True, help_text="What the judgment says of each caption.")


class JudgmentsPageOutput(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = JudgmentFullOutput(many=True)


class BrowsePagination(LimitOffsetPagination):
    default_limit = selectors_items.IMAGES_PER_PAGE
    max_limit = 100


class JudgmentPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000


PAGE_PARAMETERS = [
    OpenApiParameter("limit", int, required=False, description="Rows per page."),
    OpenApiParameter("offset", int, required=False, description="Rows to skip."),
]


def _text(max_length: int) -> dict:
    """A query parameter's text, as ``selectors_items`` checks it (one line, bounded)."""
    return {"type": "string", "maxLength": max_length, "pattern": text_pattern()}


#: An id as ``selectors_items.judgment_filters`` reads it: at most 18 digits.
_ID = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}


class StudyItemsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "system",
                _text(selectors_items.SYSTEM_MAX_CHARS),
                required=False,
                description="Only this system.",
            ),
            OpenApiParameter(
                "purpose",
                enum=[value for value, _ in caption_purpose_choices()],
                required=False,
                description="Only captions of this purpose.",
            ),
            OpenApiParameter(
                "q",
                _text(selectors_items.SEARCH_MAX_CHARS),
                required=False,
                description="Image name or caption text contains.",
            ),
            *PAGE_PARAMETERS,
        ],
        responses=ItemsPageOutput,
    )
    def get(self, request, study_id: int):
        """The study's images, paginated, each with its captions by system, their metric
        and human scores and their judgments (the data browser's rows)."""
        study = selectors.study_for_researcher(request.user, study_id)
        filters = selectors_items.browse_filters(request.query_params)
        paginator = BrowsePagination()
        images = paginator.paginate_queryset(
            selectors_items.browse_images(study, filters), request, view=self
        )
        rows = selectors_items.browse_rows(study, filters, list(images))
        return paginator.get_paginated_response(ImageOutput(rows, many=True).data)


class StudyJudgmentsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("item", _ID, required=False, description="Only this item's."),
            OpenApiParameter(
                "caption", _ID, required=False, description="Only those about this caption."
            ),
            OpenApiParameter(
                "participant", _text(16), required=False, description="Only this pseudonym's."
            ),
            OpenApiParameter("excluded", bool, required=False, description="Excluded or not."),
            *PAGE_PARAMETERS,
        ],
        responses=JudgmentsPageOutput,
    )
    def get(self, request, study_id: int):
        """The study's judgments in the order stored, paginated, each with what the mode
        says of each caption it is about."""
        study = selectors.study_for_researcher(request.user, study_id)
        filters = selectors_items.judgment_filters(request.query_params)
        judgments = selectors_items.judgments_list(study, filters)
        paginator = JudgmentPagination()
        caption = filters.get("caption")
        if caption is None:
            page = paginator.paginate_queryset(judgments, request, view=self)
            rows = selectors_items.judgment_rows(study, list(page))
        else:
            # Which judgments are about a caption is the mode's to say, in memory: the rows
            # are those of the items showing its image (a bounded set), kept, then paged.
            kept = selectors_items.judgment_rows(study, list(judgments), caption=caption)
            rows = paginator.paginate_queryset(kept, request, view=self)
        return paginator.get_paginated_response(JudgmentFullOutput(rows, many=True).data)
