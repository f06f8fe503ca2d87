"""Import a study's images and captions: validate everything first, then write all or nothing.

Sources
-------
Images come from folders, zip archives or single files (``image_sources``). Only JPEG, PNG
and WebP are accepted (Pillow is told to try those formats only), every image is decoded
fully so a truncated file is caught, and an image whose declared size exceeds
``CAPEVAL_MAX_IMAGE_PIXELS`` is refused before any pixel is decoded. An image's ``name`` is
its file name without folders (``photos/cat.jpg`` is cited as ``cat.jpg``); hidden files and
the ``__MACOSX`` folder of macOS archives are skipped, any other file is an error.

Captions come from one file:

- CSV (UTF-8, a BOM is accepted), header ``image,system,caption`` plus optional
  ``prime_ratings`` (``3;4``), ``metric:<name>`` columns (numbers, stored in
  ``Caption.metrics``), ``description`` (the image's alt text) and ``source`` (the image's
  origin and licence). For ``purpose`` tutorial or probation the header is
  ``image,caption,truth,explanation`` (``system`` optional, default ``Curated``).
- COCO results JSON, ``[{"image_id": ..., "caption": ...}]``, one system per file; the system
  name is given by the caller (the command and the page default to the file's stem). Image
  ids are mapped to file names by a COCO ``images`` list (``[{"id": 1, "file_name": ...}]``),
  either in the same file (``{"images": [...], "annotations": [...]}``, the layout of COCO's
  own caption files) or in a separate file (``coco_images``). A string ``image_id`` without
  a mapping is taken as the image name.

A caption cites its image by exact file name, or by the name without extension when exactly
one image of the study (or of this import) has that stem. ``Human`` is matched without regard
to case. ``Caption.line`` is the line of the file the row or JSON entry starts on.

Storage
-------
Originals are stored once per content hash as ``images/ab/<sha256>.<ext>`` under MEDIA_ROOT
and renditions for display as ``display/ab/<sha256>-<side>.webp`` (longest side at most
``CAPEVAL_DISPLAY_MAX_SIDE``, EXIF orientation applied); a file already present is reused.

All or nothing
--------------
Every image and row is checked and every problem collected before anything is written;
processed files wait in a staging folder inside MEDIA_ROOT (so that moving them is a
rename). Only when there are no errors are the files moved into place and the rows created
in one transaction; if the transaction fails the files this import placed are removed.
Progress is reported before that transaction, so other connections see it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import shutil
import stat
import unicodedata
import uuid
import warnings
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from PIL import Image as PILImage
from PIL import ImageOps, UnidentifiedImageError

from annotation.models import Caption, Image, Job, Study, User
from annotation.services.jobs import job_create
from rubrics.thumb import normalise

Progress = Callable[..., None]

ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP")
FORMAT_EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".webp"}
CSV_FORMAT, COCO_FORMAT = "csv", "coco"
TUTORIAL_DEFAULT_SYSTEM = "Curated"
MAX_REPORTED_ERRORS = 1000


def _line_of(error: str) -> int:
    match = re.match(r"line (\d+):", error)
    return int(match.group(1)) if match else 0


class ImportFailed(Exception):
    """The import stored nothing; ``details["errors"]`` lists every problem found."""

    def __init__(self, errors: Sequence[str]):
        # File-level problems first, then row problems in line order, wherever found.
        self.errors = sorted(errors, key=_line_of)
        shown = self.errors[:MAX_REPORTED_ERRORS]
        if len(self.errors) > len(shown):
            shown.append(f"... and {len(self.errors) - len(shown)} more errors")
        count = len(self.errors)
        self.user_message = (
            f"Nothing was imported: {count} problem{'s' if count != 1 else ''} found."
        )
        self.details = {"errors": shown}
        super().__init__(self.user_message + "\n" + "\n".join(shown))


@dataclass
class ImportSummary:
    images_new: int = 0
    images_existing: int = 0
    files_written: int = 0
    captions: int = 0
    systems: list[str] = field(default_factory=list)
    purpose: str = Caption.Purpose.STUDY

    def as_text(self) -> str:
        systems = ", ".join(self.systems) or "none"
        return (
            f"Imported {self.images_new} new image(s) ({self.images_existing} already in the "
            f"study, {self.files_written} new file(s) stored) and {self.captions} "
            f"{self.purpose} caption(s) from system(s): {systems}."
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": self.as_text(),
            "images_new": self.images_new,
            "images_existing": self.images_existing,
            "files_written": self.files_written,
            "captions": self.captions,
            "systems": self.systems,
            "purpose": self.purpose,
        }


@dataclass
class _StagedImage:
    name: str
    sha256: str
    file: str
    display: str
    width: int
    height: int
    format: str


@dataclass
class _CaptionRow:
    line: int
    image_ref: str
    system: str
    raw_text: str
    prime_ratings: list[float | int] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    truth: int | None = None
    explanation: str = ""
    description: str = ""
    source: str = ""


class _Reporter:
    """Turn step counts into percentages; write only when the percentage changes."""

    def __init__(self, progress: Progress | None):
        self.progress = progress
        self.last = -1

    def __call__(self, percent: float, message: str) -> None:
        value = int(percent)
        if self.progress is not None and value != self.last:
            self.last = value
            self.progress(value, message)


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------


def import_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """Run an import job from its params; its staging upload folder is removed either way."""
    params = job.params
    try:
        summary = study_import(
            study=job.study,
            image_sources=[Path(p) for p in params.get("images", [])],
            captions=Path(params["captions"]) if params.get("captions") else None,
            caption_format=params.get("format", CSV_FORMAT),
            system=params.get("system", ""),
            purpose=params.get("purpose", Caption.Purpose.STUDY),
            coco_images=Path(params["coco_images"]) if params.get("coco_images") else None,
            progress=progress,
        )
    finally:
        _remove_upload_staging(params.get("staging", ""))
    return {"result": summary.as_dict(), "message": summary.as_text()}


def study_import(
    *,
    study: Study,
    image_sources: Sequence[Path] = (),
    captions: Path | None = None,
    caption_format: str = CSV_FORMAT,
    system: str = "",
    purpose: str = Caption.Purpose.STUDY,
    coco_images: Path | None = None,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import images and captions into a draft study, entirely or not at all.

    Raise ImportFailed listing every bad image and row (with line numbers) when anything is
    wrong; nothing is stored in that case.
    """
    report = _Reporter(progress)
    errors: list[str] = []
    if study.status != Study.Status.DRAFT:
        raise ImportFailed(["the study is no longer a draft; import before opening it"])
    if purpose not in Caption.Purpose.values:
        raise ImportFailed([f"unknown purpose {purpose!r} (use study, tutorial or probation)"])
    if caption_format not in (CSV_FORMAT, COCO_FORMAT):
        raise ImportFailed([f"unknown captions format {caption_format!r} (use csv or coco)"])
    if not image_sources and captions is None:
        raise ImportFailed(["give images, a captions file, or both"])

    staging = Path(settings.MEDIA_ROOT) / ".staging" / uuid.uuid4().hex
    staging.mkdir(parents=True)
    try:
        report(0, "Checking images")
        staged = _stage_images(image_sources, staging, errors, report)
        rows: list[_CaptionRow] = []
        if captions is not None:
            report(60, "Checking captions")
            rows = _read_captions(
                captions, caption_format, system.strip(), purpose, coco_images, errors
            )
        existing = {image.name: image for image in Image.objects.filter(study=study)}
        _check_against_study(staged, existing, errors)
        resolved = _resolve_rows(rows, staged, existing, purpose, study, errors, report)
        if errors:
            raise ImportFailed(errors)
        report(90, "Storing")
        return _store(study, staged, existing, rows, resolved, purpose, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def import_request(
    *,
    study: Study,
    user: User,
    images_zip: UploadedFile | None = None,
    image_files: Sequence[UploadedFile] = (),
    captions: UploadedFile | None = None,
    coco_images: UploadedFile | None = None,
    caption_format: str = "",
    system: str = "",
    purpose: str = Caption.Purpose.STUDY,
) -> Job:
    """Save the uploads to a staging folder and queue an import job reading them.

    ``caption_format`` "" means: by the captions file's extension (``.json`` is COCO). For
    COCO results the system defaults to the file's name without extension.
    """
    staging = Path(settings.VAR_DIR) / "uploads" / uuid.uuid4().hex
    params: dict[str, Any] = {"staging": str(staging), "images": [], "purpose": purpose}
    try:
        if images_zip is not None:
            params["images"].append(str(_save_upload(images_zip, staging / "archives")))
        if image_files:
            for upload in image_files:
                _save_upload(upload, staging / "images")
            params["images"].append(str(staging / "images"))
        if captions is not None:
            params["captions"] = str(_save_upload(captions, staging / "captions"))
            if not caption_format:
                is_json = Path(captions.name or "").suffix.lower() == ".json"
                caption_format = COCO_FORMAT if is_json else CSV_FORMAT
            if caption_format == COCO_FORMAT and not system.strip():
                system = Path(captions.name or "").stem
        if coco_images is not None:
            params["coco_images"] = str(_save_upload(coco_images, staging / "coco"))
        params["format"] = caption_format or CSV_FORMAT
        params["system"] = system.strip()
        return job_create(kind=Job.Kind.IMPORT, study=study, created_by=user, params=params)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _save_upload(upload: UploadedFile, folder: Path) -> Path:
    """Write an upload under its own base name (never a path the client chose)."""
    name = PurePosixPath((upload.name or "").replace("\\", "/")).name
    if name in ("", ".", ".."):
        name = "upload"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if path.exists():
        raise ValueError(f"two uploaded files are named {name!r}")
    with path.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return path


# --------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------


@dataclass
class _Member:
    """One candidate image file: where it came from (for messages) and how to read it."""

    label: str
    name: str
    read: Callable[[], bytes]


def _stage_images(
    sources: Sequence[Path], staging: Path, errors: list[str], report: _Reporter
) -> dict[str, _StagedImage]:
    members = [m for source in sources for m in _members(source, errors)]
    staged: dict[str, _StagedImage] = {}
    processed: dict[str, _StagedImage] = {}  # by sha256: identical bytes are processed once
    seen_labels: dict[str, str] = {}
    for index, member in enumerate(members):
        report(60 * index / max(1, len(members)), f"Checking image {index + 1} of {len(members)}")
        if member.name in seen_labels:
            errors.append(
                f"{member.label}: another image is also named '{member.name}' "
                f"({seen_labels[member.name]}); image names must be unique"
            )
            continue
        seen_labels[member.name] = member.label
        try:
            data = member.read()
            sha = hashlib.sha256(data).hexdigest()
            done = processed.get(sha) or _already_stored(sha)
            if done is None:
                done = _process_image(data, sha, staging)
            processed[sha] = done
        except _BadImage as exc:
            errors.append(f"{member.label}: {exc}")
            continue
        staged[member.name] = replace(done, name=member.name)
    return staged


class _BadImage(Exception):
    pass


def _skipped(parts: Sequence[str]) -> bool:
    """Files every archiver adds on its own: hidden files and macOS resource forks."""
    return any(part.startswith(".") or part == "__MACOSX" for part in parts)


def _members(source: Path, errors: list[str]) -> Iterator[_Member]:
    if source.is_dir():
        yield from _folder_members(source, errors)
    elif source.is_file() and zipfile.is_zipfile(source):
        yield from _zip_members(source, errors)
    elif source.is_file() and source.suffix.lower() == ".zip":
        errors.append(f"{source.name}: not a readable zip archive")
    elif source.is_file():
        name = source.name
        if _candidate(name, name, errors):
            yield _Member(label=name, name=name, read=lambda: _read_file(source))
    else:
        errors.append(f"{source.name}: no such file or folder")


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
        raise _BadImage(f"file is larger than {limit // 1048576} MB")
    return path.read_bytes()


def _folder_members(folder: Path, errors: list[str]) -> Iterator[_Member]:
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if _skipped(relative.parts) or path.is_dir():
            continue
        label = relative.as_posix()
        if not path.is_file():
            errors.append(f"{label}: not a regular file")
            continue
        if _candidate(label, path.name, errors):
            yield _Member(label=label, name=path.name, read=lambda p=path: _read_file(p))


def _zip_members(archive: Path, errors: list[str]) -> Iterator[_Member]:
    """Check the whole archive's listing before yielding anything from it.

    Names are never used as paths on disk (files are stored by content hash), but an archive
    with escaping paths or links is refused outright: it was built to attack someone.
    """
    try:
        zf = zipfile.ZipFile(archive)
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        errors.append(f"{archive.name}: not a readable zip archive ({exc})")
        return
    problems: list[str] = []
    max_members = settings.CAPEVAL_MAX_ZIP_MEMBERS
    max_bytes = settings.CAPEVAL_MAX_ZIP_BYTES
    if len(infos) > max_members:
        problems.append(f"{archive.name}: {len(infos)} entries; the limit is {max_members}")
    declared = sum(info.file_size for info in infos)
    if declared > max_bytes:
        problems.append(
            f"{archive.name}: uncompresses to {declared / 1048576:.0f} MB; "
            f"the limit is {max_bytes / 1048576:.0f} MB"
        )
    candidates: list[zipfile.ZipInfo] = []
    for info in infos:
        raw = info.filename
        label = f"{archive.name}: {raw}"
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
                raise _BadImage(f"cannot be extracted ({exc})") from exc
            if len(data) > limit:
                raise _BadImage("uncompresses beyond the size limit (zip bomb?)")
            budget["left"] -= len(data)
            return data

        return read

    for info in candidates:
        name = PurePosixPath(info.filename.replace("\\", "/")).name
        yield _Member(label=f"{archive.name}: {info.filename}", name=name, read=reader(info))


def _process_image(data: bytes, sha: str, staging: Path) -> _StagedImage:
    """Verify one image fully and write its original and display rendition to staging."""
    max_pixels = settings.CAPEVAL_MAX_IMAGE_PIXELS
    with warnings.catch_warnings():
        # Pillow only warns between its limit and twice that; make the warning an error.
        warnings.simplefilter("error", PILImage.DecompressionBombWarning)
        try:
            img = PILImage.open(io.BytesIO(data), formats=list(ACCEPTED_FORMATS))
        except UnidentifiedImageError as exc:
            if b"<svg" in data[:4096].lower():
                raise _BadImage(
                    "SVG images are not accepted; convert it to PNG, JPEG or WebP"
                ) from exc
            raise _BadImage("not a JPEG, PNG or WebP image (or a damaged one)") from exc
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
            raise _BadImage(
                f"declares too many pixels; the limit is {max_pixels / 1e6:g} Mpx ({exc})"
            ) from exc
        except (OSError, SyntaxError, ValueError) as exc:
            raise _BadImage(f"cannot be read as an image ({exc})") from exc
        width, height = img.size
        if width * height > max_pixels:
            raise _BadImage(
                f"declares {width} x {height} pixels ({width * height / 1e6:.1f} Mpx); "
                f"the limit is {max_pixels / 1e6:g} Mpx"
            )
        if width == 0 or height == 0:
            raise _BadImage("has no pixels")
        try:
            img.load()
            oriented = ImageOps.exif_transpose(img)
            display = _rendition(oriented)
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
            raise _BadImage(f"declares too many pixels ({exc})") from exc
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise _BadImage(f"is truncated or damaged ({exc})") from exc
    fmt = img.format or ""
    file_rel = f"images/{sha[:2]}/{sha}.{FORMAT_EXTENSIONS[fmt]}"
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    display_rel = f"display/{sha[:2]}/{sha}-{side}.webp"
    _write(staging / file_rel, data)
    buffer = io.BytesIO()
    display.save(buffer, "WEBP", quality=85, method=4)
    _write(staging / display_rel, buffer.getvalue())
    return _StagedImage(
        name="",
        sha256=sha,
        file=file_rel,
        display=display_rel,
        width=oriented.width,
        height=oriented.height,
        format=fmt,
    )


def _already_stored(sha: str) -> _StagedImage | None:
    """An image with these exact bytes was verified and stored before: reuse its files."""
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    known = Image.objects.filter(sha256=sha, display__endswith=f"-{side}.webp").first()
    media = Path(settings.MEDIA_ROOT)
    if known is None or not (media / known.file).is_file() or not (media / known.display).is_file():
        return None
    return _StagedImage(
        name="",
        sha256=sha,
        file=known.file,
        display=known.display,
        width=known.width,
        height=known.height,
        format=known.format,
    )


def _rendition(img: PILImage.Image) -> PILImage.Image:
    if img.mode not in ("RGB", "RGBA", "L", "LA"):
        img = img.convert("RGBA" if "transparency" in img.info or "A" in img.mode else "RGB")
    img = img.copy()
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    img.thumbnail((side, side), PILImage.Resampling.LANCZOS)
    return img


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _check_against_study(
    staged: dict[str, _StagedImage], existing: dict[str, Image], errors: list[str]
) -> None:
    for name, image in staged.items():
        old = existing.get(name)
        if old is not None and old.sha256 != image.sha256:
            errors.append(
                f"{name}: the study already has a different image of this name; rename one"
            )


# --------------------------------------------------------------------------------------
# Captions
# --------------------------------------------------------------------------------------


def _read_text(path: Path, errors: list[str]) -> str | None:
    limit = settings.CAPEVAL_MAX_CAPTION_FILE_BYTES
    if path.stat().st_size > limit:
        errors.append(f"{path.name}: larger than {limit // 1048576} MB")
        return None
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        errors.append(
            f"line {line}: {path.name} is not UTF-8 (byte 0x{data[exc.start]:02x} at "
            f"position {exc.start}); save it as UTF-8"
        )
        return None


def _read_captions(
    path: Path,
    caption_format: str,
    system: str,
    purpose: str,
    coco_images: Path | None,
    errors: list[str],
) -> list[_CaptionRow]:
    text = _read_text(path, errors)
    if text is None:
        return []
    if caption_format == CSV_FORMAT:
        return _read_csv(text, system, purpose, errors)
    if purpose != Caption.Purpose.STUDY:
        errors.append("tutorial and probation sets are imported from CSV, not COCO JSON")
        return []
    mapping_text = _read_text(coco_images, errors) if coco_images is not None else ""
    if mapping_text is None:
        return []
    return _read_coco(text, mapping_text, system, errors)


def _clean_system(value: str) -> str:
    value = value.strip()
    return Caption.HUMAN if value.lower() == Caption.HUMAN.lower() else value


def _check_text(raw: str, what: str) -> str | None:
    """The problem with a caption's text, or None."""
    if not raw.strip():
        return f"empty {what}"
    limit = settings.CAPEVAL_MAX_CAPTION_CHARS
    if len(raw) > limit:
        return f"{what} has {len(raw)} characters; the limit is {limit}"
    bad = next((c for c in raw if unicodedata.category(c) == "Cc" and c not in "\t\n\r"), None)
    if bad is not None:
        return f"{what} contains the control character U+{ord(bad):04X}"
    return None


def _csv_columns(purpose: str, system_given: bool) -> tuple[set[str], set[str]]:
    """(required, optional) columns of a captions CSV for this purpose."""
    if purpose == Caption.Purpose.STUDY:
        required = {"image", "caption"} | (set() if system_given else {"system"})
        return required, {"system", "prime_ratings", "description", "source"}
    required = {"image", "caption", "truth"}
    if purpose == Caption.Purpose.TUTORIAL:
        required.add("explanation")
    return required, {"system", "explanation", "description", "source"}


def _read_csv(text: str, system: str, purpose: str, errors: list[str]) -> list[_CaptionRow]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        errors.append(f"line 1: malformed CSV header ({exc})")
        return []
    if header is None:
        errors.append("line 1: the captions file is empty")
        return []
    columns = [c.strip().lower() for c in header]
    required, optional = _csv_columns(purpose, bool(system))
    problems = []
    missing = sorted(required - set(columns))
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    unknown = [c for c in columns if c not in required | optional and not c.startswith("metric:")]
    if unknown:
        allowed = ", ".join(sorted(required | optional) + ["metric:<name>"])
        problems.append(f"unknown column(s) {', '.join(unknown)} (allowed: {allowed})")
    if "metric:" in columns:
        problems.append("a metric column needs a name, like metric:clipscore")
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        problems.append(f"repeated column(s) {', '.join(duplicated)}")
    if system and "system" in columns:
        problems.append("the file has a system column and a system name was given; use one")
    if problems:
        errors.append("line 1: " + "; ".join(problems))
        return []

    rows: list[_CaptionRow] = []
    last_line = reader.line_num
    while True:
        start = last_line + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(f"line {start}: malformed CSV ({exc}); rows after it were not read")
            break
        last_line = reader.line_num
        if not record or all(not cell.strip() for cell in record):
            continue
        if len(record) != len(columns):
            errors.append(f"line {start}: {len(record)} fields; the header has {len(columns)}")
            continue
        row = _csv_row(start, dict(zip(columns, record, strict=True)), system, purpose, errors)
        if row is not None:
            rows.append(row)
    return rows


def _csv_row(
    line: int, cells: dict[str, str], system: str, purpose: str, errors: list[str]
) -> _CaptionRow | None:
    problems: list[str] = []
    image_ref = cells["image"].strip()
    if not image_ref:
        problems.append("empty image name")
    system_name = _clean_system(cells.get("system", "") or system)
    if not system_name:
        system_name = "" if purpose == Caption.Purpose.STUDY else TUTORIAL_DEFAULT_SYSTEM
    if not system_name:
        problems.append("empty system name")
    elif len(system_name) > 100:
        problems.append("system name longer than 100 characters")
    raw = cells["caption"]
    text_problem = _check_text(raw, "caption")
    if text_problem:
        problems.append(text_problem)
    row = _CaptionRow(line=line, image_ref=image_ref, system=system_name, raw_text=raw)
    row.prime_ratings = _parse_primes(cells.get("prime_ratings", ""), problems)
    for column, value in cells.items():
        if column.startswith("metric:") and value.strip():
            number = _parse_number(value)
            if number is None:
                problems.append(f"{column} is not a number: {value.strip()!r}")
            else:
                row.metrics[column.removeprefix("metric:")] = number
    row.description = cells.get("description", "").strip()
    row.source = cells.get("source", "").strip()
    if len(row.description) > 500:
        problems.append("description longer than 500 characters")
    if len(row.source) > 500:
        problems.append("source longer than 500 characters")
    if purpose != Caption.Purpose.STUDY:
        truth = cells.get("truth", "").strip()
        if truth not in {"1", "2", "3", "4", "5"}:
            problems.append(f"truth must be a whole number from 1 to 5, not {truth!r}")
        else:
            row.truth = int(truth)
        row.explanation = cells.get("explanation", "").strip()
        if purpose == Caption.Purpose.TUTORIAL and not row.explanation:
            problems.append("empty explanation (the tutorial shows it to every player)")
        elif len(row.explanation) > 5000:
            problems.append("explanation longer than 5000 characters")
    if problems:
        errors.append(f"line {line}: " + "; ".join(problems))
        return None
    return row


def _parse_number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _parse_primes(value: str, problems: list[str]) -> list[float | int]:
    primes: list[float | int] = []
    for part in value.replace(",", ";").split(";"):
        if not part.strip():
            continue
        number = _parse_number(part)
        if number is None or not 1 <= number <= 5:
            problems.append(f"prime rating {part.strip()!r} is not a number from 1 to 5")
            continue
        primes.append(int(number) if number.is_integer() else number)
    return primes


class _Located:
    """A JSON value and the line its text starts on."""

    def __init__(self, value: Any, line: int):
        self.value = value
        self.line = line


def _json_error(exc: json.JSONDecodeError, label: str) -> str:
    return f"line {exc.lineno}: {label} is not valid JSON ({exc.msg} at column {exc.colno})"


def _scan_json(text: str) -> Any:
    """Parse JSON, recording the line of each entry of the top-level array (or of the array
    under ``annotations``/``results`` of a top-level object) so errors can cite it."""
    decoder = json.JSONDecoder()
    ws = " \t\n\r"

    def skip(pos: int) -> int:
        while pos < len(text) and text[pos] in ws:
            pos += 1
        return pos

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def array(pos: int) -> tuple[list[_Located], int]:
        items: list[_Located] = []
        pos = skip(pos + 1)
        if pos < len(text) and text[pos] == "]":
            return items, pos + 1
        while True:
            pos = skip(pos)
            value, end = decoder.raw_decode(text, pos)
            items.append(_Located(value, line_of(pos)))
            pos = skip(end)
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == "]":
                return items, pos + 1
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)

    # Validate the whole document first, so the error position is json's own.
    whole = json.loads(text)
    start = skip(0)
    if isinstance(whole, list):
        items, _ = array(start)
        return items
    if isinstance(whole, dict):
        result: dict[str, Any] = {}
        pos = skip(start + 1)
        while pos < len(text) and text[pos] != "}":
            key, pos = decoder.raw_decode(text, pos)
            pos = skip(skip(pos) + 1)  # past ':'
            if key in ("annotations", "results") and text[pos] == "[":
                result[key], pos = array(pos)
            else:
                result[key], pos = decoder.raw_decode(text, pos)
            pos = skip(pos)
            if text[pos] == ",":
                pos = skip(pos + 1)
        return result
    return whole


