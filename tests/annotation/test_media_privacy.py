"""Media privacy (issue 12): originals are private, display renditions carry no metadata.

A photo with its GPS position in EXIF, an XMP packet, an ICC profile and a JPEG comment is
imported through the import page. Then, through the real ``/media/`` route:

- the original (``images/ab/<sha>.jpg``, reached by editing a display URL as the issue
  describes) answers 404 to an anonymous visitor, a crowd worker and an annotator of the
  study and a researcher of another study, exactly as a missing file does; the study's
  owner, a researcher member and staff get the bytes as a private download;
- the display rendition reaches a crowd worker from the item page, has none of the
  metadata, and may be cached for good;
- nothing else under MEDIA_ROOT is served (an exports folder, the import staging folder, a
  stray file, folders), and no path (``..``, encoded, doubled slashes) leaves the display
  folder or MEDIA_ROOT.
"""

import io
import re
import struct
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from PIL import ExifTags, ImageCms
from PIL import Image as PILImage

from annotation.models import Image
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_open
from tests.factories.images import import_photo as import_through_page

pytestmark = pytest.mark.django_db

XMP = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
    b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
    b'xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="48,51.4N"/>'
    b"</rdf:RDF></x:xmpmeta>"
)
MAKE = "PhoneCo-Model-7"
COMMENT = b"taken at home"


def photo_with_location() -> bytes:
    """A JPEG as a phone writes it: EXIF with a GPS IFD, XMP, an ICC profile, a comment."""
    exif = PILImage.Exif()
    exif[ExifTags.Base.Make] = MAKE
    gps = exif.get_ifd(ExifTags.IFD.GPSInfo)
    gps[ExifTags.GPS.GPSLatitudeRef] = "N"
    gps[ExifTags.GPS.GPSLatitude] = (48.0, 51.0, 24.0)
    gps[ExifTags.GPS.GPSLongitudeRef] = "E"
    gps[ExifTags.GPS.GPSLongitude] = (2.0, 21.0, 3.0)
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    buffer = io.BytesIO()
    PILImage.new("RGB", (64, 48), (30, 120, 200)).save(
        buffer, "JPEG", exif=exif, xmp=XMP, icc_profile=icc, comment=COMMENT
    )
    return buffer.getvalue()


def webp_chunks(data: bytes) -> list[bytes]:
    """The FourCCs of a WebP file's RIFF chunks (EXIF, XMP and ICCP hold metadata)."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    chunks, offset = [], 12
    while offset + 8 <= len(data):
        fourcc, size = struct.unpack_from("<4sI", data, offset)
        chunks.append(fourcc)
        offset += 8 + size + (size & 1)
    return chunks


def media_url(relative: str) -> str:
    return "/" + settings.MEDIA_URL.strip("/") + "/" + relative


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def page_text(response) -> bytes:
    """A page without its CSRF tokens, which are masked anew on every response."""
    return re.sub(rb"[A-Za-z0-9]{64}", b"", body(response))


def enter_as_crowd_worker(study, pid="PID-1") -> Client:
    client = Client()
    client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": f"se-{pid}"},
    )
    return client


def import_photo(client, user, study, photo: bytes, django_capture_on_commit_callbacks) -> Image:
    """Import ``photo`` through the import page as ``user``, who is then logged out."""
    image = import_through_page(client, user, study, photo, django_capture_on_commit_callbacks)
    client.logout()
    return image


@pytest.fixture(autouse=True)
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"


@pytest.fixture
def photo() -> bytes:
    return photo_with_location()


@pytest.fixture
def study(make_study):
    return make_study("thumb")


@pytest.fixture
def image(client, researcher, study, photo, django_capture_on_commit_callbacks) -> Image:
    """The photo imported into ``study`` (owned by ``researcher``), which is then opened."""
    image = import_photo(client, researcher, study, photo, django_capture_on_commit_callbacks)
    study_open(study=study)
    return image


# ----------------------------------------------------------------------------------------
# The rendition
# ----------------------------------------------------------------------------------------


def test_the_imported_rendition_keeps_no_exif_xmp_icc_or_comment(image, photo):
    media = Path(settings.MEDIA_ROOT)
    original = PILImage.open(media / image.file)
    # The stored original is the upload itself, metadata and all (so the test means something).
    assert (media / image.file).read_bytes() == photo
    assert original.getexif().get_ifd(ExifTags.IFD.GPSInfo)
    assert {"exif", "xmp", "icc_profile"} <= set(original.info)

    data = (media / image.display).read_bytes()
    rendition = PILImage.open(io.BytesIO(data))
    assert rendition.format == "WEBP" and rendition.size == (64, 48)
    assert not set(rendition.info) & {"exif", "xmp", "icc_profile", "comment"}
    assert dict(rendition.getexif()) == {}
    assert not set(webp_chunks(data)) & {b"EXIF", b"XMP ", b"ICCP"}, webp_chunks(data)
    for trace in (MAKE.encode(), COMMENT, b"xmpmeta", b"GPS"):
        assert trace not in data


# ----------------------------------------------------------------------------------------
# Originals
# ----------------------------------------------------------------------------------------


@pytest.fixture
def stranger(request, study, image, annotator, other_researcher, make_study) -> Client:
    """A client of each role that must not read the original; each has seen the item page
    (and so a display URL) where its role allows."""
    role = request.param
    if role == "anonymous":
        return Client()
    if role == "crowd worker":
        client = enter_as_crowd_worker(study)
    elif role == "annotator":
        study.annotators.add(annotator)
        client = Client()
        client.force_login(annotator)
    else:  # a researcher of another study
        make_study("thumb", owner=other_researcher, name="Another study")
        client = Client()
        client.force_login(other_researcher)
        return client
    page = client.get(reverse("participate_next", args=[study.public_id]))
    assert media_url(image.display) in page.content.decode()
    return client


@pytest.mark.parametrize(
    "stranger", ["anonymous", "crowd worker", "annotator", "other researcher"], indirect=True
)
def test_the_original_is_a_404_to_anyone_but_the_studys_researchers(stranger, image, photo):
    # The attack of the issue: edit the display URL into the original's.
    url = media_url(image.display).replace(image.display, image.file)
    missing = media_url(image.file.replace(image.sha256, "0" * 64))
    for method in (stranger.get, stranger.head):
        response = method(url)
        assert response.status_code == 404
        assert "Content-Disposition" not in response
        assert photo not in body(response)
        # An existing original answers exactly like one that does not exist.
        absent = method(missing)
        assert absent.status_code == 404
        assert page_text(absent) == page_text(response)


@pytest.mark.parametrize("who", ["owner", "member", "staff"])
def test_the_studys_researchers_download_the_original_privately(
    who, image, study, researcher, make_user, photo
):
    user = {
        "owner": researcher,
        "member": make_user("mia", researcher=True),
        "staff": make_user("sam", staff=True),
    }[who]
    if who == "member":
        study.members.add(user)
    client = Client()
    client.force_login(user)
    response = client.get(media_url(image.file))
    assert response.status_code == 200
    assert body(response) == photo
    assert response["Content-Type"] == "image/jpeg"
    assert response["Content-Disposition"] == f'attachment; filename="{image.sha256}.jpg"'
    assert response["Cache-Control"] == "private, no-store"


def test_a_researcher_who_imported_the_same_photo_reads_the_shared_file(
    client, image, other_researcher, make_study, photo, django_capture_on_commit_callbacks
):
    """One file backs the images of both studies: each study's researchers may read it."""
    theirs = make_study("thumb", owner=other_researcher, name="Same photo")
    copy = import_photo(client, other_researcher, theirs, photo, django_capture_on_commit_callbacks)
    assert copy.file == image.file
    client.force_login(other_researcher)
    response = client.get(media_url(image.file))
    assert response.status_code == 200 and body(response) == photo


