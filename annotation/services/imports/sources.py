"""Where an import's files come from: uploads, folders, zip archives and single files.

The page saves its uploads in the media storage under ``uploads/<random>/``
(``save_upload``; ``annotation/storage.py``: the local folder or an object store, so the
worker that runs the job need not be the web node that took the upload), each under its
own base name, never a path the client chose; the job copies them to its own scratch
folder to read them and removes them when it ends (``storage.remove_upload_folder``). A
request that fails removes what it had stored (``staged_uploads``); the store not
answering is refused with ``UPLOAD_STORE_DOWN`` and no job.

An image source is a folder (read recursively), a zip archive or a single file
(``members``). Each yields one ``Member`` per candidate image, named by its file name
without folders (``photos/cat.jpg`` is cited as ``cat.jpg``) and labelled by where it came
from, for messages. Hidden files and the ``__MACOSX`` folder of macOS archives are skipped;
any other file that is not a ``.jpg``, ``.jpeg``, ``.png`` or ``.webp`` is an error.

A zip archive's whole listing is checked before anything is read from it: too many entries,
a declared total size over ``CAPEVAL_MAX_ZIP_BYTES``, absolute or escaping paths, symbolic
links and encrypted entries are errors, and an archive with any of them is not read at
all. Declared sizes can lie, so each entry is read up to
the per-image and the remaining archive budget only.

Names and labels are quoted in messages through ``annotation.text.shown``: a member named
with a NUL or a right-to-left override must not make the error list unstorable or misread.
"""

from __future__ import annotations

import logging
import stat
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from annotation import storage
from annotation.errors import ServiceError, StorageUnavailable
from annotation.text import shown

logger = logging.getLogger(__name__)

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".webp"}


class BadImage(Exception):
    """This member cannot be taken as an image; reported against its label, not raised on."""


class ImportTooLarge(Exception):
    """The import asks for more work than one import may do (``CAPEVAL_MAX_IMPORT_PIXELS``,
    ``CAPEVAL_MAX_IMPORT_ROWS``): reading stops at once; the message names the limit."""


@dataclass
class Member:
    """One candidate image file: where it came from (for messages) and how to read it."""

    label: str
    name: str
    read: Callable[[], bytes]


# --------------------------------------------------------------------------------------
# Uploads
# --------------------------------------------------------------------------------------


def save_upload(upload: UploadedFile, folder: str) -> str:
    """Store an upload in the storage folder ``folder`` under its own base name (never a
    path the client chose); return its storage name."""
    base = PurePosixPath((upload.name or "").replace("\\", "/")).name
    if base in ("", ".", ".."):
        base = "upload"
    name = f"{folder}/{base}"
    if storage.exists(name):
        raise ServiceError(f"two uploaded files are named {base!r}", field="image_files")
    return storage.save_stream(name, upload)


UPLOAD_STORE_DOWN = (
    "The file store did not answer, so your files were not stored and no import was "
    "started. Try again in a minute; if it keeps failing, ask the administrator to check "
    "the object store."
)


@contextmanager
def staged_uploads(staging: str) -> Iterator[None]:
    """Store a request's uploads under ``staging`` in the block: if it fails, remove what
    was stored, and refuse a store that did not answer with ``UPLOAD_STORE_DOWN``.

    The removal needs the store too: when it does not answer either, the error that
    stopped the request is still the one raised (the folder is logged; a request refused
    before its first upload reached the store left nothing)."""
    try:
        yield
    except BaseException as exc:
        try:
            storage.remove_upload_folder(staging)
        except StorageUnavailable:
            logger.warning("uploads left in %s: the file store did not answer", staging)
        if isinstance(exc, StorageUnavailable):
            raise storage.unavailable(UPLOAD_STORE_DOWN) from exc
        raise


# --------------------------------------------------------------------------------------
# Image sources
# --------------------------------------------------------------------------------------


def members(source: Path, errors: list[str]) -> Iterator[Member]:
    """The candidate images of one source; every file refused is added to ``errors``."""
    if source.is_dir():
        yield from _folder_members(source, errors)
    elif source.is_file() and zipfile.is_zipfile(source):
        yield from _zip_members(source, errors)
    elif source.is_file() and source.suffix.lower() == ".zip":
        errors.append(f"{shown(source.name)}: not a readable zip archive")
    elif source.is_file():
        name = source.name
        if _candidate(shown(name), name, errors):
            yield Member(label=shown(name), name=name, read=lambda: _read_file(source))
    else:
        errors.append(f"{shown(source.name)}: no such file or folder")


