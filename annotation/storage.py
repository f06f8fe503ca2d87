"""The file layer: every byte of a study's files (originals, display renditions, uploads
waiting for their job, exports) goes through Django's storage API here, never through a
path under ``MEDIA_ROOT`` or the export folder (issue 41).

The backends are ``STORAGES["default"]`` (media and uploads) and ``STORAGES["exports"]``:
the local folders ``MEDIA_ROOT`` and ``CAPEVAL_EXPORT_DIR`` on the embedded default
(``LocalMediaStorage``, ``LocalExportStorage``), one bucket of an S3-compatible object
store in a deployment of several nodes (django-storages' ``S3Storage``, configured by
``CAPEVAL_S3_*``; see ``platform/capeval/settings/base.py``). A name is a storage name,
``/``-separated and relative (``images/ab/<sha256>.jpg``); the functions below are all the
platform needs. ``tests/annotation/test_storage_scan.py`` keeps paths out of the rest.

Names are never reused for other bytes: originals and renditions are named by their
content hash, so writing a name that exists writes the same bytes again (both backends
overwrite, and a local write is atomic: readers see the old file or the new one, never a
part).

Downloads (``download_url``): on an object store, a presigned URL that expires after
``CAPEVAL_DOWNLOAD_SECONDS``, handed out after the view's access check, so a copied link
stops working; on the local backend, None, and the web node streams the file itself
after the same check (``views/media.py``).

The store not answering (down, unreachable, timing out, failing on its side; botocore's
connection and HTTP-client errors, a 5xx answer) is a ``StorageUnavailable`` (503) from
every function here that talks to the backend, with ``STORE_UNAVAILABLE`` as its message
and ``Retry-After``: the callers handle it as a refusal (a page says so, a job fails with
the reason and cleans up what it had stored), never as a 500. boto3's own retries absorb a
blip first; a longer outage ends here. Any other backend error is left as it is (a wrong
bucket or credentials are a misconfiguration, a 500 and a log entry).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from django.conf import settings
from django.core.files.base import ContentFile, File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.http import FileResponse, Http404, HttpResponse, HttpResponseRedirect

from annotation.errors import StorageUnavailable

logger = logging.getLogger(__name__)


class LocalMediaStorage(FileSystemStorage):
    """``MEDIA_ROOT`` on this node, written whole or not at all, overwriting the same name.

    Django's ``FileSystemStorage`` writes in place, so a reader (the media view, another
    worker reusing a content-hashed file) could read half a file; this one writes a
    temporary file beside the target and renames it over (atomic on one file system)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_overwrite", True)
        super().__init__(**kwargs)

    def _save(self, name: str, content: File) -> str:
        full = Path(self.path(name))
        full.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=full.parent, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as out:
                for chunk in content.chunks():
                    out.write(chunk)
            # mkstemp's 0600 would hide the file from a web server serving display/.
            os.chmod(temporary, self.file_permissions_mode or 0o644)
            os.replace(temporary, full)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return name.replace("\\", "/")


class LocalExportStorage(LocalMediaStorage):
    """``CAPEVAL_EXPORT_DIR`` on this node, read per call as the export code always did
    (tests point it elsewhere; ``FileSystemStorage`` would keep the first folder)."""

    @property
    def base_location(self):  # type: ignore[override]
        return self._value_or_setting(self._location, settings.CAPEVAL_EXPORT_DIR)

    @property
    def location(self):  # type: ignore[override]
        return os.path.abspath(self.base_location)


#: The storage of export files (``STORAGES["exports"]``): the export folder, or the same
#: object store as the media under ``exports/``.
EXPORTS = "exports"

STORE_UNAVAILABLE = (
    "The file store did not answer, so the files could not be stored or read. Try again in "
    "a minute; if it keeps failing, ask the administrator to check the object store."
)
#: Seconds a client is told to wait (``Retry-After``) when the file store does not answer.
STORE_RETRY_AFTER_S = 30
#: A 5xx answer's codes that mean "not now" rather than a broken request.
_BUSY_CODES = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout"}


