"""Files under MEDIA_ROOT: display renditions for everyone, originals for the study's researchers.

``selectors.media_file_kind`` decides who may read what (anything else is a 404, the same
whether or not the file exists); Django's ``static.serve`` then sends the file with its
content type, ``Last-Modified`` and ``If-Modified-Since`` answers. A deployment that puts the
files behind its web server must keep these rules: only ``display/`` may be served directly.
"""

from pathlib import PurePosixPath

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_safe
from django.views.static import serve

from annotation import selectors

#: Display renditions are named by the content hash of their original and the side they
#: were made for, so a name never gets other bytes: browsers and proxies may keep them.
DISPLAY_CACHE = "public, max-age=31536000, immutable"
#: An original may hold the photographer's position: no shared cache, no copy on disk.
ORIGINAL_CACHE = "private, no-store"


@require_safe
def media_file(request: HttpRequest, path: str) -> HttpResponse:
    kind = selectors.media_file_kind(request.user, path)
    # MEDIA_ROOT is read per request (tests point it elsewhere).
    response = serve(request, path, document_root=settings.MEDIA_ROOT)
    if kind == "original":
        response["Cache-Control"] = ORIGINAL_CACHE
        # A download, never rendered inline under the site's origin.
        response["Content-Disposition"] = content_disposition_header(
            as_attachment=True, filename=PurePosixPath(path).name
        )
    else:
        response["Cache-Control"] = DISPLAY_CACHE
    return response
