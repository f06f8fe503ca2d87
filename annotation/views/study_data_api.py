"""The API's study data endpoints: import images and captions, import references, set people.

Thin views over the services the pages use (``import_request``, ``references_request``,
``study_set_people``, which invites new people), so the API and the pages refuse the same
things the same way. Access as the pages: the owner or a member; anyone else gets 404
(``selectors.study_for_researcher``).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.api_schema import CONFLICT
from annotation.errors import Conflict
from annotation.models import Caption, Study
from annotation.registry import caption_purpose_choices
from annotation.serializers import JobOutput
from annotation.services.imports import COCO_FORMAT, CSV_FORMAT, import_request
from annotation.services.imports.references import FORMATS, references_request
from annotation.services.people import NAME_MAX_CHARS, NAME_PATTERN, study_set_people
from annotation.tasks import enqueue


def _accepted(request, job) -> Response:
    job.refresh_from_db()
    return Response(
        JobOutput(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
    )


class StudyImportApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        images_zip = serializers.FileField(
            required=False, help_text="Images as a zip archive (JPEG, PNG or WebP)."
        )
        image_files = serializers.ListField(
            child=serializers.FileField(),
            required=False,
            default=list,
            min_length=1,
            help_text="Image files (repeat the field for several).",
        )
        captions = serializers.FileField(
            required=False,
            help_text="CSV (image, system, caption, ...) or COCO results JSON.",
        )
        coco_images = serializers.FileField(
            required=False, help_text="COCO captions JSON naming the images of a results file."
        )
        caption_format = serializers.ChoiceField(
            choices=["", CSV_FORMAT, COCO_FORMAT],
            required=False,
            default="",
            help_text="Empty: by the captions file's extension (.json is COCO).",
        )
        system = serializers.CharField(max_length=64, required=False, default="", allow_blank=True)
        purpose = serializers.ChoiceField(
            choices=caption_purpose_choices(), required=False, default=Caption.Purpose.STUDY
        )

        class Meta:
            ref_name = "Import"  # the schema's ImportRequest (requests are split)
            required_any = ("images_zip", "image_files", "captions")  # api_schema.py

        def validate(self, attrs):
            if not any(attrs.get(name) for name in self.Meta.required_any):
                raise serializers.ValidationError(
                    {"captions": ["Send images (images_zip or image_files) or a captions file."]}
                )
            return attrs

    @extend_schema(
        request={"multipart/form-data": InputSerializer}, responses={202: JobOutput, 409: CONFLICT}
    )
    def post(self, request, study_id: int):
        """Queue an import of images and captions into a draft study (the import page's job);
        poll the job: a bad file fails it with every bad line in ``result.errors``."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if study.status != Study.Status.DRAFT:
            raise Conflict("Images and captions can only be imported while the study is a draft.")
        return _accepted(
            request, enqueue(import_request(study=study, user=request.user, **data.validated_data))
        )


class StudyReferencesApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text="The references file.")
        format = serializers.ChoiceField(
            choices=["", *FORMATS],
            required=False,
            default="",
            help_text="csv (image,reference), coco (COCO captions JSON) or thumb (THumB "
            "JSON Lines); empty: told from the file.",
        )

        class Meta:
            ref_name = "ReferencesImport"  # the schema's ReferencesImportRequest

    @extend_schema(request={"multipart/form-data": InputSerializer}, responses={202: JobOutput})
    def post(self, request, study_id: int):
        """Queue an import of reference captions for the metric lab; poll the job: a bad file
        fails it with every bad line in ``result.errors`` and stores nothing."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        options = data.validated_data
        job = references_request(
            study=study, user=request.user, upload=options["file"], fmt=options["format"]
        )
        return _accepted(request, enqueue(job))


# Stated whole: drf-spectacular leaves out a list item's own validators (its pattern).
@extend_schema_field(
    {"type": "string", "pattern": NAME_PATTERN, "minLength": 1, "maxLength": NAME_MAX_CHARS}
)
class NameField(serializers.RegexField):
    """A user name or an e-mail address, as ``services/people.py`` reads them."""

    def __init__(self, **kwargs):
        kwargs.setdefault("error_messages", {"invalid": "Not a user name or e-mail address."})
        super().__init__(NAME_PATTERN, max_length=NAME_MAX_CHARS, **kwargs)


class PeopleSerializer(serializers.Serializer):
    annotators = serializers.ListField(
        child=NameField(),
        max_length=5000,
        help_text="User names or e-mail addresses of the registered annotators: a new one is "
        "invited (see ``invited``), one left out is removed or its invitation withdrawn.",
    )
    members = serializers.ListField(
        child=NameField(),
        max_length=500,
        required=False,
        help_text="User names or e-mail addresses of the researchers sharing the study, "
        "invited the same way (owner only; omit to keep them).",
    )

    class Meta:
        ref_name = "StudyPeople"


class InvitationOutput(serializers.Serializer):
    name = serializers.CharField(help_text="The user name or e-mail address as sent.")
    role = serializers.ChoiceField(choices=["annotator", "member"])
    invited_by = serializers.CharField(source="invited_by.username", allow_null=True)
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "StudyInvitation"


class PeopleOutput(serializers.Serializer):
    annotators = serializers.ListField(
        child=serializers.CharField(), help_text="User names of those who accepted."
    )
    members = serializers.ListField(
        child=serializers.CharField(), help_text="User names of those who accepted."
    )
    invited = InvitationOutput(
        many=True,
        help_text="Invitations not answered yet. An invitation reaches an account only if "
        "one fits the name; the answer is the same either way.",
    )

    class Meta:
        ref_name = "StudyPeopleAnswer"


class StudyPeopleApi(APIView):
    parser_classes = [JSONParser]

    @staticmethod
    def _people(study: Study) -> dict:
        return PeopleOutput(
            {
                "annotators": sorted(study.annotators.values_list("username", flat=True)),
                "members": sorted(study.members.values_list("username", flat=True)),
                "invited": selectors.study_pending_invitations(study),
            }
        ).data

    @extend_schema(responses=PeopleOutput)
    def get(self, request, study_id: int):
        """Who annotates the study and who shares it, by user name, and who is invited."""
        study = selectors.study_for_researcher(request.user, study_id)
        return Response(self._people(study))

    @extend_schema(request=PeopleSerializer, responses=PeopleOutput)
    def put(self, request, study_id: int):
        """Set the annotators (and, for the owner, the members): new names are invited and
        join when they accept; a name that is not a user name or e-mail address refuses
        them all (400 naming the field) and changes nothing."""
        study = selectors.study_for_researcher(request.user, study_id)
        data = PeopleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        study_set_people(
            study=study,
            changed_by=request.user,
            annotators=data.validated_data["annotators"],
            members=data.validated_data.get("members"),
        )
        return Response(self._people(study))
