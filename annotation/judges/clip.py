"""CLIP-S and RefCLIP-S (Hessel et al., EMNLP 2021) from ONNX encoders the researcher supplies.

Why ONNX: onnxruntime is a light CPU runtime, so the default install, ``make test`` and CI
stay free of torch; nothing is downloaded at run time. The researcher exports a CLIP
model once, on a machine that has torch, and drops three files in a folder:

- ``image.onnx``: float32 pixels ``(n, 3, S, S)`` -> image embeddings ``(n, d)``;
- ``text.onnx``: int64 token ids ``(n, L)`` (and ``attention_mask`` if the model takes
  one) -> text embeddings ``(n, d)``;
- ``tokenizer.json``: the model's tokenizer in Hugging Face ``tokenizers`` format.

Exporting OpenAI's ViT-B/32 (the model of the CLIPScore paper) with open_clip::

    import open_clip, torch
    model, _, _ = open_clip.create_model_and_transforms("ViT-B-32", pretrained="openai")
    model.eval()

    class Image(torch.nn.Module):
        def forward(self, pixels):
            return model.encode_image(pixels)

    class Text(torch.nn.Module):
        def forward(self, ids):
            return model.encode_text(ids)

    axes = {"x": {0: "n"}, "y": {0: "n"}}
    torch.onnx.export(Image(), torch.randn(1, 3, 224, 224), "image.onnx",
                      input_names=["x"], output_names=["y"], dynamic_axes=axes)
    torch.onnx.export(Text(), open_clip.tokenize(["a photo"]), "text.onnx",
                      input_names=["x"], output_names=["y"], dynamic_axes=axes)
    # The same BPE vocabulary in tokenizers' format:
    from transformers import CLIPTokenizerFast
    CLIPTokenizerFast.from_pretrained("openai/clip-vit-base-patch32").save_pretrained("out")
    # -> out/tokenizer.json

then ``ClipScorer.from_folder(folder)`` (reading ``tokenizer.json`` needs the ``clip`` extra:
``pip install -e ".[clip]"``, which adds only the small ``tokenizers`` package). OpenAI's
text encoder pools at the end-of-text token (the largest id), so padding with 0 to
``context_length`` (77) is what it expects.

The computation, as the paper's reference code (``clipscore.py``):

- images: RGB, resized so the shorter side is ``S`` (bicubic), centre-cropped to S x S,
  scaled to [0, 1] and normalised with CLIP's mean and standard deviation;
- captions and references are prefixed with "A photo depicts " (the paper's prompt);
- embeddings are L2-normalised; CLIP-S = w * max(cos(image, caption), 0) with w = 2.5;
- RefCLIP-S = the harmonic mean of CLIP-S and max(max over references of
  cos(caption, reference), 0); 0 when both are 0.

Encoders run in batches of ``batch_size`` so memory stays bounded on large studies.
"""

import io
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime
from numpy.typing import NDArray
from PIL import Image

__all__ = [
    "CLIP_MEAN",
    "CLIP_STD",
    "W",
    "PREFIX",
    "preprocess",
    "clip_s_from_embeddings",
    "refclip_s_from_embeddings",
    "ClipScorer",
    "hf_tokenizer",
]

CLIP_MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
CLIP_STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)
W = 2.5
PREFIX = "A photo depicts "

Tokenizer = Callable[[Sequence[str]], NDArray[np.int64]]
ImageInput = Image.Image | bytes | str | Path


def _open(image: ImageInput) -> Image.Image:
    if isinstance(image, Image.Image):
        return image
    if isinstance(image, bytes):
        return Image.open(io.BytesIO(image))
    return Image.open(image)


def preprocess(image: ImageInput, size: int = 224) -> NDArray[np.float32]:
    """CLIP's preprocessing of one image: a float32 array of shape (3, size, size)."""
    img = _open(image).convert("RGB")
    w, h = img.size
    scale = size / min(w, h)
    new_w, new_h = max(size, round(w * scale)), max(size, round(h * scale))
    img = img.resize((new_w, new_h), Image.Resampling.BICUBIC)
    left, top = (new_w - size) // 2, (new_h - size) // 2
    img = img.crop((left, top, left + size, top + size))
    arr = np.asarray(img, dtype=np.float32) / 255.0
    return ((arr - CLIP_MEAN) / CLIP_STD).transpose(2, 0, 1)


def _normalise(x: NDArray[np.float32]) -> NDArray[np.float64]:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("an encoder returned a zero embedding; cosine is undefined")
    return x / norms


def clip_s_from_embeddings(images: NDArray, captions: NDArray, w: float = W) -> NDArray:
    """CLIP-S of row i of ``images`` with row i of ``captions`` (any scale; normalised here)."""
    cos = np.sum(_normalise(images) * _normalise(captions), axis=1)
    return w * np.maximum(cos, 0.0)


def refclip_s_from_embeddings(
    clip_s: NDArray, captions: NDArray, references: Sequence[NDArray]
) -> NDArray:
    """RefCLIP-S: harmonic mean of ``clip_s`` and the best reference cosine (floored at 0)."""
    cand = _normalise(captions)
    ref_best = np.array(
        [
            max(float(np.max(_normalise(refs) @ c)), 0.0)
            for c, refs in zip(cand, references, strict=True)
        ]
    )
    total = clip_s + ref_best
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 2 * clip_s * ref_best / total, 0.0)