def _coco_id_map(document: Any, label: str, errors: list[str]) -> dict[Any, str] | None:
    if not isinstance(document, list):
        errors.append(f'{label}: \'images\' must be a list of {{"id", "file_name"}} objects')
        return None
    mapping: dict[Any, str] = {}
    for position, entry in enumerate(document, start=1):
        if (
            not isinstance(entry, dict)
            or "id" not in entry
            or not isinstance(entry.get("file_name"), str)
        ):
            errors.append(f"{label}: images entry {position} needs an id and a file_name")
            continue
        mapping[entry["id"]] = PurePosixPath(entry["file_name"]).name
    return mapping


def _read_coco(text: str, mapping_text: str, system: str, errors: list[str]) -> list[_CaptionRow]:
    system = _clean_system(system)
    if not system:
        errors.append(
            "COCO results need a system name (the command and page default to the "
            "file name without extension)"
        )
    try:
        document = _scan_json(text)
    except json.JSONDecodeError as exc:
        errors.append(_json_error(exc, "the captions file"))
        return []
    id_to_name: dict[Any, str] | None = None
    if isinstance(document, dict):
        if "images" in document:
            id_to_name = _coco_id_map(document["images"], "the captions file", errors)
        entries = document.get("annotations", document.get("results"))
        if not isinstance(entries, list):
            errors.append(
                "line 1: a COCO object needs an 'annotations' (or 'results') list of "
                '{"image_id", "caption"} entries'
            )
            return []
    elif isinstance(document, list):
        entries = document
    else:
        errors.append('line 1: COCO results must be a list of {"image_id", "caption"} entries')
        return []
    if mapping_text:
        try:
            mapping_doc = json.loads(mapping_text)
        except json.JSONDecodeError as exc:
            errors.append(_json_error(exc, "the COCO images file"))
            return []
        images_list = mapping_doc.get("images") if isinstance(mapping_doc, dict) else mapping_doc
        id_to_name = _coco_id_map(images_list, "the COCO images file", errors)
    rows: list[_CaptionRow] = []
    for located in entries:
        entry, line = located.value, located.line
        if not isinstance(entry, dict) or "image_id" not in entry or "caption" not in entry:
            errors.append(f'line {line}: each entry needs "image_id" and "caption"')
            continue
        image_id, raw = entry["image_id"], entry["caption"]
        problems: list[str] = []
        if not isinstance(raw, str):
            problems.append("caption is not a string")
        else:
            text_problem = _check_text(raw, "caption")
            if text_problem:
                problems.append(text_problem)
        image_ref = ""
        if isinstance(image_id, bool) or not isinstance(image_id, int | str):
            problems.append(f"image_id {image_id!r} is neither a number nor a name")
        elif id_to_name is not None and image_id in id_to_name:
            image_ref = id_to_name[image_id]
        elif isinstance(image_id, str) and id_to_name is None:
            image_ref = image_id.strip()
        elif id_to_name is None:
            problems.append(
                f"image_id {image_id} needs a COCO images list to map ids to file names"
            )
        else:
            problems.append(f"image_id {image_id!r} is not in the COCO images list")
        if problems:
            errors.append(f"line {line}: " + "; ".join(problems))
            continue
        rows.append(_CaptionRow(line=line, image_ref=image_ref, system=system, raw_text=raw))
    return rows


