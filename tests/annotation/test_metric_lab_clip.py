"""CLIP-S / RefCLIP-S in the metric lab from the researcher's ONNX encoders.

A tiny CLIP is built here (an image encoder that flattens and projects the pixels, a text
encoder that averages token embeddings, a word-level ``tokenizer.json``), dropped in a
folder named by ``CAPEVAL_CLIP_DIR``, and a study imported with ``import_study`` is scored
through the API; the stored scores equal the formula (w * max(cos, 0), w = 2.5, and the
harmonic mean with the best reference cosine) computed here with numpy from the same
weights. Without the folder the metrics are offered disabled and refused with a clear
message.
"""

from __future__ import annotations

import io
import json

import numpy as np
import onnx
import pytest
from django.core.management import call_command
from django.urls import reverse
from onnx import TensorProto, helper, numpy_helper
from PIL import Image as PILImage

from annotation.judges import clip
from annotation.models import Caption, Job, Study
from annotation.services.metrics_clip import CLIP_S, REFCLIP_S

pytestmark = pytest.mark.django_db
# Reading tokenizer.json needs the `clip` extra (tokenizers); without it, skip.
tokenizers = pytest.importorskip("tokenizers")

SIZE, DIM, CONTEXT = 8, 4, 77
RNG = np.random.default_rng(5)
W_IMG = RNG.normal(size=(3 * SIZE * SIZE, DIM)).astype(np.float32)
CAPTIONS = {  # image: [(system, caption)]
    "red.png": [("Human", "a red square"), ("Human", "red box"), ("Bot", "a blue dog")],
    "blue.png": [("Human", "a blue square"), ("Human", "blue box"), ("Bot", "a red cat")],
}
WORDS = sorted(
    {w for caps in CAPTIONS.values() for _, c in caps for w in c.split()} | set(clip.PREFIX.split())
)
VOCAB = {"[PAD]": 0, "[UNK]": 1} | {w: i + 2 for i, w in enumerate(WORDS)}
EMB = RNG.normal(size=(len(VOCAB), DIM)).astype(np.float32)


def _model(graph) -> bytes:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _write_clip(folder) -> None:
    folder.mkdir()
    (folder / "image.onnx").write_bytes(
        _model(
            helper.make_graph(
                [
                    helper.make_node("Flatten", ["pixels"], ["flat"], axis=1),
                    helper.make_node("MatMul", ["flat", "w"], ["embeds"]),
                ],
                "image",
                [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 3, SIZE, SIZE])],
                [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["n", DIM])],
                [numpy_helper.from_array(W_IMG, "w")],
            )
        )
    )
    (folder / "text.onnx").write_bytes(
        _model(
            helper.make_graph(
                [
                    helper.make_node("Gather", ["emb", "input_ids"], ["tokens"]),
                    helper.make_node("ReduceMean", ["tokens"], ["embeds"], axes=[1], keepdims=0),
                ],
                "text",
                [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", "length"])],
                [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["n", DIM])],
                [numpy_helper.from_array(EMB, "emb")],
            )
        )
    )
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))


def _png(colour) -> bytes:
    buf = io.BytesIO()
    pixels = np.zeros((12, 10, 3), dtype=np.uint8)
    pixels[...] = colour
    pixels[::3, ::2] = (17, 200, 90)  # a pattern, so the two images differ in more than hue
    PILImage.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def clip_study(researcher, tmp_path) -> Study:
    images = tmp_path / "images"
    images.mkdir()
    pngs = {"red.png": _png((220, 10, 10)), "blue.png": _png((10, 10, 220))}
    for name, data in pngs.items():
        (images / name).write_bytes(data)
    rows = ["image,system,caption"] + [
        f"{image},{system},{text}" for image, caps in CAPTIONS.items() for system, text in caps
    ]
    (tmp_path / "c.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    call_command(
        "import_study",
        "--create",
        "--name",
        "Clip",
        "--mode",
        "thumb",
        "--owner",
        researcher.username,
        "--images",
        str(images),
        "--captions",
        str(tmp_path / "c.csv"),
    )
    study = Study.objects.get(owner=researcher)
    study.pngs = pngs
    return study


