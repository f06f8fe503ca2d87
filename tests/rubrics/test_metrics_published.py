"""rubrics.metrics and rubrics.metaeval against the published tables (../shared data).

- Survey of image-captioning evaluation, Table 4 (Flickr8k-Expert Kendall tau-c, THumB
  Pearson with the Total score, x100) and Table 5 (Pascal-50S pairwise accuracy, mean of
  five tie-breaking repetitions). The survey runs pycocoevalcap over a whole dataset at
  once, so CIDEr's documents are the candidates (``cider_documents="candidates"``);
  Flickr8k-Expert is one row per expert rating (3 per caption), the metric repeated,
  as in CLIPScore's evaluation script.
- THumB (Kasai et al. 2022), Table 2 right (system means, x100) and Table 4 (Pearson r
  with P, R and Total, without and with the Human system): sacrebleu sentence BLEU-4,
  rouge-score ROUGE-L, pycocoevalcap CIDEr computed per system, which is CIDEr's
  default here (one document per image, ``cider_documents="reference_sets"``); the four
  references exclude the Human caption.

Every number reproduces within the issue's tolerance; the values found are in
docs/protocol-choices.md ("Metric lab"). When one does not, the test fails with the
value found, not with a loosened tolerance.
"""

import json

import numpy as np
import pytest

from rubrics import metaeval, metrics
from tests.rubrics.conftest import SHARED_DIR

DATASETS = SHARED_DIR / "datasets"
SYSTEMS = ["Human", "VinVL-large", "VinVL-base", "Unified-VLP", "Up-Down"]
SURVEY = {
    "BLEU4": "BLEU-4 (pycocoevalcap)",
    "ROUGE": "ROUGE-L (pycocoevalcap)",
    "METEOR": "METEOR 1.5 (pycocoevalcap)",
    "CIDEr": "CIDEr (pycocoevalcap)",
}
THUMB = {
    "BLEU": "BLEU-4 (sacrebleu)",
    "ROUGE-L": "ROUGE-L (rouge-score)",
    "CIDEr": "CIDEr (pycocoevalcap)",
}

# Survey Table 4 (x100).
SURVEY_FLICKR8K_TAU_C = {"BLEU4": 30.8, "ROUGE": 32.3, "METEOR": 41.8, "CIDEr": 43.9}
SURVEY_THUMB_PEARSON = {"BLEU4": 10.4, "ROUGE": 18.7, "METEOR": 18.5, "CIDEr": 22.4}
# Survey Table 5 (HC, HI, HM, MM accuracy, %).
SURVEY_PASCAL = {
    "BLEU4": (59.8, 92.3, 85.6, 57.3),
    "ROUGE": (63.1, 95.2, 91.9, 60.3),
    "METEOR": (64.4, 97.6, 94.1, 65.3),
    "CIDEr": (65.6, 98.0, 90.9, 64.9),
}
PASCAL_CATEGORIES = ("HC", "HI", "HM", "MM")
# THumB Table 2, right (Human, VinVL-large, VinVL-base, Unified-VLP, Up-Down).
THUMB_TABLE_2 = {
    "BLEU": (26.2, 33.3, 32.3, 31.6, 28.4),
    "ROUGE-L": (50.4, 56.5, 55.9, 55.8, 52.2),
    "CIDEr": (111.5, 141.8, 138.4, 128.5, 110.7),
}
# THumB Table 4: w/o Human (P, R, Total), w/ Human (P, R, Total).
THUMB_TABLE_4 = {
    "CIDEr": ((0.27, 0.18, 0.33), (0.21, 0.11, 0.23)),
    "ROUGE-L": ((0.26, 0.17, 0.31), (0.18, 0.07, 0.18)),
    "BLEU": ((0.21, 0.13, 0.25), (0.15, 0.04, 0.13)),
}


def check(found: dict[str, float], expected: dict[str, float], tolerance: float, what: str):
    """Fail with every value found when any is off by more than ``tolerance``."""
    off = {k: (round(found[k], 3), v) for k, v in expected.items() if abs(found[k] - v) > tolerance}
    if off:
        pytest.fail(
            f"{what}: found vs published (tolerance {tolerance}): {off}; all found: "
            f"{ {k: round(v, 3) for k, v in found.items()} }"
        )


def require_datasets_and_java():
    if not DATASETS.is_dir():
        pytest.skip(f"reference datasets not found at {DATASETS} (../shared is absent)")
    if not metrics.java_available():
        from tests.rubrics.test_metrics import require_java

        require_java()