# --------------------------------------------------------------------------------------
# Matching rows to images, duplicates
# --------------------------------------------------------------------------------------


def _resolve_rows(
    rows: list[_CaptionRow],
    staged: dict[str, _StagedImage],
    existing: dict[str, Image],
    purpose: str,
    study: Study,
    errors: list[str],
    report: _Reporter,
) -> list[str]:
    """The image name each row cites (parallel to ``rows``), reporting every problem."""
    names = set(staged) | set(existing)
    by_stem: dict[str, list[str]] = defaultdict(list)
    for name in names:
        by_stem[PurePosixPath(name).stem].append(name)
    seen: dict[tuple, int] = {}
    for caption in Caption.objects.filter(study=study, purpose=purpose).select_related("image"):
        seen[_duplicate_key(caption.image.name, caption.system, caption.raw_text, purpose)] = 0
    resolved: list[str] = []
    for index, row in enumerate(rows):
        report(60 + 30 * index / max(1, len(rows)), f"Checking caption {index + 1}")
        name = row.image_ref if row.image_ref in names else None
        if name is None:
            matches = sorted(by_stem.get(row.image_ref, []))
            if len(matches) == 1:
                name = matches[0]
            elif matches:
                errors.append(
                    f"line {row.line}: image '{row.image_ref}' is ambiguous "
                    f"({', '.join(matches)}); cite the full file name"
                )
            else:
                errors.append(f"line {row.line}: unknown image '{row.image_ref}'")
        resolved.append(name or "")
        if name is None:
            continue
        key = _duplicate_key(name, row.system, row.raw_text, purpose)
        if key not in seen:
            seen[key] = row.line
            continue
        where = f"on line {seen[key]}" if seen[key] else "in the study already"
        if len(key) == 2:
            errors.append(
                f"line {row.line}: duplicate: {row.system} has another caption of '{name}' "
                f"{where} (one caption per system and image)"
            )
        else:
            errors.append(
                f"line {row.line}: duplicate: the same caption of '{name}' by {row.system} "
                f"is {where}"
            )
    return resolved


