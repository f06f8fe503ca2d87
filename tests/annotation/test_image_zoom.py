"""The zoom's full-resolution image (issue 46, row 11) keeps the media rules of issue 12.

An item page's zoom asks ``/s/<study>/image/<id>/`` for the image at its original
resolution. The original file cannot be it (camera EXIF with a GPS position; researchers
only): the answer is a redirect to a rendition as large as the original with none of its
metadata. Only the study's own people get it: a stranger, a crowd worker or an annotator of
another study and a researcher of another study get a 404 and make no file; an image of
another study is not reachable through this study's address.
"""

import io
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from PIL import Image as PILImage

from annotation.models import Image
from annotation.services.images import full_rendition_path
from annotation.services.participants import crowd_link_token
from tests.factories.images import CAMERA, real_files
from tests.factories.spans import spans_study

pytestmark = pytest.mark.django_db


def zoom_url(study, image) -> str:
    return f"/s/{study.public_id}/image/{image.pk}/"


def crowd_client(study, pid) -> Client:
    client = Client()
    assert client.get(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={pid}").status_code == 302
    return client


@pytest.fixture
def studies(researcher, other_researcher):
    ours = spans_study(researcher, systems=("alpha",), images=2)
    theirs = spans_study(other_researcher, systems=("alpha",), images=1)
    real_files(ours, width=1600, height=1200)
    real_files(theirs, width=1600, height=1200)
    return ours, theirs


def test_a_participant_gets_the_full_size_without_any_metadata(studies):
    study, _ = studies
    image = Image.objects.filter(study=study).first()
    client = crowd_client(study, "ZOOM-1")
    answer = client.get(zoom_url(study, image))
    assert answer.status_code == 302
    assert answer["Location"] == settings.MEDIA_URL + full_rendition_path(image)
    assert "/images/" not in answer["Location"]
    shown = client.get(answer["Location"])
    assert shown.status_code == 200
    data = b"".join(shown.streaming_content)
    picture = PILImage.open(io.BytesIO(data))
    assert picture.size == (1600, 1200)
    assert not picture.getexif() and not {"exif", "xmp", "icc_profile"} & set(picture.info)
    assert CAMERA.encode() not in data
    # The original's own bytes do hold them (the test would prove nothing otherwise).
    assert CAMERA.encode() in (Path(settings.MEDIA_ROOT) / image.file).read_bytes()
    # A second request reuses the file.
    assert client.get(zoom_url(study, image))["Location"] == answer["Location"]


def test_the_studys_researcher_gets_it_for_the_preview(studies, researcher):
    study, _ = studies
    image = Image.objects.filter(study=study).first()
    client = Client()
    client.force_login(researcher)
    assert client.get(zoom_url(study, image)).status_code == 302


def test_anyone_else_gets_a_404_and_no_file(studies, other_researcher, make_user):
    study, theirs = studies
    image = Image.objects.filter(study=study).first()
    stranger = Client()
    foreign_worker = crowd_client(theirs, "ZOOM-THEIRS")
    foreign_annotator = Client()
    annotator = make_user("elsewhere")
    theirs.annotators.add(annotator)
    foreign_annotator.force_login(annotator)
    foreign_researcher = Client()
    foreign_researcher.force_login(other_researcher)
    for client in (stranger, foreign_worker, foreign_annotator, foreign_researcher):
        assert client.get(zoom_url(study, image)).status_code == 404
    assert not (Path(settings.MEDIA_ROOT) / full_rendition_path(image)).exists()
    # An image of another study, through this study's address, by this study's worker.
    other_image = Image.objects.get(study=theirs)
    ours = crowd_client(study, "ZOOM-OURS")
    assert ours.get(zoom_url(study, other_image)).status_code == 404
    assert ours.get(f"/s/{study.public_id}/image/999999/").status_code == 404
    assert not (Path(settings.MEDIA_ROOT) / full_rendition_path(other_image)).exists()


def test_a_small_image_is_its_display_rendition(researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    (image,) = real_files(study, width=800, height=600)
    answer = crowd_client(study, "ZOOM-SMALL").get(zoom_url(study, image))
    assert answer.status_code == 302
    assert answer["Location"] == settings.MEDIA_URL + image.display