class ClipScorer:
    """CLIP-S / RefCLIP-S with ONNX image and text encoders (see the module docstring)."""

    def __init__(
        self,
        image_encoder: str | Path | bytes,
        text_encoder: str | Path | bytes,
        tokenizer: Tokenizer,
        *,
        image_size: int = 224,
        batch_size: int = 64,
        prefix: str = PREFIX,
        w: float = W,
    ):
        if batch_size < 1 or image_size < 1:
            raise ValueError("batch_size and image_size must be positive")
        options = onnxruntime.SessionOptions()
        providers = ["CPUExecutionProvider"]
        self._image = onnxruntime.InferenceSession(
            _model_bytes(image_encoder), options, providers=providers
        )
        self._text = onnxruntime.InferenceSession(
            _model_bytes(text_encoder), options, providers=providers
        )
        self._text_inputs = [i.name for i in self._text.get_inputs()]
        self.tokenizer = tokenizer
        self.image_size = image_size
        self.batch_size = batch_size
        self.prefix = prefix
        self.w = w

    @classmethod
    def from_folder(cls, folder: str | Path, *, context_length: int = 77, **kwargs) -> "ClipScorer":
        """``image.onnx``, ``text.onnx`` and ``tokenizer.json`` from ``folder``."""
        folder = Path(folder)
        missing = [
            n for n in ("image.onnx", "text.onnx", "tokenizer.json") if not (folder / n).is_file()
        ]
        if missing:
            raise ValueError(f"the CLIP folder lacks {', '.join(missing)} (see the export recipe)")
        tokenizer = hf_tokenizer(folder / "tokenizer.json", context_length)
        return cls(folder / "image.onnx", folder / "text.onnx", tokenizer, **kwargs)

    def embed_images(self, images: Sequence[ImageInput]) -> NDArray[np.float64]:
        name = self._image.get_inputs()[0].name
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = np.stack(
                [preprocess(im, self.image_size) for im in images[start : start + self.batch_size]]
            )
            out.append(self._image.run(None, {name: batch})[0])
        return np.concatenate(out) if out else np.empty((0, 0))

    def embed_texts(self, texts: Sequence[str]) -> NDArray[np.float64]:
        out = []
        for start in range(0, len(texts), self.batch_size):
            ids = np.asarray(
                self.tokenizer([self.prefix + t for t in texts[start : start + self.batch_size]]),
                dtype=np.int64,
            )
            feed = {self._text_inputs[0]: ids}
            if "attention_mask" in self._text_inputs[1:]:
                feed["attention_mask"] = (ids != 0).astype(np.int64)
            out.append(self._text.run(None, feed)[0])
        return np.concatenate(out) if out else np.empty((0, 0))

    def clip_s(self, images: Sequence[ImageInput], captions: Sequence[str]) -> NDArray[np.float64]:
        """CLIP-S of each (image, caption) pair."""
        if len(images) != len(captions):
            raise ValueError("images and captions must pair up (same length)")
        return clip_s_from_embeddings(self.embed_images(images), self.embed_texts(captions), self.w)

    def refclip_s(
        self,
        images: Sequence[ImageInput],
        captions: Sequence[str],
        references: Sequence[Sequence[str]],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(CLIP-S, RefCLIP-S) of each caption, with its own list of reference captions."""
        if not len(images) == len(captions) == len(references):
            raise ValueError("images, captions and references must have the same length")
        if any(len(r) == 0 for r in references):
            raise ValueError("every caption needs at least one reference for RefCLIP-S")
        caption_emb = self.embed_texts(captions)
        clip = clip_s_from_embeddings(self.embed_images(images), caption_emb, self.w)
        # One batched pass over all references, then split per caption.
        flat = [r for refs in references for r in refs]
        ref_emb = self.embed_texts(flat)
        bounds = np.cumsum([0] + [len(r) for r in references])
        per_caption = [ref_emb[bounds[i] : bounds[i + 1]] for i in range(len(references))]
        return clip, refclip_s_from_embeddings(clip, caption_emb, per_caption)


def _model_bytes(model: str | Path | bytes) -> bytes | str:
    return model if isinstance(model, bytes) else str(model)


def hf_tokenizer(path: str | Path, context_length: int = 77) -> Tokenizer:
    """A tokenizer from a Hugging Face ``tokenizer.json``: ids padded with 0 or cut to length.

    A cut caption keeps its end-of-text token in the last position, as CLIP's own
    tokenizer does with ``truncate=True``.
    """
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError as exc:  # an optional dependency: only real CLIP weights need it
        raise ValueError("reading tokenizer.json needs the `tokenizers` package") from exc
    tok = HFTokenizer.from_file(str(path))

    def encode(texts: Sequence[str]) -> NDArray[np.int64]:
        out = np.zeros((len(texts), context_length), dtype=np.int64)
        for i, enc in enumerate(tok.encode_batch(list(texts))):
            ids = enc.ids
            if len(ids) > context_length:
                ids = ids[: context_length - 1] + ids[-1:]
            out[i, : len(ids)] = ids
        return out

    return encode
