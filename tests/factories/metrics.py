"""Builders of the metric lab's tests: a small THumB-like release and its references, two
Pascal-50S pairs with a FLEUR file of them."""

import json
from pathlib import Path

from django.utils import timezone

from annotation.models import Job

# A THumB-like release: 4 images x (Human + 2 machines), P and R per caption.
IMAGES = {
    "1": (
        "img1.jpg",
        ["a dog runs across the green grass", "a brown dog running on grass in a park"],
    ),
    "2": ("img2.jpg", ["a man rides a red bicycle down the street", "a cyclist on a city road"]),
    "3": ("img3.jpg", ["two children play with a ball on the beach", "kids playing at the sea"]),
    "4": ("img4.jpg", ["a cat sleeps on a wooden chair", "a sleeping cat curled on a chair"]),
}
CAPTIONS = {  # seg_id: [(system, caption, P, R)]
    "1": [
        ("Human", "A dog running through the grass.", 5, 5),
        ("SysA", "A dog runs on the grass.", 5, 4),
        ("SysB", "A cat sitting on a table.", 1, 1),
    ],
    "2": [
        ("Human", "A man riding his bike on a street.", 5, 4),
        ("SysA", "A man rides a bicycle down the street.", 5, 5),
        ("SysB", "A person standing near a car.", 2, 2),
    ],
    "3": [
        ("Human", "Children playing ball at the beach.", 5, 5),
        ("SysA", "Two kids play on a beach.", 4, 3),
        ("SysB", "A group of people on the grass.", 2, 1),
    ],
    "4": [
        ("Human", "A cat asleep on a chair.", 5, 4),
        ("SysA", "A cat sleeping on a chair.", 5, 4),
        ("SysB", "A dog on a bed.", 1, 1),
    ],
}


def write_release(path: Path, captions=CAPTIONS) -> Path:
    lines = []
    for seg_id, rows in captions.items():
        for system, text, precision, recall in rows:
            lines.append(
                json.dumps(
                    {
                        "SYS": system,
                        "seg_id": seg_id,
                        "hyp": text,
                        "image": IMAGES[seg_id][0],
                        "P": precision,
                        "R": recall,
                        "Fl": 0.0,
                        "Con": 0.0,
                        "Inc": 0.0,
                    }
                )
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_references_csv(path: Path, images=IMAGES) -> Path:
    rows = ["image,reference"] + [
        f'{name},"{ref}"' for name, refs in images.values() for ref in refs
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_pascal_with_fleur(folder: Path) -> tuple[Path, Path]:
    """Two hand-made Pascal-50S pairs (``pascal_50s.json``) and a FLEUR pair file of them
    (``fleur_pascal.txt``) whose labels differ in one. HC: people (both files) prefer the
    dog, FLEUR scores it higher. MM: pascal_50s.json says people preferred the dog (label
    1), FLEUR's file, listing the pair the other way round, says "two cars" (its label 1
    is its second caption); FLEUR scores the dog higher. FLEUR's accuracy: with
    pascal_50s.json's labels HC 1, MM 1; with the file's HC 1, MM 0 (issue 47)."""
    refs = ["a dog runs on the grass", "the dog runs"]
    pairs = {
        "HC": [{"image": "VOC/a.jpg", "captions": ["a dog", "a plate"], "label": 0}],
        "MM": [{"image": "VOC/b.jpg", "captions": ["two cars", "a dog running"], "label": 1}],
    }
    for category in pairs.values():
        category[0]["references"] = refs
    pascal = folder / "pascal_50s.json"
    pascal.write_text(json.dumps(pairs), encoding="utf-8")
    fleur = folder / "fleur_pascal.txt"
    fleur.write_text(
        "".join(
            f"image file : VOC/{image}.jpg\nlabel : {label}\n\n"
            f"caption : {one}\nmodel score : 0.5\nour score : {first}\n\n"
            f"caption : {two}\nmodel score : 0.5\nour score : {second}\n\n"
            for image, label, one, first, two, second in (
                ("a", 0, "a dog", 0.9, "a plate", 0.1),
                ("b", 1, "a dog running", 0.8, "two cars", 0.2),
            )
        )
        + "true count : 1\ntie count : 0\n",
        encoding="utf-8",
    )
    return pascal, fleur


# A finished metrics job written as the metrics task stores it, with a dozen metrics and
# four systems: the page's layout at its widest (issue 26, row 12), without computing.
WIDE_METRICS = (
    "BLEU-4 (sacrebleu)",
    "ROUGE-L (rouge-score)",
    "BLEU-1",
    "BLEU-2",
    "BLEU-3",
    "BLEU-4",
    "METEOR",
    "ROUGE-L",
    "CIDEr",
    "SPICE",
    "CLIP-S (ONNX)",
    "RefCLIP-S (ONNX)",
)
WIDE_SYSTEMS = ("BadBot", "GoodBot", "Human", "MidBot")
GAMMAS = (0.0, 0.25, 0.5, 0.75, 1.0)


def wide_metrics_result() -> dict:
    """The stored result: every mean and curve a different, recognisable number."""
    names = list(WIDE_METRICS)
    return {
        "computed": names,
        "metrics": names,
        "metric_info": {name: {"percent": name != "BLEU-4 (sacrebleu)"} for name in names},
        "captions_scored": 32,
        "references": "the imported references",
        "systems": [
            {
                "system": system,
                "captions": 8,
                "means": {name: 0.1 * (s + 1) + 0.001 * m for m, name in enumerate(names)},
            }
            for s, system in enumerate(WIDE_SYSTEMS)
        ],
        "correlations": {},
        "pairwise": {},
        "robustness": {
            "gammas": list(GAMMAS),
            "captions": 8,
            "curves": {
                kind: {
                    name: {
                        "normalised": [1.0 - (k + 1) * 0.1 * g for g in GAMMAS],
                        "area": 1.0 - (k + 1) * 0.05,
                    }
                    for name in names
                }
                for k, kind in enumerate(("T_RC", "T_WP", "T_RW"))
            },
        },
    }


def finished_metrics_job(study, user):
    return Job.objects.create(
        kind=Job.Kind.METRICS,
        study=study,
        created_by=user,
        status=Job.Status.DONE,
        progress=100,
        finished_at=timezone.now(),
        result=wide_metrics_result(),
    )
