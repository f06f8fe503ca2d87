"""The object store down (issue 41): nothing lost on the way out.

With ``STORAGES`` on an S3 server of the test's own (s3rver, ``tests/factories/
object_store.py``) that the test stops (its port then refuses connections, as a store that
went away) and starts again on the same folder and port, through the real pages and jobs:

- an upload on the import page answers a page saying the file store did not answer and to
  try again (503 with ``Retry-After``, no 500; the htmx form shows it in place): no job
  row, no staged upload once the store is back;
- an export whose file cannot be stored (the store down before the job, or gone between
  the datasheet and the data file) fails saying so and that it can be tried again, with an
  "Export again" button and no download; what it managed to store before the store went
  is deleted by the next export, which completes and downloads;
- a download of a finished export (the page's, the datasheet's, the API's) and a media
  file answer 503 with the reason while the store is down, and work again after.

The end state is checked by listing the store's objects.
"""

from __future__ import annotations

import io
import urllib.request

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image as PILImage

from annotation import storage
from annotation.models import Job
from annotation.services.studies import study_open
from tests.factories.images import import_photo
from tests.factories.object_store import s3_storages, stoppable_object_store

pytestmark = pytest.mark.django_db

SAYS = "The file store did not answer"


@pytest.fixture
def outage(settings, tmp_path):
    """(the running store, the handle that stops and restarts it)."""
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CAPEVAL_EXPORT_DIR = str(tmp_path / "exports")
    with stoppable_object_store(tmp_path / "s3") as (store, server):
        settings.STORAGES = s3_storages(store)
        yield store, server


@pytest.fixture
def study(outage, client, researcher, make_study, django_capture_on_commit_callbacks):
    """A study with a photo imported (the store up), opened; the researcher logged in."""
    made = make_study("thumb")
    buffer = io.BytesIO()
    PILImage.linear_gradient("L").convert("RGB").save(buffer, "JPEG")
    import_photo(client, researcher, made, buffer.getvalue(), django_capture_on_commit_callbacks)
    study_open(study=made)
    return made


def exports_of(store) -> set[str]:
    return {name for name in store.objects() if name.startswith("exports/")}


def export(client, study, capture) -> Job:
    """POST the study page's export form; the job runs on commit (eager Celery)."""
    with capture(execute=True):
        answer = client.post(reverse("study_export", args=[study.pk]), {"format": "csv"})
    assert answer.status_code == 302
    return Job.objects.filter(study=study, kind=Job.Kind.EXPORT).latest("pk")


def assert_clean_refusal(answer) -> None:
    text = answer.content.decode()
    assert answer.status_code == 503, text[:2000]
    assert SAYS in text and "again" in text
    assert answer["Retry-After"]
    assert "Traceback" not in text


def test_an_upload_while_the_store_is_down_is_refused_and_leaves_nothing(
    outage, client, researcher, make_study, django_capture_on_commit_callbacks
):
    _store, server = outage
    draft = make_study("thumb")
    client.force_login(researcher)
    data = {
        "image_files": [SimpleUploadedFile("a.jpg", b"\xff\xd8 not much", "image/jpeg")],
        "captions": SimpleUploadedFile("c.csv", b"image,system,caption\na.jpg,Human,A.\n"),
        "purpose": "study",
    }
    server.stop()
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(reverse("study_import", args=[draft.pk]), data)
    assert_clean_refusal(answer)
    # The page's htmx form (htmx swaps only 2xx answers): the reason in the form, in place.
    for upload in data["image_files"] + [data["captions"]]:
        upload.seek(0)
    answer = client.post(reverse("study_import", args=[draft.pk]), data, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and SAYS in answer.content.decode()
    assert not Job.objects.filter(study=draft).exists()
    store = server.start()
    assert not [name for name in store.objects() if name.startswith("uploads/")]


@pytest.mark.parametrize("when", ["before the job", "after the datasheet"])
def test_an_export_while_the_store_is_down_fails_cleanly_and_the_next_completes(
    outage, study, client, monkeypatch, django_capture_on_commit_callbacks, when
):
    store, server = outage
    if when == "before the job":
        server.stop()
    else:  # the store goes away once the datasheet is stored, before the data file is
        stored = storage.write_file

        def then_stop(*args, **kwargs):
            name = stored(*args, **kwargs)
            server.stop()
            return name

        monkeypatch.setattr(storage, "write_file", then_stop)
    failed = export(client, study, django_capture_on_commit_callbacks)
    monkeypatch.undo()
    assert failed.status == Job.Status.FAILED, failed.error
    assert failed.error.startswith(SAYS) and "Export again" in failed.error
    assert failed.result_file == ""
    page = client.get(reverse("job_status", args=[failed.pk])).content.decode()
    assert SAYS in page and "Export again" in page
    assert reverse("study_export", args=[study.pk]) in page  # the retry's form
    assert client.get(reverse("job_download", args=[failed.pk])).status_code == 404

    store = server.start()
    again = export(client, study, django_capture_on_commit_callbacks)
    assert again.status == Job.Status.DONE, again.error
    # Only the new export's files: what the failed one stored before the store went is gone.
    assert exports_of(store) == {
        f"exports/{again.result_file}",
        f"exports/{again.result['datasheet']}",
    }
    link = client.get(reverse("job_download", args=[again.pk]))["Location"]
    with urllib.request.urlopen(link, timeout=30) as downloaded:
        assert downloaded.read().startswith(b'"judgment_id"')


def test_downloads_while_the_store_is_down_answer_503_and_work_after(
    outage, study, client, django_capture_on_commit_callbacks
):
    _store, server = outage
    done = export(client, study, django_capture_on_commit_callbacks)
    assert done.status == Job.Status.DONE, done.error
    display = study.images.get().display
    server.stop()
    assert_clean_refusal(client.get(reverse("job_download", args=[done.pk])))
    assert_clean_refusal(client.get(reverse("job_datasheet", args=[done.pk])))
    assert_clean_refusal(client.get(f"/media/{display}"))
    api = client.get(reverse("api_job_file", args=[done.pk]))
    assert api.status_code == 503 and api.json()["code"] == "storage_unavailable"
    assert api.json()["detail"].startswith(SAYS)
    server.start()
    assert client.get(reverse("job_download", args=[done.pk])).status_code == 302
    assert client.get(f"/media/{display}").status_code == 302
