"""Real image files behind a study's image rows, for the zoom tests (issue 46, row 11).

The mode factories make image rows with made-up paths; ``real_files`` writes, for each
image of a study, an original JPEG larger than the display side with camera EXIF (a
make and a GPS position) and a display rendition like the importer's (longest side
``CAPEVAL_DISPLAY_MAX_SIDE``), at the paths the importer would use, and sets the row's size
to the original's. The files go through the media storage (``annotation/storage.py``).
"""

from __future__ import annotations

import io

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image as PILImage

from annotation import storage
from annotation.models import Image, Job, Study

#: The camera's make written into every original's EXIF: it must never reach a participant.
CAMERA = "SecretCam 9000"


def original_exif() -> PILImage.Exif:
    exif = PILImage.Exif()
    exif[0x010F] = CAMERA  # Make
    # GPSInfo: latitude 48° 51' 29" N.
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 29.0)})
    return exif


def real_files(study: Study, *, width: int = 1600, height: int = 1200) -> list[Image]:
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    images = list(Image.objects.filter(study=study))
    for n, image in enumerate(images):
        sha = image.sha256
        image.file = f"images/{sha[:2]}/{sha}.jpg"
        image.display = f"display/{sha[:2]}/{sha}-{side}.webp"
        image.width, image.height = width, height
        # A gradient with a grid, so a zoomed image has something to look at.
        picture = PILImage.linear_gradient("L").resize((width, height)).convert("RGB")
        for x in range(0, width, 100):
            picture.paste((200, 40 + 10 * n % 200, 40), (x, 0, x + 2, height))
        # Through the media storage, as an import writes them (a folder or an object store).
        original = io.BytesIO()
        picture.save(original, "JPEG", quality=85, exif=original_exif())
        storage.write_bytes(image.file, original.getvalue())
        shown = picture.copy()
        shown.thumbnail((side, side))
        display = io.BytesIO()
        shown.save(display, "WEBP", quality=80)
        storage.write_bytes(image.display, display.getvalue())
        image.save(update_fields=["file", "display", "width", "height"])
    return images


def import_photo(client, user, study, photo: bytes, django_capture_on_commit_callbacks) -> Image:
    """Import ``photo`` as ``street.jpg`` with two captions through the import page, as
    ``user``, the job run on commit; return its image row."""
    client.force_login(user)
    captions = "image,system,caption\nstreet.jpg,Human,A quiet street.\nstreet.jpg,Bot,A road.\n"
    data = {
        "image_files": [SimpleUploadedFile("street.jpg", photo, "image/jpeg")],
        "captions": SimpleUploadedFile("captions.csv", captions.encode(), "text/csv"),
        "purpose": "study",
    }
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.DONE, job.result
    return Image.objects.get(study=study)
