"""annotation.judges.clip: tiny ONNX encoders built here, checked against numpy.

The image encoder is a linear projection of the preprocessed pixels, the text encoder a
mean of token embeddings: small enough to compute by hand in numpy, real enough that the
plumbing (preprocessing, batching, input names, normalisation, the formulas) is exercised
through onnxruntime exactly as with exported CLIP weights.
"""

import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

from annotation.judges import clip

SIZE, DIM, VOCAB, LENGTH = 8, 4, 50, 6
RNG = np.random.default_rng(11)
W_IMG = RNG.normal(size=(3 * SIZE * SIZE, DIM)).astype(np.float32)
EMB = RNG.normal(size=(VOCAB, DIM)).astype(np.float32)


def image_encoder() -> bytes:
    graph = helper.make_graph(
        [
            helper.make_node("Flatten", ["pixels"], ["flat"], axis=1),
            helper.make_node("MatMul", ["flat", "w"], ["embeds"]),
        ],
        "image",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["n", DIM])],
        [numpy_helper.from_array(W_IMG, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def text_encoder(with_mask: bool = False) -> bytes:
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", LENGTH])]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["tokens"]),
        helper.make_node("ReduceMean", ["tokens"], ["embeds"], axes=[1], keepdims=0),
    ]
    if with_mask:
        # A model that takes a mask (as Hugging Face exports do); here it scales nothing.
        inputs.append(
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["n", LENGTH])
        )
        nodes.append(helper.make_node("Identity", ["attention_mask"], ["unused"]))
    graph = helper.make_graph(
        nodes,
        "text",
        inputs,
        [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["n", DIM])],
        [numpy_helper.from_array(EMB, "emb")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def tokenize(texts):
    """Word ids from the word's letters, padded with 0: deterministic and independent."""
    out = np.zeros((len(texts), LENGTH), dtype=np.int64)
    for i, text in enumerate(texts):
        ids = [1 + sum(map(ord, w)) % (VOCAB - 1) for w in text.lower().split()][:LENGTH]
        out[i, : len(ids)] = ids
    return out


def png(width, height, seed) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


IMAGES = [png(8, 8, 1), png(16, 10, 2), png(9, 20, 3), png(8, 8, 4), png(30, 12, 5)]
CAPTIONS = ["a dog runs", "two cats sleep", "a red car", "people on a beach", "a bowl of fruit"]
REFS = [
    ["a dog running", "the dog"],
    ["cats"],
    ["a car", "red car parked", "vehicle"],
    ["beach"],
    ["fruit"],
]


def scorer(**kwargs):
    return clip.ClipScorer(image_encoder(), text_encoder(), tokenize, image_size=SIZE, **kwargs)


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def numpy_embeddings():
    pixels = np.stack([clip.preprocess(im, SIZE) for im in IMAGES]).reshape(len(IMAGES), -1)
    img = pixels.astype(np.float64) @ W_IMG.astype(np.float64)
    ids = tokenize([clip.PREFIX + c for c in CAPTIONS])
    txt = EMB[ids].astype(np.float64).mean(axis=1)
    return img, txt


def test_preprocess_centre_crops_and_normalises_with_clips_mean_and_std():
    # 448 x 224: the shorter side is already 224, so the crop keeps exactly the middle half.
    arr = np.zeros((224, 448, 3), dtype=np.uint8)
    arr[:, :112] = (255, 0, 0)
    arr[:, 112:336] = (0, 200, 0)
    arr[:, 336:] = (0, 0, 255)
    out = clip.preprocess(Image.fromarray(arr), 224)
    assert out.shape == (3, 224, 224) and out.dtype == np.float32
    expected = (np.array([0, 200 / 255, 0]) - clip.CLIP_MEAN) / clip.CLIP_STD
    assert np.allclose(out, expected[:, None, None], atol=1e-6)
    # A constant image of any shape and mode (grey, RGBA) is the same colour after resizing.
    grey = Image.new("L", (5, 3), 128)
    assert np.allclose(
        clip.preprocess(grey, 8),
        ((128 / 255 - clip.CLIP_MEAN) / clip.CLIP_STD)[:, None, None],
        atol=1e-6,
    )
    assert clip.preprocess(Image.new("RGBA", (3, 40), (1, 2, 3, 4)), 8).shape == (3, 8, 8)


def test_clip_s_equals_numpy():
    img, txt = numpy_embeddings()
    cos = np.sum(unit(img) * unit(txt), axis=1)
    expected = 2.5 * np.maximum(cos, 0)
    found = scorer().clip_s(IMAGES, CAPTIONS)
    assert np.allclose(found, expected, atol=1e-5)
    assert (cos < 0).any() and (cos > 0).any(), "the fixture should exercise the floor at 0"
    assert np.all(found[cos < 0] == 0)


def test_refclip_s_equals_numpy():
    img, txt = numpy_embeddings()
    clip_s = 2.5 * np.maximum(np.sum(unit(img) * unit(txt), axis=1), 0)
    expected = []
    for i, refs in enumerate(REFS):
        ref_emb = EMB[tokenize([clip.PREFIX + r for r in refs])].astype(np.float64).mean(axis=1)
        best = max(float(np.max(unit(ref_emb) @ unit(txt[i : i + 1])[0])), 0.0)
        total = clip_s[i] + best
        expected.append(0.0 if total == 0 else 2 * clip_s[i] * best / total)
    found_clip, found_ref = scorer().refclip_s(IMAGES, CAPTIONS, REFS)
    assert np.allclose(found_clip, clip_s, atol=1e-5)
    assert np.allclose(found_ref, expected, atol=1e-5)


def test_formulas_by_hand():
    # cos = 0.6 -> CLIP-S 1.5; cos = -0.6 -> 0 (floored).
    images = np.array([[1.0, 0.0], [1.0, 0.0]])
    captions = np.array([[0.6, 0.8], [-0.6, 0.8]])
    assert np.allclose(clip.clip_s_from_embeddings(images, captions), [1.5, 0.0])
    # RefCLIP-S: harmonic mean of 1.5 and the best reference cosine 0.8 (of 0.8 and 0.6).
    refs = [np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[0.6, -0.8]])]
    out = clip.refclip_s_from_embeddings(np.array([1.5, 0.0]), captions, refs)
    assert out[0] == pytest.approx(2 * 1.5 * 0.8 / 2.3)
    assert out[1] == 0.0  # both parts 0 (reference cosine -1 floored): 0, not NaN


