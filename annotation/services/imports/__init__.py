"""Import a study's images and captions: validate everything first, then write all or nothing.

Images come from folders, zip archives or single files; captions from one file, a CSV or
COCO results JSON, and cite their images by file name. One import checks every image and
every row and collects every problem (with its line) before anything is written; when there
is any, it raises ``annotation.errors.ServiceError`` with the list in
``details["errors"]`` and stores nothing. Otherwise files and rows are stored together.

The parts, in the order an import runs through them:

- ``sources``: uploads, folders, zip archives (and their safety checks) and single files;
- ``images``: decode and check each image, make its display rendition, stage its files by
  content hash;
- ``csv_captions`` and ``coco_captions``: read a captions file into rows; ``captions``: what
  both share, and the image each row cites;
- ``store``: the all-or-nothing write and the refusal listing the problems.

The page queues a job (``import_request``) that the job runner runs (``import_run``); the
``import_study`` command and the demo call ``study_import`` directly.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from django.core.files.uploadedfile import UploadedFile

from annotation import storage
from annotation.errors import StorageUnavailable
from annotation.models import Caption, Image, Job, Study, User
from annotation.modes import get_mode
from annotation.modes.caption_columns import caption_columns, caption_purposes
from annotation.services.imports.captions import SYSTEM_MAX, CaptionRow, read_text, resolve_rows
from annotation.services.imports.coco_captions import read_coco
from annotation.services.imports.csv_captions import read_csv
from annotation.services.imports.images import check_against_study, stage_images
from annotation.services.imports.references import references_run
from annotation.services.imports.sources import (
    ImportTooLarge,
    save_upload,
    staged_uploads,
)
from annotation.services.imports.store import ImportSummary, import_refused, store
from annotation.services.jobs import job_create
from annotation.text import text_problem

logger = logging.getLogger(__name__)

__all__ = [
    "COCO_FORMAT",
    "CSV_FORMAT",
    "ImportSummary",
    "Progress",
    "import_request",
    "import_run",
    "study_import",
]

Progress = Callable[..., None]

CSV_FORMAT, COCO_FORMAT = "csv", "coco"


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


def import_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """Run an import job from its params; its staged uploads are removed either way.

    The uploads are in the media storage (``params["staging"]``, ``uploads/<random>``; the
    other params name files or folders under it): they are copied to this worker's scratch
    folder first, since the web node that took them may be another machine."""
    params = job.params
    staging = params.get("staging", "")
    try:
        with tempfile.TemporaryDirectory(prefix="capeval-upload-") as scratch:
            storage.fetch_under(staging, Path(scratch))

            def here(name: str) -> Path:
                return Path(scratch) / PurePosixPath(name).relative_to(staging)

            if params.get("references"):  # a references file (metrics page, API)
                local = {**params, "references": str(here(params["references"]))}
                return references_run(study=job.study, params=local)
            summary = study_import(
                study=job.study,
                image_sources=[here(p) for p in params.get("images", [])],
                captions=here(params["captions"]) if params.get("captions") else None,
                caption_format=params.get("format", CSV_FORMAT),
                system=params.get("system", ""),
                purpose=params.get("purpose", Caption.Purpose.STUDY),
                coco_images=here(params["coco_images"]) if params.get("coco_images") else None,
                progress=progress,
            )
    except StorageUnavailable as exc:
        raise storage.unavailable(IMPORT_STORE_DOWN) from exc
    finally:
        try:
            storage.remove_upload_folder(staging)
        except StorageUnavailable:  # raised above already, or the run's outcome stands
            logger.warning("uploads left in %s: the file store did not answer", staging)
    return {"result": summary.as_dict(), "message": summary.as_text()}


IMPORT_STORE_DOWN = (
    "The file store did not answer, so this import was stopped and nothing of it was kept. "
    "Try again in a minute: upload the files again; if it keeps failing, ask the "
    "administrator to check the object store."
)


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

    Raise ``ServiceError`` listing every bad image and row (with line numbers) in
    ``details["errors"]`` when anything is wrong; nothing is stored in that case. An import
    over ``CAPEVAL_MAX_IMPORT_PIXELS`` or ``CAPEVAL_MAX_IMPORT_ROWS`` stops where it passes
    the limit, and the message names it.
    """
    report = _Reporter(progress)
    errors: list[str] = []
    if study.status != Study.Status.DRAFT:
        raise import_refused(["the study is no longer a draft; import before opening it"])
    mode = get_mode(study.mode)
    purposes = caption_purposes(mode)
    if purpose not in purposes:
        raise import_refused([f"unknown purpose {purpose!r} (use {', '.join(purposes)})"])
    if caption_format not in (CSV_FORMAT, COCO_FORMAT):
        raise import_refused([f"unknown captions format {caption_format!r} (use csv or coco)"])
    if not image_sources and captions is None:
        raise import_refused(["give images, a captions file, or both"])

    system = system.strip()
    system_problem = text_problem(system, max_length=SYSTEM_MAX)
    if system_problem is not None:
        # Every row would carry it: one error for the file, and its rows are not read.
        errors.append(
            f"system {system_problem} (the system name given, or for COCO the captions "
            "file's name without extension)"
        )
    # This node's scratch folder: the checked files wait here, and only the store writes
    # them to the media storage (which may be another machine's object store).
    staging = Path(tempfile.mkdtemp(prefix="capeval-import-"))
    try:
        report(0, "Checking images")
        rows: list[CaptionRow] = []
        try:
            staged = stage_images(image_sources, staging, errors, report)
            if captions is not None and system_problem is None:
                report(60, "Checking captions")
                rows = _read_captions(
                    captions, caption_format, system, purpose, coco_images, errors, mode
                )
        except ImportTooLarge as exc:
            raise import_refused([*errors, str(exc)], headline=str(exc)) from None
        existing = {image.name: image for image in Image.objects.filter(study=study)}
        check_against_study(staged, existing, errors)
        resolved = resolve_rows(rows, set(staged) | set(existing), purpose, study, errors, report)
        if errors:
            raise import_refused(errors)
        report(90, "Storing")
        summary = store(study, staged, existing, rows, resolved, purpose, staging)
        if purpose == Caption.Purpose.STUDY:
            summary.notes = mode.caption_notes(study)
        return summary
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
    """Store the uploads in a staging folder of the media storage and queue an import job
    reading them.

    ``caption_format`` "" means: by the captions file's extension (``.json`` is COCO). For
    COCO results the system defaults to the file's name without extension.
    """
    staging = storage.new_upload_folder()
    params: dict[str, Any] = {"staging": staging, "images": [], "purpose": purpose}
    with staged_uploads(staging):
        if images_zip is not None:
            params["images"].append(save_upload(images_zip, f"{staging}/archives"))
        if image_files:
            for upload in image_files:
                save_upload(upload, f"{staging}/images")
            params["images"].append(f"{staging}/images")
        if captions is not None:
            params["captions"] = save_upload(captions, f"{staging}/captions")
            if not caption_format:
                is_json = Path(captions.name or "").suffix.lower() == ".json"
                caption_format = COCO_FORMAT if is_json else CSV_FORMAT
            if caption_format == COCO_FORMAT and not system.strip():
                system = Path(captions.name or "").stem
        if coco_images is not None:
            params["coco_images"] = save_upload(coco_images, f"{staging}/coco")
        params["format"] = caption_format or CSV_FORMAT
        params["system"] = system.strip()
        job = job_create(kind=Job.Kind.IMPORT, study=study, created_by=user, params=params)
    return job


def _read_captions(
    path: Path,
    caption_format: str,
    system: str,
    purpose: str,
    coco_images: Path | None,
    errors: list[str],
    mode: Any,
) -> list[CaptionRow]:
    """The good rows of the captions file, by format; every problem is added to ``errors``.

    A mode's own purposes are CSV only: their columns have no place in COCO JSON."""
    text = read_text(path, errors)
    if text is None:
        return []
    if caption_format == CSV_FORMAT:
        return read_csv(text, system, purpose, errors, caption_columns(mode))
    if purpose != Caption.Purpose.STUDY:
        errors.append(f"{purpose} sets are imported from CSV, not COCO JSON")
        return []
    mapping_text = read_text(coco_images, errors) if coco_images is not None else ""
    if mapping_text is None:
        return []
    return read_coco(text, mapping_text, system, errors)