def unavailable(message: str = STORE_UNAVAILABLE, **details) -> StorageUnavailable:
    """The refusal of a caller that lost the store (its message, when to try again)."""
    return StorageUnavailable(message, details={"retry_after": STORE_RETRY_AFTER_S, **details})


def _not_answered(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it wraps: boto3's S3UploadFailedError wraps the
    ClientError) says the store did not answer, as opposed to refusing the request."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, BotoConnectionError | HTTPClientError):
            return True
        if isinstance(exc, ClientError):
            answer = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            return answer >= 500 or exc.response.get("Error", {}).get("Code") in _BUSY_CODES
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    """Turn the store not answering into ``StorageUnavailable`` (used as a decorator on
    each function that talks to a backend; an inner one's refusal passes through)."""
    try:
        yield
    except StorageUnavailable:
        raise
    except Exception as exc:
        if not _not_answered(exc):
            raise
        logger.warning("the file store did not answer: %s", exc)
        raise unavailable() from exc


def media(alias: str = "default") -> Storage:
    """The media storage, or another alias of ``STORAGES`` (read per call: tests point
    ``STORAGES``, ``MEDIA_ROOT`` and ``CAPEVAL_EXPORT_DIR`` elsewhere)."""
    return storages[alias]


@_answered()
def exists(name: str, *, alias: str = "default") -> bool:
    return bool(name) and media(alias).exists(name)


@_answered()
def read_bytes(name: str) -> bytes:
    """The bytes stored under ``name``; FileNotFoundError when there are none."""
    storage = media()
    if not storage.exists(name):
        raise FileNotFoundError(name)
    with storage.open(name, "rb") as handle:
        return handle.read()


@_answered()
def write_bytes(name: str, data: bytes) -> str:
    """Store ``data`` under exactly ``name`` (overwriting); return the name."""
    saved = media().save(name, ContentFile(data))
    if saved != name:  # a backend that renames would break content-hashed names
        raise RuntimeError(f"the media storage stored {name!r} as {saved!r}")
    return saved


@_answered()
def write_file(name: str, path: Path, *, alias: str = "default") -> str:
    """Store the local file ``path`` under exactly ``name``, streamed; return the name."""
    with open(path, "rb") as handle:
        saved = media(alias).save(name, File(handle, name=Path(name).name))
    if saved != name:
        raise RuntimeError(f"the media storage stored {name!r} as {saved!r}")
    return saved


@_answered()
def delete(name: str, *, alias: str = "default") -> None:
    """Remove ``name`` if it is there."""
    if name:
        media(alias).delete(name)


def display_url(name: str) -> str:
    """The URL a page names a display rendition by: ``CAPEVAL_DISPLAY_URL`` (a CDN, or the
    store's public URL) when set, else this site's ``/media/``."""
    return (settings.CAPEVAL_DISPLAY_URL or settings.MEDIA_URL) + name


def is_plain_name(name: str) -> bool:
    """A file name of a storage's top folder (an export and its datasheet): no folder,
    nothing relative or hidden. Job rows hold such names; a changed row must not reach
    anything else."""
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


@_answered()
def names_under(prefix: str) -> list[str]:
    """Every name stored under the folder ``prefix`` (recursively), sorted."""
    storage = media()
    prefix = prefix.strip("/")
    try:
        folders, files = storage.listdir(prefix)
    except FileNotFoundError:  # the local backend: no such folder
        return []
    names = [f"{prefix}/{name}" for name in files]
    for folder in folders:
        names += names_under(f"{prefix}/{folder}")
    return sorted(names)


