"""The dataset folder's images are the imported files, byte for byte (issue 46, row 18).

A new user exported a study as a dataset folder and found a 53 KB photograph shrunk to
38 KB: the folder held the display rendition (WebP, at most 1024 px) under the original's
name. Here images go in through the import page and the folder comes out through the export
button and the download link; each file's SHA-256 is compared with the file uploaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image as PILImage

from annotation.models import Job

pytestmark = pytest.mark.django_db


def photo(fmt: str, size: tuple[int, int], seed: int) -> bytes:
    """A noisy picture (so no encoder reproduces it exactly), larger than the rendition."""
    image = PILImage.effect_noise(size, 60 + seed).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, fmt, **({"quality": 97} if fmt == "JPEG" else {}))
    return buffer.getvalue()


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR


def test_the_dataset_folder_holds_the_imported_files_byte_for_byte(
    client, researcher, make_study, var_dir, django_capture_on_commit_callbacks
):
    files = {
        "harbour.jpg": photo("JPEG", (1400, 900), 1),
        "sign.png": photo("PNG", (300, 200), 2),
    }
    study = make_study("arena")
    client.force_login(researcher)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    rows = "image,system,caption\n" + "".join(
        f"{name},{system},{system} describes {name}\n"
        for name in files
        for system in ("alpha", "beta")
    )
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("study_import", args=[study.pk]),
            {
                "images_zip": SimpleUploadedFile("photos.zip", buffer.getvalue()),
                "captions": SimpleUploadedFile("captions.csv", rows.encode(), "text/csv"),
                "purpose": "study",
            },
        )
    assert Job.objects.get(study=study, kind=Job.Kind.IMPORT).status == Job.Status.DONE

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_export", args=[study.pk]), {"format": "dataset", "images": "on"})
    job = Job.objects.get(study=study, kind=Job.Kind.EXPORT)
    assert job.status == Job.Status.DONE, job.error
    download = client.get(reverse("job_download", args=[job.pk]))
    assert download.status_code == 200
    body = b"".join(download.streaming_content) if download.streaming else download.content

    with zipfile.ZipFile(io.BytesIO(body)) as folder:
        exported = {
            name.removeprefix("images/"): folder.read(name)
            for name in folder.namelist()
            if name.startswith("images/")
        }
        datasheet = json.loads(folder.read("datasheet.json"))
    assert set(exported) == set(files)
    for name, content in files.items():
        assert hashlib.sha256(exported[name]).hexdigest() == hashlib.sha256(content).hexdigest(), (
            f"{name}: {len(content):,} bytes imported, {len(exported[name]):,} exported"
        )
    note = datasheet["images_folder"]["note"]
    assert "byte for byte" in note and "metadata" in note
