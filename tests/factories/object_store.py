"""An S3-compatible object store on the loopback for the storage tests (issue 41).

``s3rver`` (npm, pinned in package.json, installed by ``make test``) is a small S3 server
that keeps its objects in a folder and, unlike moto, checks a presigned link's signature
and refuses it once expired ("Request has expired"), which is what the download tests
need. ``object_store`` starts one per test in its own folder on a free port, with one
bucket, and stops it afterwards; ``s3_storages`` is the ``STORAGES`` setting pointing the
media storage at it with the production backend (``platform/capeval/settings/base.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tests.factories.servers import free_port, loopback_server

REPO = Path(__file__).resolve().parents[2]
S3RVER = REPO / "node_modules" / "s3rver" / "bin" / "s3rver.js"
BUCKET = "capeval-media"
#: s3rver's fixed credentials.
KEY = SECRET = "S3RVER"


@dataclass(frozen=True)
class ObjectStore:
    endpoint: str
    folder: Path

    def client(self):
        """A boto3 client of the store, to look at what the platform wrote."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )

    def objects(self) -> set[str]:
        listed = self.client().list_objects_v2(Bucket=BUCKET)
        return {entry["Key"] for entry in listed.get("Contents", [])}


def s3_storages(store: ObjectStore, *, expire: int = 300) -> dict:
    """``STORAGES`` with the media and exports on ``store``, as ``CAPEVAL_S3_BUCKET``
    configures them."""
    options = {
        "bucket_name": BUCKET,
        "endpoint_url": store.endpoint,
        "region_name": "us-east-1",
        "access_key": KEY,
        "secret_key": SECRET,
        "default_acl": "private",
        "querystring_auth": True,
        "querystring_expire": expire,
        "file_overwrite": True,
        "addressing_style": "path",
        "signature_version": "s3v4",
    }
    backend = "storages.backends.s3.S3Storage"
    return {
        "default": {"BACKEND": backend, "OPTIONS": options},
        "exports": {"BACKEND": backend, "OPTIONS": {**options, "location": "exports"}},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@contextmanager
def object_store(folder: Path, *, port: int | None = None) -> Iterator[ObjectStore]:
    """A running s3rver with the bucket, its objects in ``folder`` (on ``port``, or a free
    one); skips (fails in CI) without Node.js or the package."""
    node = shutil.which("node")
    if node is None or not S3RVER.is_file():
        message = "the object-store tests need Node.js and s3rver (make test installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    command = [node, str(S3RVER), "-d", str(folder), "-a", "127.0.0.1", "-p", str(port)]
    command += ["--silent", "--configure-bucket", BUCKET]
    with loopback_server(command, port, "s3rver"):
        store = ObjectStore(endpoint=f"http://127.0.0.1:{port}", folder=folder)
        # The bucket is configured at startup; wait until it answers.
        for _ in range(100):
            try:
                store.objects()
                break
            except (BotoCoreError, ClientError):  # not serving the bucket yet
                time.sleep(0.1)
        yield store


class StoppableObjectStore:
    """An s3rver that a test can stop (an outage: the port refuses connections) and start
    again on the same folder and port, so ``STORAGES`` pointing at it stays right and the
    objects stored before the outage are there after it."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self._running: contextlib.AbstractContextManager[ObjectStore] | None = None

    def start(self) -> ObjectStore:
        self._running = object_store(self.folder, port=self.port)
        return self._running.__enter__()

    def stop(self) -> None:
        if self._running is not None:
            running, self._running = self._running, None
            running.__exit__(None, None, None)


@contextmanager
def stoppable_object_store(folder: Path) -> Iterator[tuple[ObjectStore, StoppableObjectStore]]:
    """A running s3rver (as ``object_store``) and the handle that stops and restarts it;
    stopped when the block ends, whatever state the test left it in."""
    server = StoppableObjectStore(folder)
    try:
        yield server.start(), server
    finally:
        server.stop()