def _embed_text(text: str) -> np.ndarray:
    ids = [VOCAB.get(w, 1) for w in (clip.PREFIX + text).split()]
    ids += [0] * (CONTEXT - len(ids))
    return EMB[ids].astype(np.float64).mean(axis=0)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_clip_s_and_refclip_s_equal_the_formula(
    clip_study, client, researcher, settings, tmp_path, django_capture_on_commit_callbacks
):
    _write_clip(tmp_path / "clip")
    settings.CAPEVAL_CLIP_DIR = str(tmp_path / "clip")
    settings.CAPEVAL_CLIP_IMAGE_SIZE = SIZE
    client.force_login(researcher)
    url = f"/api/studies/{clip_study.pk}/metrics/"
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            url, {"metrics": [CLIP_S, REFCLIP_S], "resamples": 0}, content_type="application/json"
        )
    assert started.status_code == 202, started.content
    report = client.get(url).json()["report"]
    assert report["computed"] == [CLIP_S, REFCLIP_S] and report["captions_scored"] == 6
    for caption in Caption.objects.filter(study=clip_study).select_related("image"):
        pixels = clip.preprocess(clip_study.pngs[caption.image.name], SIZE).reshape(-1)
        image = pixels.astype(np.float64) @ W_IMG.astype(np.float64)
        text = _embed_text(caption.raw_text)
        expected_clip = 2.5 * max(_cos(image, text), 0.0)
        # References: the other human captions of the image (none is imported).
        refs = [
            t for s, t in CAPTIONS[caption.image.name] if s == "Human" and t != caption.raw_text
        ]
        best = max(0.0, max(_cos(text, _embed_text(r)) for r in refs))
        expected_ref = (
            2 * expected_clip * best / (expected_clip + best) if expected_clip + best else 0.0
        )
        assert caption.metrics[CLIP_S] == pytest.approx(expected_clip, abs=1e-5)
        assert caption.metrics[REFCLIP_S] == pytest.approx(expected_ref, abs=1e-5)
    means = {row["system"]: row["means"][CLIP_S] for row in report["systems"]}
    bots = [c.metrics[CLIP_S] for c in Caption.objects.filter(study=clip_study, system="Bot")]
    assert means["Bot"] == pytest.approx(np.mean(bots))


def test_without_encoders_clip_is_offered_disabled_and_refused(
    clip_study, client, researcher, settings
):
    settings.CAPEVAL_CLIP_DIR = ""
    client.force_login(researcher)
    page = client.get(reverse("study_metrics", args=[clip_study.pk])).content.decode()
    assert f'value="{CLIP_S}" disabled aria-describedby="clip-help"' in page
    assert 'id="clip-help"' in page and "CAPEVAL_CLIP_DIR" in page
    refused = client.post(
        f"/api/studies/{clip_study.pk}/metrics/",
        {"metrics": [CLIP_S]},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert "set CAPEVAL_CLIP_DIR to a folder with image.onnx" in json.dumps(refused.json())
    assert not Job.objects.filter(study=clip_study).exists()


def test_a_broken_encoder_fails_the_job_with_a_clear_message(
    clip_study, client, researcher, settings, tmp_path, django_capture_on_commit_callbacks
):
    _write_clip(tmp_path / "clip")
    (tmp_path / "clip" / "image.onnx").write_bytes(b"not a model")
    settings.CAPEVAL_CLIP_DIR = str(tmp_path / "clip")
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            f"/api/studies/{clip_study.pk}/metrics/",
            {"metrics": [CLIP_S]},
            content_type="application/json",
        )
    job = Job.objects.get(study=clip_study)
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("The CLIP encoders in CAPEVAL_CLIP_DIR cannot be loaded")
    assert "Traceback" not in job.error
    assert all(CLIP_S not in c.metrics for c in Caption.objects.filter(study=clip_study))