def _skipped(parts: Sequence[str]) -> bool:
    """Files every archiver adds on its own: hidden files and macOS resource forks."""
    return any(part.startswith(".") or part == "__MACOSX" for part in parts)


def _candidate(label: str, name: str, errors: list[str]) -> bool:
    """Whether the file should be read as an image; an SVG or other file is an error."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        return True
    if suffix == ".svg" or suffix == ".svgz":
        errors.append(f"{label}: SVG images are not accepted; convert it to PNG, JPEG or WebP")
    else:
        errors.append(f"{label}: not an image file (accepted: .jpg, .jpeg, .png, .webp)")
    return False


def _read_file(path: Path) -> bytes:
    limit = settings.CAPEVAL_MAX_IMAGE_BYTES
    if path.stat().st_size > limit:
        raise BadImage(f"file is larger than {limit // 1048576} MB")
    return path.read_bytes()


def _folder_members(folder: Path, errors: list[str]) -> Iterator[Member]:
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if _skipped(relative.parts) or path.is_dir():
            continue
        label = shown(relative.as_posix(), limit=300)
        if not path.is_file():
            errors.append(f"{label}: not a regular file")
            continue
        if _candidate(label, path.name, errors):
            yield Member(label=label, name=path.name, read=lambda p=path: _read_file(p))


# --------------------------------------------------------------------------------------
# Zip archives
# --------------------------------------------------------------------------------------


def _zip_members(archive: Path, errors: list[str]) -> Iterator[Member]:
    """Check the whole archive's listing before yielding anything from it.

    Names are never used as paths on disk (files are stored by content hash), but an archive
    with escaping paths or links is refused outright: it was built to attack someone.
    """
    archive_label = shown(archive.name)
    try:
        zf = zipfile.ZipFile(archive)
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
        # UnicodeDecodeError: a member name flagged UTF-8 that is not.
        errors.append(f"{archive_label}: not a readable zip archive ({exc})")
        return
    problems: list[str] = []
    max_members = settings.CAPEVAL_MAX_ZIP_MEMBERS
    max_bytes = settings.CAPEVAL_MAX_ZIP_BYTES
    if len(infos) > max_members:
        problems.append(f"{archive_label}: {len(infos)} entries; the limit is {max_members}")
    declared = sum(info.file_size for info in infos)
    if declared > max_bytes:
        problems.append(
            f"{archive_label}: uncompresses to {declared / 1048576:.0f} MB; "
            f"the limit is {max_bytes / 1048576:.0f} MB"
        )
    candidates: list[zipfile.ZipInfo] = []
    for info in infos:
        raw = info.filename
        label = f"{archive_label}: {shown(raw, limit=300)}"
        path = PurePosixPath(raw.replace("\\", "/"))
        if raw.startswith(("/", "\\")) or (len(raw) > 1 and raw[1] == ":"):
            problems.append(f"{label}: absolute path in the archive")
            continue
        if ".." in path.parts:
            problems.append(f"{label}: path leaves the archive ('..')")
            continue
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            problems.append(f"{label}: symbolic link in the archive")
            continue
        if info.is_dir() or _skipped(path.parts):
            continue
        if info.flag_bits & 0x1:
            problems.append(f"{label}: encrypted entry")
            continue
        if _candidate(label, path.name, errors):
            candidates.append(info)
    if problems:
        # Escaping paths, links or bomb-sized listings: read nothing from such an archive.
        errors.extend(problems)
        zf.close()
        return
    budget = {"left": max_bytes}

    def reader(info: zipfile.ZipInfo) -> Callable[[], bytes]:
        def read() -> bytes:
            # Declared sizes can lie; read no more than the limits allow, whatever they say.
            limit = min(settings.CAPEVAL_MAX_IMAGE_BYTES, budget["left"])
            try:
                with zf.open(info) as handle:
                    data = handle.read(limit + 1)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                raise BadImage(f"cannot be extracted ({exc})") from exc
            if len(data) > limit:
                raise BadImage("uncompresses beyond the size limit (zip bomb?)")
            budget["left"] -= len(data)
            return data

        return read

    for info in candidates:
        name = PurePosixPath(info.filename.replace("\\", "/")).name
        label = f"{archive_label}: {shown(info.filename, limit=300)}"
        yield Member(label=label, name=name, read=reader(info))
