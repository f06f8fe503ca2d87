"""Media files: display renditions for everyone, originals for the study's researchers; and
the full-resolution rendition an item page's zoom asks for (``participant_image``).

``selectors.media_file_kind`` decides who may read what (anything else is a 404, the same
whether or not the file exists). Then, on the local storage (``annotation/storage.py``),
Django's ``static.serve`` sends the file with its content type, ``Last-Modified`` and
``If-Modified-Since`` answers; on an object store the answer is a redirect to a presigned
link that expires after ``CAPEVAL_DOWNLOAD_SECONDS`` (an original's says "attachment"),
so no web node holds the file and a link copied elsewhere stops working. A deployment
that puts the files behind its web server must keep these rules: only ``display/`` may be
served directly.
"""

from pathlib import PurePosixPath

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_safe
from django.views.static import serve

from annotation import selectors, storage
from annotation.errors import StorageUnavailable
from annotation.models import Image, Participant, Study
from annotation.modes import get_mode
from annotation.services.images import image_full_rendition
from annotation.views.errors import error_page
from annotation.views.participate import current_participant

#: Display renditions are named by the content hash of their original and the side they
#: were made for, so a name never gets other bytes: browsers and proxies may keep them.
DISPLAY_CACHE = "public, max-age=31536000, immutable"
#: An original may hold the photographer's position: no shared cache, no copy on disk.
ORIGINAL_CACHE = "private, no-store"


@require_safe
def media_file(request: HttpRequest, path: str) -> HttpResponse:
    kind = selectors.media_file_kind(request.user, path)
    folder = storage.local_path("")
    if folder is None:
        try:
            if not storage.exists(path):
                raise Http404("No such file.")
        except StorageUnavailable as exc:  # the object store is down: say so, not a 500
            return error_page(request, exc, "File not available")
        link = storage.download_url(path, attachment=kind == "original")
        response = HttpResponseRedirect(link)
        # The link is this request's, after its access check: never shared or kept.
        response["Cache-Control"] = ORIGINAL_CACHE
        return response
    response = serve(request, path, document_root=folder)
    if kind == "original":
        response["Cache-Control"] = ORIGINAL_CACHE
        # A download, never rendered inline under the site's origin.
        response["Content-Disposition"] = content_disposition_header(
            as_attachment=True, filename=PurePosixPath(path).name
        )
    else:
        response["Cache-Control"] = DISPLAY_CACHE
    return response


@require_safe
def participant_image(request: HttpRequest, public_id, image_id: int) -> HttpResponse:
    """Redirect to an image of the study at its original resolution (pixels only), for the
    zoom of the item pages: to the study's participants and, for its preview, its
    researchers; anyone else, or an image of another study, gets a 404.

    The rendition is made on the first request (``services/images.py``); only the study's
    own people can make one, and once made it is a display rendition like the others.
    """
    study = Study.objects.filter(public_id=public_id).first()
    if study is None:
        raise Http404("No such study.")
    researcher = selectors.studies_for_researcher(request.user).filter(pk=study.pk).exists()
    participant = None if researcher else current_participant(request, study)
    if not researcher and participant is None:
        raise Http404("No such study.")
    # A mode that asks vision shows images to sighted raters only (issue 43): a rater who
    # declared blind or low vision, or has not declared, is never served an image.
    if participant is not None and not shows_images(study, participant):
        raise Http404("No such image.")
    image = Image.objects.filter(pk=image_id, study=study).first()
    if image is None or not image.display:
        raise Http404("No such image.")
    return HttpResponseRedirect(storage.display_url(image_full_rendition(image=image)))


def shows_images(study: Study, participant: Participant) -> bool:
    """Whether the study's pages may show this participant an image: always, unless its
    mode ``asks_vision`` and the participant did not declare sighted."""
    return not get_mode(study.mode).asks_vision or participant.vision_group == "sighted"
