"""``/api/``: a browsable index of the API's named endpoints (issue 26, row 21).

Built from ``annotation/api_urls.py`` itself, so an endpoint added there is listed without
touching this file. Public like the OpenAPI schema: it names paths, never data.
"""

import re

from django.urls import URLResolver, get_resolver
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer, TemplateHTMLRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

# "<int:study_id>" in a route becomes "{study_id}", the OpenAPI schema's spelling.
API_URLCONF = "annotation.api_urls"
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


class ApiRootApi(APIView):
    """The API's endpoints: a link for each one without parameters, a path template otherwise."""

    permission_classes = [AllowAny]
    # Our own page rather than DRF's browsable API template, which fails axe (an unnamed
    # button, low contrast, no lang): JSON for clients, the site's layout for browsers.
    renderer_classes = [JSONRenderer, TemplateHTMLRenderer]
    template_name = "api/index.html"
    schema = None  # an index of the schema's own paths, not an endpoint of it

    def get(self, request):
        endpoints = []
        for pattern in _api_patterns():
            if not pattern.name or pattern.name == "api_root":
                continue
            path = "/api/" + _CONVERTER.sub(r"{\1}", str(pattern.pattern))
            has_parameters = "{" in path
            endpoints.append(
                {
                    "name": pattern.name,
                    "path": path,
                    "url": None if has_parameters else request.build_absolute_uri(path),
                }
            )
        return Response(
            {
                "schema": request.build_absolute_uri("/api/schema/"),
                "docs": request.build_absolute_uri("/api/docs/"),
                "endpoints": endpoints,
            }
        )


def _api_patterns() -> list:
    """The routes of ``annotation.api_urls``, read from the URL resolver.

    Importing api_urls here would point the import layers the wrong way (it imports this
    view), so the routes come from the project's resolver, which has loaded it.
    """
    for entry in get_resolver().url_patterns:
        module = getattr(entry, "urlconf_module", None)
        if isinstance(entry, URLResolver) and getattr(module, "__name__", "") == API_URLCONF:
            return entry.url_patterns
    return []