def test_batching_gives_the_same_scores_and_bounded_batches():
    small = scorer(batch_size=2)
    seen = []
    run = small._image.run

    def spy(outputs, feed):
        seen.append(next(iter(feed.values())).shape[0])
        return run(outputs, feed)

    small._image.run = spy
    assert np.allclose(
        small.clip_s(IMAGES, CAPTIONS), scorer(batch_size=64).clip_s(IMAGES, CAPTIONS)
    )
    assert seen == [2, 2, 1]


def test_text_model_with_attention_mask_and_from_folder(tmp_path):
    with_mask = clip.ClipScorer(
        image_encoder(), text_encoder(with_mask=True), tokenize, image_size=SIZE
    )
    assert np.allclose(with_mask.clip_s(IMAGES, CAPTIONS), scorer().clip_s(IMAGES, CAPTIONS))
    with pytest.raises(ValueError, match="image.onnx, text.onnx, tokenizer.json"):
        clip.ClipScorer.from_folder(tmp_path)


def test_mismatched_lengths_refused():
    s = scorer()
    with pytest.raises(ValueError, match="pair up"):
        s.clip_s(IMAGES, CAPTIONS[:2])
    with pytest.raises(ValueError, match="at least one reference"):
        s.refclip_s(IMAGES[:1], CAPTIONS[:1], [[]])


def test_from_folder_with_a_tokenizers_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    words = ["[PAD]", "a", "photo", "depicts", "dog", "runs", "cat", "[EOT]"]
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[PAD]")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single="$A [EOT]", special_tokens=[("[EOT]", 7)]
    )
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "image.onnx").write_bytes(image_encoder())
    (tmp_path / "text.onnx").write_bytes(text_encoder())
    s = clip.ClipScorer.from_folder(tmp_path, context_length=LENGTH, image_size=SIZE)
    ids = s.tokenizer(["A photo depicts a dog runs", "a dog runs a dog runs a dog", "cat"])
    # Cut to the context length with the end-of-text token kept last; padded with 0.
    assert ids.tolist() == [[0, 2, 3, 1, 4, 7], [1, 4, 5, 1, 4, 7], [6, 7, 0, 0, 0, 0]]
    assert s.clip_s(IMAGES[:2], CAPTIONS[:2]).shape == (2,)
