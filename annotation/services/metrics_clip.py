"""CLIP-S and RefCLIP-S in the metric lab, from the ONNX encoders the researcher configures.

``CAPEVAL_CLIP_DIR`` names a folder with ``image.onnx``, ``text.onnx`` and
``tokenizer.json`` (``annotation/judges/clip.py`` says how to export them; docs/metrics.md
how to drop them in); ``CAPEVAL_CLIP_IMAGE_SIZE`` the encoder's input side (224 for
ViT-B/32). Nothing is downloaded from the internet: without the files the two metrics are
not offered. Captions are scored with their study image's original file; RefCLIP-S also
with the caption's references (the metric lab's, ``services/metrics.py:caption_references``).

Without ``CAPEVAL_CLIP_DIR``, the three files may be stored under ``clip/`` in the media
storage (``annotation/storage.py``; in a deployment of several nodes, the bucket, where an
operator copies them once, e.g. with ``aws s3 cp``), so that no node needs them on its disk
(issue 41): a web node offers the metrics when the store holds them, and the job copies
them into a scratch folder of its own (``tempfile``) for onnxruntime, as an import copies
its uploads, and removes it once the encoders are loaded. The media view never serves
``clip/`` (``selectors.media_file_kind``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from annotation import storage
from annotation.errors import ServiceError
from annotation.judges import clip
from annotation.models import Image

# onnxruntime's own errors derive from Exception only, so they are named here.
ONNX_ERRORS = (
    OSError,
    ValueError,
    RuntimeError,
    ort_errors.Fail,
    ort_errors.InvalidArgument,
    ort_errors.InvalidGraph,
    ort_errors.InvalidProtobuf,
    ort_errors.NoSuchFile,
    ort_errors.RuntimeException,
)

CLIP_S, REFCLIP_S = "CLIP-S (ONNX)", "RefCLIP-S (ONNX)"
CLIP_NAMES = (CLIP_S, REFCLIP_S)
FILES = ("image.onnx", "text.onnx", "tokenizer.json")
INFO = {"implementation": "onnxruntime (CAPEVAL_CLIP_DIR)", "tokenizer": "tokenizer.json"}
#: The media storage's folder of the encoders when ``CAPEVAL_CLIP_DIR`` is not set.
STORED = "clip"


def clip_folder() -> Path | str | None:
    """Where the three files are: the configured folder (a ``Path``) when it holds them, else
    the media storage's folder ``STORED`` (its name) when that holds them, else None."""
    folder = getattr(settings, "CAPEVAL_CLIP_DIR", "")
    if folder:
        path = Path(folder)
        return path if all((path / name).is_file() for name in FILES) else None
    return STORED if all(storage.exists(f"{STORED}/{name}") for name in FILES) else None


def _scorer(folder: Path | str) -> clip.ClipScorer:
    """The scorer from the encoders in ``folder`` (see ``clip_folder``)."""
    size = int(getattr(settings, "CAPEVAL_CLIP_IMAGE_SIZE", 224))
    if isinstance(folder, Path):
        return clip.ClipScorer.from_folder(folder, image_size=size)
    # onnxruntime and tokenizers read files: a scratch copy of the stored ones, dropped once
    # both sessions and the tokenizer are loaded (they keep the models in memory).
    with tempfile.TemporaryDirectory(prefix="capeval-clip-") as scratch:
        storage.fetch_under(folder, Path(scratch))
        return clip.ClipScorer.from_folder(scratch, image_size=size)


def clip_refusal(names: Sequence[str]) -> str | None:
    """Why the CLIP metrics among ``names`` cannot run here, or None."""
    wanted = [n for n in names if n in CLIP_NAMES]
    if not wanted or clip_folder() is not None:
        return None
    return (
        f"{', '.join(wanted)} need CLIP encoders: set CAPEVAL_CLIP_DIR to a folder with "
        f"{', '.join(FILES)}, or store the three under {STORED}/ in the media storage "
        "(docs/metrics.md, 'CLIP-S')."
    )


def clip_scores(
    captions: list[dict[str, Any]],
    refs: list[list[str]],
    names: Sequence[str],
    progress: Callable[[float, str], None],
) -> dict[str, np.ndarray]:
    """CLIP-S / RefCLIP-S per caption (NaN where its image has no file: a dataset import)."""
    folder = clip_folder()
    if folder is None:
        raise ServiceError(clip_refusal(names) or "CLIP is not configured.", field="metrics")
    try:
        scorer = _scorer(folder)
    except ONNX_ERRORS as exc:  # a bad export: the job says so instead of failing as a bug
        where = "CAPEVAL_CLIP_DIR" if isinstance(folder, Path) else f"the storage's {STORED}/"
        raise ServiceError(
            f"The CLIP encoders in {where} cannot be loaded: "
            f"{type(exc).__name__} (re-export them as docs/metrics.md says)."
        ) from None
    files = dict(
        Image.objects.filter(pk__in={c["image_id"] for c in captions}).values_list("id", "file")
    )
    keep = [i for i, c in enumerate(captions) if files.get(c["image_id"])]
    out = {name: np.full(len(captions), np.nan) for name in names if name in CLIP_NAMES}
    if not keep:
        raise ServiceError("CLIP-S needs the study's images; none of its captions has one.")
    progress(0.1, f"CLIP on {len(keep)} captions")
    images = StoredImages([files[captions[i]["image_id"]] for i in keep])
    texts = [captions[i]["text"] for i in keep]
    try:
        plain, with_refs = scorer.refclip_s(images, texts, [refs[i] for i in keep])
    except ONNX_ERRORS as exc:  # an unreadable image, encoders that do not fit together
        raise ServiceError(f"CLIP-S could not be computed: {type(exc).__name__}: {exc}") from None
    for name, values in ((CLIP_S, plain), (REFCLIP_S, with_refs)):
        if name in out:
            out[name][keep] = values
    progress(1.0, "CLIP done")
    return out


class StoredImages(Sequence[bytes]):
    """The originals' bytes, read from the media storage (``annotation/storage.py``) when
    the encoder asks for them, a batch at a time: a study's thousands of originals are never
    all in memory, and an object store serves them as well as the local folder."""

    def __init__(self, names: list[str]):
        self.names = names

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [storage.read_bytes(name) for name in self.names[index]]
        return storage.read_bytes(self.names[index])
