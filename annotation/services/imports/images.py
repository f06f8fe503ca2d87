"""Check every image fully and stage its files, stored once per content hash.

Only JPEG, PNG and WebP are accepted (Pillow is told to try those formats only), every
image is decoded fully so a truncated file is caught, and an image whose declared size
exceeds ``CAPEVAL_MAX_IMAGE_PIXELS`` is refused before any pixel is decoded. Identical bytes
are checked once, and bytes already stored and checked by an earlier import are not checked
again: their files are reused.

One import decodes at most ``CAPEVAL_MAX_IMPORT_PIXELS`` pixels in all: each image's size
is read from its header and added up before it is decoded, and the import stops at the
first image that would pass the limit (``ImportTooLarge``). A zip of tiny 1-bit PNGs of
40 Mpx each costs a third of a second of CPU per image and 5 kB of upload.

An image's name (its file name without folders) is checked like every text field
(``annotation.text``): one line, no control or bidirectional characters, at most the
255 characters of ``Image.name``.

Storage
-------
Originals are stored once per content hash as ``images/ab/<sha256>.<ext>`` in the media
storage (``annotation/storage.py``) and renditions for display as
``display/ab/<sha256>-<side>.webp`` (longest side at most ``CAPEVAL_DISPLAY_MAX_SIDE``, EXIF
orientation applied); a file already present is reused. New files are written to the
import's staging folder (on this node) here; the store writes them to the storage.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from PIL import Image as PILImage
from PIL import ImageOps, UnidentifiedImageError

from annotation import storage
from annotation.models import Image
from annotation.services.imports.sources import BadImage, ImportTooLarge, members
from annotation.text import text_problem

ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP")
FORMAT_EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}
IMAGE_NAME_MAX = Image._meta.get_field("name").max_length


class _OverBudget(Exception):
    """The image's header declares more pixels than the import has left to decode."""

    def __init__(self, pixels: int):
        super().__init__(pixels)
        self.pixels = pixels


def megapixels(pixels: int) -> str:
    """``80``, ``2,000``, ``40.5`` (Mpx) for messages."""
    return f"{pixels / 1e6:,.1f}".removesuffix(".0")


@dataclass
class StagedImage:
    """A checked image: the fields of its ``Image`` row that come from the file itself.

    ``file`` and ``display`` are names in the media storage (and paths relative to the
    staging folder while new files wait there).
    """

    name: str
    sha256: str
    file: str
    display: str
    width: int
    height: int
    format: str

    @classmethod
    def of(cls, image: Image) -> StagedImage:
        """The same fields read from a stored ``Image`` row."""
        return cls(**{f.name: getattr(image, f.name) for f in fields(cls)})

    def row_fields(self) -> dict[str, Any]:
        """Keyword arguments for the ``Image`` row of this image."""
        return asdict(self)


def stage_images(
    sources: Sequence[Path],
    staging: Path,
    errors: list[str],
    report: Callable[[float, str], None],
) -> dict[str, StagedImage]:
    """Every image of ``sources`` by name, checked, with new files written under ``staging``.

    Each problem (a bad or duplicate name, a file that is no image, a damaged or oversized
    one) is added to ``errors`` and the image left out; progress runs from 0 to 60 percent.
    ``ImportTooLarge`` when the images would decode more pixels than one import may.
    """
    candidates = [m for source in sources for m in members(source, errors)]
    staged: dict[str, StagedImage] = {}
    processed: dict[str, StagedImage] = {}  # by sha256: identical bytes are processed once
    seen_labels: dict[str, str] = {}
    limit = settings.CAPEVAL_MAX_IMPORT_PIXELS
    decoded = 0  # pixels of the images decoded so far (reused files are not decoded)
    for index, member in enumerate(candidates):
        report(
            60 * index / max(1, len(candidates)),
            f"Checking image {index + 1} of {len(candidates)}",
        )
        problem = text_problem(member.name, max_length=IMAGE_NAME_MAX)
        if problem is not None:
            errors.append(f"{member.label}: image name {problem}")
            continue
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
                done = _process_image(data, sha, staging, pixels_left=limit - decoded)
                decoded += done.width * done.height
            processed[sha] = done
        except BadImage as exc:
            errors.append(f"{member.label}: {exc}")
            continue
        except _OverBudget as over:
            raise ImportTooLarge(
                f"{member.label}: image {index + 1} of {len(candidates)} would bring the "
                f"pixels this import decodes to {megapixels(decoded + over.pixels)} Mpx; the "
                f"limit per import is {megapixels(limit)} Mpx (CAPEVAL_MAX_IMPORT_PIXELS). "
                "Import the images in several parts."
            ) from None
        staged[member.name] = replace(done, name=member.name)
    return staged