def _duplicate_key(image: str, system: str, raw_text: str, purpose: str) -> tuple:
    # A model has one caption per image in a study; people and curated sets may have several.
    if purpose == Caption.Purpose.STUDY and system != Caption.HUMAN:
        return (image, system)
    return (image, system, raw_text.strip())


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def _store(
    study: Study,
    staged: dict[str, _StagedImage],
    existing: dict[str, Image],
    rows: list[_CaptionRow],
    resolved: list[str],
    purpose: str,
    staging: Path,
) -> ImportSummary:
    media = Path(settings.MEDIA_ROOT)
    placed: list[Path] = []
    summary = ImportSummary(purpose=purpose)
    try:
        for relative in sorted({p for s in staged.values() for p in (s.file, s.display)}):
            target = media / relative
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / relative, target)
            placed.append(target)
        summary.files_written = len(placed)
        metadata = _image_metadata(rows, resolved)
        new_images = [
            Image(
                study=study,
                name=s.name,
                sha256=s.sha256,
                file=s.file,
                display=s.display,
                width=s.width,
                height=s.height,
                format=s.format,
                alt_text=metadata[s.name][0],
                source=metadata[s.name][1],
            )
            for name, s in staged.items()
            if name not in existing
        ]
        summary.images_new = len(new_images)
        summary.images_existing = len(staged) - len(new_images)
        with transaction.atomic():
            # Opening the study locks this row too: captions never land in a live study.
            locked = Study.objects.select_for_update().get(pk=study.pk)
            if locked.status != Study.Status.DRAFT:
                raise ImportFailed(["the study was opened during the import; nothing stored"])
            Image.objects.bulk_create(new_images)
            images = {image.name: image for image in Image.objects.filter(study=study)}
            captions = [
                Caption(
                    study=study,
                    image=images[name],
                    system=row.system,
                    raw_text=row.raw_text,
                    text=normalise(row.raw_text),
                    purpose=purpose,
                    prime_ratings=row.prime_ratings,
                    metrics=row.metrics,
                    truth=row.truth,
                    explanation=row.explanation,
                    line=row.line,
                )
                for row, name in zip(rows, resolved, strict=True)
            ]
            Caption.objects.bulk_create(captions, batch_size=1000)
    except BaseException:
        for path in placed:
            path.unlink(missing_ok=True)
        raise
    summary.captions = len(captions)
    summary.systems = sorted({row.system for row in rows})
    return summary


def _image_metadata(rows: list[_CaptionRow], resolved: list[str]) -> dict[str, tuple[str, str]]:
    """(alt text, source) per image: the first non-empty cell of each among its rows."""
    found: dict[str, tuple[str, str]] = defaultdict(lambda: ("", ""))
    for row, name in zip(rows, resolved, strict=True):
        alt, source = found[name]
        found[name] = (alt or row.description, source or row.source)
    return found


def _remove_upload_staging(folder: str) -> None:
    """Delete a job's upload folder, but only one inside VAR_DIR/uploads."""
    if not folder:
        return
    root = (Path(settings.VAR_DIR) / "uploads").resolve()
    path = Path(folder).resolve()
    if root in path.parents:
        shutil.rmtree(path, ignore_errors=True)