def test_a_researcher_removed_from_the_study_loses_the_original(client, image, study, make_user):
    member = make_user("mia", researcher=True)
    study.members.add(member)
    client.force_login(member)
    assert client.get(media_url(image.file)).status_code == 200
    study.members.remove(member)
    assert client.get(media_url(image.file)).status_code == 404


# ----------------------------------------------------------------------------------------
# Display renditions
# ----------------------------------------------------------------------------------------


def test_a_crowd_worker_loads_the_display_rendition_of_the_item_page(study, image):
    worker = enter_as_crowd_worker(study)
    page = worker.get(reverse("participate_next", args=[study.public_id]))
    sources = re.findall(r'<img src="([^"]+)"', page.content.decode())
    assert sources == [media_url(image.display)]

    response = worker.get(sources[0])
    assert response.status_code == 200
    assert body(response) == (Path(settings.MEDIA_ROOT) / image.display).read_bytes()
    assert response["Content-Type"] == "image/webp"
    assert not response.get("Content-Disposition", "").startswith("attachment")
    cache = {part.strip() for part in response["Cache-Control"].split(",")}
    assert {"public", "immutable"} <= cache and "max-age=31536000" in cache


# ----------------------------------------------------------------------------------------
# Nothing else
# ----------------------------------------------------------------------------------------


def test_nothing_else_under_media_root_is_served(image, make_user):
    """Not even to staff, who may read every study's originals."""
    media = Path(settings.MEDIA_ROOT)
    others = {
        "exports/judgments.csv": b"participant,rating\np1,5\n",
        f".staging/0123abcd/{image.file}": b"staged original",
        ".staging/0123abcd/notes.txt": b"staging",
        "notes.txt": b"a stray file",
        f"images/{image.sha256[:2]}/copy-{image.sha256}.jpg": b"an unreferenced original",
    }
    for relative, content in others.items():
        (media / relative).parent.mkdir(parents=True, exist_ok=True)
        (media / relative).write_bytes(content)
    client = Client()
    client.force_login(make_user("sam", staff=True))
    for relative in [*others, "exports", "images", f"images/{image.sha256[:2]}", "display"]:
        assert client.get(media_url(relative)).status_code == 404, relative
    assert client.get(media_url(image.file)).status_code == 200


def test_no_path_leaves_the_display_folder_or_media_root(image, tmp_path, photo):
    """Traversal attempts answer 404, the same as any other file nobody may read."""
    (tmp_path / "secret.txt").write_bytes(b"outside MEDIA_ROOT")
    name = Path(image.file).name
    prefix = media_url("")
    attempts = [
        f"{prefix}../secret.txt",
        f"{prefix}%2e%2e/secret.txt",
        f"{prefix}display/../../secret.txt",
        f"{prefix}display/../{image.file}",
        f"{prefix}display/%2e%2e/{image.file}",
        f"{prefix}display/..%2f{image.file}",
        f"{prefix}display/{image.sha256[:2]}/../../{image.file}",
        f"{prefix}display/./../{image.file}",
        f"{prefix}display//{image.file}",
        f"{prefix}/{image.file}",
        f"{prefix}display\\..\\{image.file}",
        f"{prefix}display/{image.sha256[:2]}/{name}%00.webp",
    ]
    client = Client()
    for url in attempts:
        response = client.get(url)
        assert response.status_code == 404, url
        assert photo not in body(response) and b"outside MEDIA_ROOT" not in body(response)