@pytest.fixture(scope="module")
def thumb():
    require_datasets_and_java()
    with (DATASETS / "thumb-1.0" / "mscoco_THumB-1.0.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    with (DATASETS / "thumb-1.0" / "mscoco_references.json").open(encoding="utf-8") as fh:
        refs = {o["seg_id"]: o["refs"] for o in map(json.loads, fh) if o}
    candidates = [r["hyp"] for r in rows]
    references = [refs[r["seg_id"]] for r in rows]
    scores = metrics.compute(candidates, references)
    survey_cider = metrics.compute(
        candidates, references, ["CIDEr (pycocoevalcap)"], cider_documents="candidates"
    )
    return {
        "rows": rows,
        "systems": np.array([r["SYS"] for r in rows]),
        "scores": scores,
        "survey_scores": {**scores, **survey_cider},
        "P": np.array([r["P"] for r in rows]),
        "R": np.array([r["R"] for r in rows]),
        "Total": np.array([r["human_score"] for r in rows]),
    }


def test_thumb_table_2_right(thumb):
    table = metaeval.system_table(thumb["systems"], thumb["scores"])
    for label, name in THUMB.items():
        scale = 100.0 if metrics.METRICS[name].percent else 1.0
        found = {s: table[s][name] * scale for s in SYSTEMS}
        check(found, dict(zip(SYSTEMS, THUMB_TABLE_2[label], strict=True)), 1.0, f"{label} Table 2")


@pytest.mark.parametrize("label", list(THUMB_TABLE_4))
def test_thumb_table_4(thumb, label):
    name = THUMB[label]
    without = thumb["systems"] != "Human"
    found, expected = {}, {}
    for subset, rows, published in (
        ("w/o Human", without, THUMB_TABLE_4[label][0]),
        ("w/ Human", np.ones_like(without), THUMB_TABLE_4[label][1]),
    ):
        for human, value in zip(("P", "R", "Total"), published, strict=True):
            got = metaeval.correlation(
                thumb["scores"][name][rows], thumb[human][rows], kind="pearson", resamples=0
            )
            found[f"{subset} {human}"] = got["value"]
            expected[f"{subset} {human}"] = value
    check(found, expected, 0.03, f"{label} Table 4")


def test_survey_table_4_thumb_pearson(thumb):
    found = {
        label: 100
        * metaeval.correlation(
            thumb["survey_scores"][name], thumb["Total"], kind="pearson", resamples=0
        )["value"]
        for label, name in SURVEY.items()
    }
    check(found, SURVEY_THUMB_PEARSON, 1.5, "survey Table 4, THumB")


def test_survey_table_4_flickr8k_expert_tau_c():
    require_datasets_and_java()
    with (DATASETS / "flickr8k-expert" / "flickr8k_expert.json").open(encoding="utf-8") as fh:
        data = json.load(fh)
    rows = [
        (j["caption"], v["ground_truth"], j["rating"])
        for v in data.values()
        for j in v["human_judgement"]
    ]
    assert len(rows) == 16992  # 5,664 captions x 3 expert ratings
    scores = metrics.compute(
        [r[0] for r in rows],
        [r[1] for r in rows],
        list(SURVEY.values()),
        cider_documents="candidates",
    )
    ratings = np.array([r[2] for r in rows])
    found = {
        label: 100
        * metaeval.correlation(scores[name], ratings, kind="kendall_tau_c", resamples=0)["value"]
        for label, name in SURVEY.items()
    }
    check(found, SURVEY_FLICKR8K_TAU_C, 1.5, "survey Table 4, Flickr8k-Expert")


def test_survey_table_5_pascal_50s():
    require_datasets_and_java()
    with (DATASETS / "pascal-50s" / "pascal_50s.json").open(encoding="utf-8") as fh:
        data = json.load(fh)
    meteor = "METEOR 1.5 (pycocoevalcap)"
    everything = [it for cat in PASCAL_CATEGORIES for it in data[cat]]
    # METEOR does not depend on the batch: one Java process for all four categories.
    all_meteor = metrics.compute(
        [c for it in everything for c in it["captions"]],
        [it["references"] for it in everything for _ in range(2)],
        [meteor],
    )[meteor]
    found, expected = {}, {}
    for k, cat in enumerate(PASCAL_CATEGORIES):
        items = data[cat]
        assert len(items) == 1000
        scores = metrics.compute(
            [c for it in items for c in it["captions"]],
            [it["references"] for it in items for _ in range(2)],
            [n for n in SURVEY.values() if n != meteor],
            cider_documents="candidates",
        )
        scores[meteor] = all_meteor[2000 * k : 2000 * (k + 1)]
        labels = np.array([it["label"] for it in items])
        for label, name in SURVEY.items():
            mean, std = metaeval.pairwise_accuracy(
                scores[name][0::2], scores[name][1::2], labels, repeats=5, seed=0
            )
            found[f"{label} {cat}"] = 100 * mean
            expected[f"{label} {cat}"] = SURVEY_PASCAL[label][k]
            assert 0 <= std < 0.02  # the survey's +- are 0.0 to 1.9 points
    check(found, expected, 3.0, "survey Table 5, Pascal-50S")
