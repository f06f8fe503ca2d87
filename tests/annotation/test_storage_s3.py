"""Media on an S3-compatible object store (issue 41): nothing on the web node's disk.

With ``STORAGES`` pointing the media at a real S3 server on the loopback (s3rver,
``tests/factories/object_store.py``) and the production backend (django-storages'
``S3Storage``), through the real pages:

- an import writes the original and its display rendition to the bucket and nothing under
  ``MEDIA_ROOT``;
- ``/media/`` answers the same access check as on the local folder, then redirects to a
  presigned link of the store: the original's bytes as an attachment for the study's
  researcher, the rendition for anyone, a 404 with no link for a stranger;
- the link expires: the store refuses it after ``CAPEVAL_DOWNLOAD_SECONDS``;
- the zoom's full-size rendition is made from the stored original and stored beside it;
- a judge run and CLIP-S read the images from the store;
- an upload waits in the store for its job, and is gone after it;
- an export is written to the store (the dataset's images read from it), downloaded
  through the page and the API by a presigned link, and deleted from it when old.
"""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from PIL import Image as PILImage

from annotation.models import Caption, Job
from annotation.services.exports import export_delete_old
from annotation.services.images import full_rendition_path
from annotation.services.judge_runs import _images
from annotation.services.metrics_clip import StoredImages
from annotation.services.runner import job_run
from annotation.services.studies import study_open
from tests.factories.images import CAMERA, import_photo, original_exif
from tests.factories.object_store import object_store, s3_storages

pytestmark = pytest.mark.django_db