def check_against_study(
    staged: dict[str, StagedImage], existing: dict[str, Image], errors: list[str]
) -> None:
    """An image may be imported again under its name, but not different bytes under it."""
    for name, image in staged.items():
        old = existing.get(name)
        if old is not None and old.sha256 != image.sha256:
            errors.append(
                f"{name}: the study already has a different image of this name; rename one"
            )


def _process_image(data: bytes, sha: str, staging: Path, *, pixels_left: int) -> StagedImage:
    """Verify one image fully and write its original and display rendition to staging.

    ``_OverBudget`` before any pixel is decoded when its header declares more than
    ``pixels_left``.
    """
    max_pixels = settings.CAPEVAL_MAX_IMAGE_PIXELS
    with warnings.catch_warnings():
        # Pillow only warns between its limit and twice that; make the warning an error.
        warnings.simplefilter("error", PILImage.DecompressionBombWarning)
        try:
            img = PILImage.open(io.BytesIO(data), formats=list(ACCEPTED_FORMATS))
        except UnidentifiedImageError as exc:
            if b"<svg" in data[:4096].lower():
                raise BadImage(
                    "SVG images are not accepted; convert it to PNG, JPEG or WebP"
                ) from exc
            raise BadImage("not a JPEG, PNG or WebP image (or a damaged one)") from exc
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
            raise BadImage(
                f"declares too many pixels; the limit is {max_pixels / 1e6:g} Mpx ({exc})"
            ) from exc
        except (OSError, SyntaxError, ValueError) as exc:
            raise BadImage(f"cannot be read as an image ({exc})") from exc
        width, height = img.size
        if width * height > max_pixels:
            raise BadImage(
                f"declares {width} x {height} pixels ({width * height / 1e6:.1f} Mpx); "
                f"the limit is {max_pixels / 1e6:g} Mpx"
            )
        if width == 0 or height == 0:
            raise BadImage("has no pixels")
        if width * height > pixels_left:
            raise _OverBudget(width * height)
        try:
            img.load()
            oriented = ImageOps.exif_transpose(img)
            display = _rendition(oriented)
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
            raise BadImage(f"declares too many pixels ({exc})") from exc
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise BadImage(f"is truncated or damaged ({exc})") from exc
    fmt = img.format or ""
    file_rel = f"images/{sha[:2]}/{sha}.{FORMAT_EXTENSIONS[fmt]}"
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    display_rel = f"display/{sha[:2]}/{sha}-{side}.webp"
    _write(staging / file_rel, data)
    buffer = io.BytesIO()
    # Renditions go to crowd workers and into exports: pixels only. Pillow's WebP encoder
    # writes EXIF (GPS), XMP or an ICC profile only when given them; say "none" outright so
    # no default or later edit carries them over from ``display.info``. The ICC profile goes
    # too (it can name the device); browsers show untagged images as sRGB, which most are.
    display.save(buffer, "WEBP", quality=85, method=4, exif=b"", xmp=b"", icc_profile=None)
    _write(staging / display_rel, buffer.getvalue())
    return StagedImage(
        name="",
        sha256=sha,
        file=file_rel,
        display=display_rel,
        width=oriented.width,
        height=oriented.height,
        format=fmt,
    )


def _already_stored(sha: str) -> StagedImage | None:
    """An image with these exact bytes was verified and stored before: reuse its files."""
    side = settings.CAPEVAL_DISPLAY_MAX_SIDE
    known = Image.objects.filter(sha256=sha, display__endswith=f"-{side}.webp").first()
    if known is None or not storage.exists(known.file) or not storage.exists(known.display):
        return None
    return StagedImage.of(known)


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
