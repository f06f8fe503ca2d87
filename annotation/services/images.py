"""The full-resolution rendition an item page's zoom shows (issue 46, row 11).

Annotators of detailed captions check small details, and the display rendition is at most
``CAPEVAL_DISPLAY_MAX_SIDE`` pixels on its longest side. The original cannot be shown
instead: it may carry the camera's EXIF (GPS included) and is only for the study's
researchers (``selectors.media_file_kind``). So the zoom gets a rendition of the original
at its own resolution, made like the display rendition (EXIF orientation applied, pixels
only: no EXIF, XMP or ICC profile) and stored beside it as
``display/ab/<sha256>-full.webp``: named by content hash, so it never gets other bytes.

It is made on first request, not at import: the zoom is opened for some images only, and
studies imported before it existed get it too. Two requests at once may both make it;
both write the same bytes under the same name through the media storage
(``annotation/storage.py``), whose writes are whole (a local rename, an object store's
PUT), so a reader never sees half a file.
"""

from __future__ import annotations

import io

from django.conf import settings
from PIL import Image as PILImage
from PIL import ImageOps

from annotation import storage
from annotation.models import Image

#: WebP's largest side; an original beyond it (up to ``CAPEVAL_MAX_IMAGE_PIXELS``, e.g.
#: 20,000 x 2,000) is scaled down to it, the most a WebP file can hold.
WEBP_MAX_SIDE = 16383


def full_rendition_path(image: Image) -> str:
    """The storage name of the image's full-resolution rendition (made or to be made)."""
    return f"display/{image.sha256[:2]}/{image.sha256}-full.webp"


def image_full_rendition(*, image: Image) -> str:
    """The storage name of ``image`` at its original resolution, without metadata.

    The display rendition when it already is that size (a small original) or when the
    original file is not there (an image row made without one); otherwise the full
    rendition, made now if it does not exist yet.
    """
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    if max(image.width, image.height) <= side or not image.file:
        return image.display
    if not storage.exists(image.file):
        return image.display
    relative = full_rendition_path(image)
    if storage.exists(relative):
        return relative
    with PILImage.open(io.BytesIO(storage.read_bytes(image.file))) as opened:
        picture = ImageOps.exif_transpose(opened)
        if picture.mode not in ("RGB", "RGBA", "L", "LA"):
            has_alpha = "transparency" in picture.info or "A" in picture.mode
            picture = picture.convert("RGBA" if has_alpha else "RGB")
        if max(picture.size) > WEBP_MAX_SIDE:
            picture.thumbnail((WEBP_MAX_SIDE, WEBP_MAX_SIDE), PILImage.Resampling.LANCZOS)
        buffer = io.BytesIO()
        # Pixels only, as for the display rendition (services/imports/images.py): say "none"
        # outright so nothing of the original's metadata is carried over.
        picture.save(buffer, "WEBP", quality=90, method=4, exif=b"", xmp=b"", icc_profile=None)
    return storage.write_bytes(relative, buffer.getvalue())
