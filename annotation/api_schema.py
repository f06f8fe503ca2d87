"""The OpenAPI schema's refusals: every operation documents the errors it can answer.

A client generated from the schema (issue 45) learns what a refusal looks like from the
schema, and Schemathesis fails any answer the schema does not document. The API's refusals
have one shape, ``apis.exception_handler``'s: ``{field: [message], ..., "code": kind}`` for
refused input, ``{"detail": message, "code": kind}`` otherwise (DRF's own refusals carry no
``code``). Which operations can answer which status follows from what they take, so this
schema class adds them all in one place rather than in every view:

- 400 where there is input to refuse: a request body or a query parameter;
- 401 and 403 where a login is required (missing, wrong or locked-out credentials; not a
  researcher, or not allowed to do this with the study);
- 404 where the path names something (a study, a job) that may not exist or not be yours.

A refusal that depends on the thing's state (409, a closed study) is declared by the view
itself (``extend_schema(responses={409: CONFLICT})``), since only it knows.

An input serializer whose fields are each optional but not all at once (an import needs
images or captions) names them in ``Meta.required_any``; its ``validate`` checks the same
tuple and the schema says ``anyOf`` them is required, so the two cannot disagree.
"""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from annotation.text import TextValidator, text_pattern

ERROR_COMPONENT = "Error"

#: The refusal body (see the module docstring); extra keys are the refused fields.
ERROR_SCHEMA = {
    "type": "object",
    "description": "A refusal: `detail` (a message) or the refused fields, each with its "
    "messages; `code` is the kind (invalid, forbidden, not_found, conflict, locked_out...).",
    "properties": {
        "detail": {"type": "string", "description": "What was refused, when no field is."},
        "code": {"type": "string", "description": "The kind of refusal, for programs."},
    },
    "additionalProperties": {
        "description": "A refused field: its messages (nested input: an object of them)."
    },
}

REFUSALS = {
    "400": "Refused input: each refused field with its messages, or `detail`.",
    "401": "No credentials, wrong ones, or too many failed logins (then `code` is "
    "`locked_out` and `Retry-After` says when to try again).",
    "403": "Logged in but not allowed: not a researcher, or not with this study.",
    "404": "No such thing, or one you may not see.",
    "409": "Refused in the thing's present state (e.g. a closed study): `detail` says why.",
}

#: A view's ``extend_schema(responses={..., 409: CONFLICT})``; this class adds the body.
CONFLICT = OpenApiResponse(description=REFUSALS["409"])


class ApiSchema(AutoSchema):
    """drf-spectacular's schema of an operation, plus the refusals it can answer."""

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        registry.register_on_missing(
            ResolvedComponent(
                name=ERROR_COMPONENT,
                type=ResolvedComponent.SCHEMA,
                object=ERROR_COMPONENT,
                schema=ERROR_SCHEMA,
            )
        )
        statuses = []
        parameters = operation.get("parameters", [])
        if operation.get("requestBody") or any(p["in"] == "query" for p in parameters):
            statuses.append("400")
        security = operation.get("security", [])
        if security and {} not in security:  # a login is required
            statuses += ["401", "403"]
        if any(p["in"] == "path" for p in parameters):
            statuses.append("404")
        responses = operation["responses"]
        for status in statuses:
            responses.setdefault(status, {"description": ""})
        error = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
        for status, response in responses.items():
            if status in REFUSALS and not response.get("content"):
                response["description"] = response.get("description") or REFUSALS[status]
                response["content"] = {"application/json": {"schema": error}}
        return operation

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if _required_any(serializer) and direction == "request":
            schema["anyOf"] = [{"required": [name]} for name in _required_any(serializer)]
        return schema

    def _get_request_for_media_type(self, serializer, direction="request"):
        schema, required = super()._get_request_for_media_type(serializer, direction)
        # No field is required alone, but an empty body is refused: the body is required.
        return schema, required or bool(_required_any(serializer))

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction != "request" or not isinstance(schema, dict):
            return schema
        # What the field refuses, said in the schema: text with a forbidden character
        # (TextValidator), white space alone (DRF trims, then refuses a blank), an empty file.
        if isinstance(field, serializers.CharField) and schema.get("type") == "string":
            nonblank = not field.allow_blank and field.trim_whitespace
            text = next((v for v in field.validators if isinstance(v, TextValidator)), None)
            if text is not None:
                pattern = text_pattern(multiline=text.multiline, nonblank=nonblank)
                schema.setdefault("pattern", pattern)
            elif nonblank:
                schema.setdefault("pattern", r"\S")
        if isinstance(field, serializers.FileField) and not field.allow_empty_file:
            schema.setdefault("minLength", 1)
        return schema


def _required_any(serializer) -> tuple[str, ...]:
    return tuple(getattr(getattr(serializer, "Meta", None), "required_any", ()))