def delete_under(prefix: str) -> None:
    """Remove everything stored under the folder ``prefix`` (and, locally, the folders)."""
    for name in names_under(prefix):
        delete(name)
    folder = local_path(prefix)
    if folder is not None and folder.is_dir():
        # Emptied above; the local backend leaves the folders, which would pile up.
        # (A folder a concurrent write filled again stays.)
        with contextlib.suppress(OSError):
            for path in sorted(folder.rglob("*"), reverse=True):
                if path.is_dir():
                    path.rmdir()
            folder.rmdir()


@_answered()
def save_stream(name: str, content: File) -> str:
    """Store a file object (an upload) under exactly ``name``, streamed; return the name."""
    saved = media().save(name, content)
    if saved != name:
        raise RuntimeError(f"the media storage stored {name!r} as {saved!r}")
    return saved


@_answered()
def fetch_under(prefix: str, folder: Path) -> None:
    """Copy everything stored under ``prefix`` into the local ``folder``, keeping the names
    below the prefix: a worker reads an upload the web node stored, on whichever node."""
    storage = media()
    prefix = prefix.strip("/")
    for name in names_under(prefix):
        target = folder / name[len(prefix) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        with storage.open(name, "rb") as source, open(target, "wb") as out:
            for chunk in iter(lambda: source.read(1 << 20), b""):
                out.write(chunk)


@_answered()
def copy_to(name: str, out) -> None:
    """Stream the bytes stored under ``name`` into the writable file object ``out``."""
    with media().open(name, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            out.write(chunk)


def local_path(name: str, *, alias: str = "default") -> Path | None:
    """The file of ``name`` on this node's disk when the storage is local, else None."""
    storage = media(alias)
    if not isinstance(storage, FileSystemStorage):
        return None
    return Path(storage.path(name))


def download_url(
    name: str, *, filename: str = "", attachment: bool = False, alias: str = "default"
) -> str | None:
    """A presigned URL of ``name`` that expires after ``CAPEVAL_DOWNLOAD_SECONDS`` (None on
    the local backend: the caller streams the file). ``attachment``: the store answers with
    ``Content-Disposition: attachment`` (an original is never rendered inline)."""
    storage = media(alias)
    if isinstance(storage, FileSystemStorage):
        return None
    parameters = {}
    if attachment:
        shown = (filename or Path(name).name).replace('"', "")
        parameters["ResponseContentDisposition"] = f'attachment; filename="{shown}"'
    return storage.url(name, parameters=parameters, expire=settings.CAPEVAL_DOWNLOAD_SECONDS)


@_answered()
def download(
    name: str, *, alias: str = EXPORTS, filename: str = "", content_type: str | None = None
) -> HttpResponse:
    """The answer that hands the stored file ``name`` to a browser as an attachment, after
    the caller's access check: streamed by this node from the local folder, or a redirect
    to a presigned link of the object store (``Cache-Control: private, no-store``, so the
    link is never kept). Http404 when the file is gone."""
    storage = media(alias)
    shown = filename or PurePosixPath(name).name
    if not name or not storage.exists(name):
        raise Http404("The file is gone; run the export again.")
    link = download_url(name, filename=shown, attachment=True, alias=alias)
    if link is None:
        return FileResponse(
            storage.open(name, "rb"), as_attachment=True, filename=shown, content_type=content_type
        )
    response = HttpResponseRedirect(link)
    response["Cache-Control"] = "private, no-store"
    return response


#: The storage folder of uploads waiting for their job (``services/imports/sources.py``).
UPLOADS = "uploads"


def new_upload_folder() -> str:
    """A fresh storage folder for one job's uploads: ``uploads/<random>``."""
    return f"{UPLOADS}/{uuid.uuid4().hex}"


def remove_upload_folder(folder: str) -> None:
    """Delete a job's uploads, but only a folder ``uploads/<random>`` (a job's params are
    ours, but a folder named anything else is never removed)."""
    parts = PurePosixPath(folder or "").parts
    if len(parts) == 2 and parts[0] == UPLOADS and parts[1].isalnum():
        delete_under(folder)