@pytest.fixture
def store(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CAPEVAL_EXPORT_DIR = str(tmp_path / "exports")
    with object_store(tmp_path / "s3") as running:
        settings.STORAGES = s3_storages(running)
        yield running


def photo(width=1600, height=1200) -> bytes:
    """A JPEG larger than the display side, with the camera's EXIF."""
    buffer = io.BytesIO()
    picture = PILImage.linear_gradient("L").resize((width, height)).convert("RGB")
    picture.save(buffer, "JPEG", quality=85, exif=original_exif())
    return buffer.getvalue()


def media_url(name: str) -> str:
    return "/" + settings.MEDIA_URL.strip("/") + "/" + name


def fetch(url: str) -> tuple[int, dict, bytes]:
    """GET a link of the store: (status, headers, body)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read()


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.fixture
def imported(store, client, researcher, make_study, django_capture_on_commit_callbacks):
    """A photo and two captions imported through the import page, the study opened."""
    study = make_study("thumb")
    original = photo()
    image = import_photo(client, researcher, study, original, django_capture_on_commit_callbacks)
    study_open(study=study)
    return study, image, original


def test_an_import_writes_to_the_store_and_nothing_to_the_node(store, imported):
    _study, image, original = imported
    assert {image.file, image.display} <= store.objects()
    assert files_under(Path(settings.MEDIA_ROOT)) == []
    stored = store.client().get_object(Bucket="capeval-media", Key=image.file)["Body"].read()
    assert stored == original


def test_the_researcher_gets_a_presigned_download_of_the_original(store, imported, client):
    _study, image, original = imported  # the fixture left the researcher logged in
    answer = client.get(media_url(image.file))
    assert answer.status_code == 302
    link = answer["Location"]
    assert link.startswith(store.endpoint + "/capeval-media/" + image.file)
    assert "X-Amz-Expires=300" in link
    assert answer["Cache-Control"] == "private, no-store"
    status, headers, data = fetch(link)
    assert status == 200 and data == original
    assert headers.get("Content-Disposition", "").startswith("attachment")


def test_the_rendition_reaches_anyone_and_the_original_no_stranger(
    store, imported, other_researcher
):
    _study, image, _original = imported
    anonymous = Client()
    answer = anonymous.get(media_url(image.display))
    assert answer.status_code == 302
    status, _headers, data = fetch(answer["Location"])
    assert status == 200
    shown = PILImage.open(io.BytesIO(data))
    assert shown.format == "WEBP" and max(shown.size) == settings.CAPEVAL_DISPLAY_MAX_SIDE
    stranger = Client()
    stranger.force_login(other_researcher)
    for who in (anonymous, stranger):
        refused = who.get(media_url(image.file))
        assert refused.status_code == 404
        assert "Location" not in refused


def test_a_link_expires(store, imported, client, settings):
    _study, image, original = imported
    settings.CAPEVAL_DOWNLOAD_SECONDS = 2
    link = client.get(media_url(image.file))["Location"]
    assert "X-Amz-Expires=2" in link
    time.sleep(3.5)  # past the link's life: the store, not the platform, refuses it now
    status, _headers, data = fetch(link)
    assert status == 403
    assert b"Request has expired" in data and original not in data


def test_the_zoom_rendition_is_made_from_the_store(store, imported, client):
    study, image, _original = imported
    answer = client.get(f"/s/{study.public_id}/image/{image.pk}/")
    assert answer.status_code == 302
    assert answer["Location"] == settings.MEDIA_URL + full_rendition_path(image)
    assert full_rendition_path(image) in store.objects()
    link = client.get("/" + answer["Location"].lstrip("/"))["Location"]
    status, _headers, data = fetch(link)
    assert status == 200
    picture = PILImage.open(io.BytesIO(data))
    assert picture.size == (1600, 1200)
    assert CAMERA.encode() not in data and not picture.getexif()


def test_a_judge_run_and_clip_read_the_images_from_the_store(store, imported):
    study, image, original = imported
    display = store.client().get_object(Bucket="capeval-media", Key=image.display)["Body"]
    caption = Caption.objects.filter(study=study).first()
    (data, kind) = _images(study, {caption.pk})[caption.pk]
    assert data == display.read() and kind == "image/webp"
    assert StoredImages([image.file])[0:1] == [original]


def test_uploads_wait_in_the_store_and_go_with_their_job(
    store, client, researcher, make_study, django_capture_on_commit_callbacks
):
    study = make_study("thumb")
    client.force_login(researcher)
    data = {
        "image_files": [SimpleUploadedFile("a.jpg", photo(64, 48), "image/jpeg")],
        "captions": SimpleUploadedFile("c.csv", b"image,system,caption\na.jpg,Human,A.\n"),
        "purpose": "study",
    }
    # Queued, not run: the uploads are in the store, under the job's folder.
    client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    staging = job.params["staging"]
    waiting = {name for name in store.objects() if name.startswith("uploads/")}
    assert waiting == {f"{staging}/images/a.jpg", f"{staging}/captions/c.csv"}
    assert files_under(Path(settings.VAR_DIR)) == []
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.result
    assert not any(name.startswith("uploads/") for name in store.objects())


def test_an_export_lives_in_the_store_and_is_downloaded_from_it(
    store, imported, client, django_capture_on_commit_callbacks
):
    study, _image, original = imported
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_export", args=[study.pk]), {"format": "dataset", "images": "on"})
        client.post(reverse("study_export", args=[study.pk]), {"format": "csv"})
    dataset, table = Job.objects.filter(study=study, kind=Job.Kind.EXPORT).order_by("pk")
    assert dataset.status == table.status == Job.Status.DONE
    sheet = table.result["datasheet"]
    assert {f"exports/{dataset.result_file}", f"exports/{table.result_file}"} <= store.objects()
    assert f"exports/{sheet}" in store.objects()
    assert files_under(Path(settings.CAPEVAL_EXPORT_DIR)) == []
    # The page's download: a presigned link to the zip, whose images came from the store.
    answer = client.get(reverse("job_download", args=[dataset.pk]))
    assert answer.status_code == 302 and answer["Cache-Control"] == "private, no-store"
    status, headers, data = fetch(answer["Location"])
    assert status == 200 and headers["Content-Disposition"].startswith("attachment")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.read("images/street.jpg") == original
    # The datasheet, and the API's download with the same check.
    link = client.get(reverse("job_datasheet", args=[table.pk]))["Location"]
    assert json.loads(fetch(link)[2])["study"]["id"] == study.pk
    api = client.get(reverse("api_job_file", args=[table.pk]))
    assert api.status_code == 302
    assert fetch(api["Location"])[2].startswith(b'"judgment_id"')
    # Old exports are deleted from the store; the page then offers nothing.
    later = table.finished_at + timedelta(days=30)
    assert export_delete_old(days=7, now=later) == 3
    assert not any(name.startswith("exports/") for name in store.objects())
    assert client.get(reverse("job_download", args=[dataset.pk])).status_code == 404
