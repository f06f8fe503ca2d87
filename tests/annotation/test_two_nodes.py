"""Two web nodes and a worker that share no directory, one study (issue 41).

Two ``runserver`` processes and a Celery worker, each with its own ``MEDIA_ROOT``,
``VAR_DIR`` and export folder, over the PostgreSQL test database, the tests' Redis and an
S3 server on the loopback (``tests/factories/web_nodes.py``, ``workers.py``,
``object_store.py``). Through the real pages: an image imported through node A (the
worker reads the upload and writes the files) is served by node B, an export queued on node
B and written by the worker downloads through node A, a session made in the database is
good on both, and no node's folders get a file. PostgreSQL only (the test database must be
reachable from other processes); it skips without it, and fails in CI.

The same again with the nodes and the worker connecting through PgBouncer in transaction
mode (``tests/factories/pgbouncer.py``) with ``CAPEVAL_DB_TRANSACTION_POOLING``'s setting
(no server-side cursors): pages, sessions, jobs and the exports' chunked reads
(``QuerySet.iterator``) work through it. The setting itself is Django's advice for
transaction pooling; this test, with few clients, passes without it too, so it shows the
paths work through PgBouncer, not that the setting is needed.
"""

from __future__ import annotations

import contextlib
import io
import zipfile

import pytest
import requests
from django.db import connection
from PIL import Image as PILImage

from annotation.models import Image, Job
from tests.factories.images import original_exif
from tests.factories.object_store import object_store, s3_storages
from tests.factories.pgbouncer import pgbouncer
from tests.factories.web_nodes import (
    csrf_token,
    files_under,
    logged_in,
    own_folders,
    via_store,
    web_node,
)
from tests.factories.workers import (
    broker_fixture,  # noqa: F401 -- fixtures used by name
    require_postgres_url,
    start_worker_fixture,  # noqa: F401
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def photo() -> bytes:
    buffer = io.BytesIO()
    picture = PILImage.linear_gradient("L").resize((320, 240)).convert("RGB")
    picture.save(buffer, "JPEG", quality=85, exif=original_exif())
    return buffer.getvalue()


@contextlib.contextmanager
def database_settings(pooling: str):
    """The nodes' extra settings for the database: none (straight to PostgreSQL), or the
    test database through PgBouncer with what ``CAPEVAL_DB_TRANSACTION_POOLING`` sets."""
    if pooling == "direct":
        yield {}
        return
    with pgbouncer() as port:
        database = {**connection.settings_dict, "HOST": "127.0.0.1", "PORT": port}
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
        yield {"DATABASES": {"default": database}}


@pytest.mark.parametrize("pooling", ["direct", "pgbouncer"])
def test_one_study_served_by_two_nodes_and_a_worker(
    tmp_path, settings, broker, start_worker, researcher, make_study, pooling
):
    require_postgres_url()
    url, queue = broker
    with object_store(tmp_path / "s3") as store, database_settings(pooling) as database:
        storages = s3_storages(store)
        settings.STORAGES = storages
        start_worker(STORAGES=storages, **database, **own_folders(tmp_path / "worker"))
        study = make_study("thumb")
        original = photo()
        with (
            web_node(tmp_path / "a", url=url, queue=queue, STORAGES=storages, **database,
                     **own_folders(tmp_path / "a")) as node_a,
            web_node(tmp_path / "b", url=url, queue=queue, STORAGES=storages, **database,
                     **own_folders(tmp_path / "b")) as node_b,
        ):  # fmt: skip
            browser = logged_in(researcher)
            # The import, through node A's page; the worker runs it.
            page = f"{node_a}/studies/{study.pk}/import/"
            token = csrf_token(browser, page)
            captions = b"image,system,caption\nstreet.jpg,Human,A street.\nstreet.jpg,Bot,A road.\n"
            posted = browser.post(
                page,
                data={"csrfmiddlewaretoken": token, "purpose": "study"},
                files={
                    "image_files": ("street.jpg", original, "image/jpeg"),
                    "captions": ("captions.csv", captions, "text/csv"),
                },
                headers={"Referer": page},
                timeout=60,
            )
            assert posted.status_code in (200, 302), posted.text[-500:]
            job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
            wait_for(
                lambda: Job.objects.get(pk=job.pk).status == Job.Status.DONE,
                180,
                lambda: f"import job: {Job.objects.get(pk=job.pk).status}",
            )
            image = Image.objects.get(study=study)
            # Node B serves what node A took and the worker wrote: the original to the
            # study's researcher, the rendition to anyone.
            assert via_store(browser, f"{node_b}/media/{image.file}").content == original
            shown = via_store(requests.Session(), f"{node_b}/media/{image.display}")
            assert PILImage.open(io.BytesIO(shown.content)).format == "WEBP"
            # An export queued on node B, written by the worker, downloaded through node A.
            token = csrf_token(browser, f"{node_b}/studies/{study.pk}/import/")
            browser.post(
                f"{node_b}/studies/{study.pk}/export/",
                data={"csrfmiddlewaretoken": token, "format": "dataset", "images": "on"},
                headers={"Referer": f"{node_b}/studies/{study.pk}/"},
                timeout=60,
            )
            export = Job.objects.get(study=study, kind=Job.Kind.EXPORT)
            wait_for(
                lambda: Job.objects.get(pk=export.pk).status == Job.Status.DONE,
                180,
                lambda: f"export job: {Job.objects.get(pk=export.pk).status}",
            )
            data = via_store(browser, f"{node_a}/jobs/{export.pk}/download/").content
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                assert archive.read("images/street.jpg") == original
        # Nothing of the study on any node's disk: the store holds it all.
        for node in ("a", "b", "worker"):
            for folder in ("media", "exports"):
                assert files_under(tmp_path / node / folder) == [], (node, folder)
        assert {image.file, image.display} <= store.objects()
