"""Benchmark the metric lab's caption metrics (not a test; prints numbers).

    .venv/bin/python bench/metrics.py [--captions 100000] [--per-image 5] [--meteor 1000]

What it measures (issue 14): BLEU-1..4, ROUGE-L and CIDEr-D over ``--captions`` captions
with 5 references each, through the code path the platform runs
(``rubrics.metrics.compute``: one PTB tokenizer run, then the fast scorers), against
pycocoevalcap's own pipeline (its ``PTBTokenizer`` and its ``Bleu(4)``, ``Rouge`` and
``Cider`` scorers) on the same data in the same run. Target: >= 2,000 captions/s for the
three metrics together, tokenization included. The two must agree: the largest
absolute difference per metric is printed and the run exits 1 above 1e-9. METEOR's rate
(pycocoevalcap's wrapper, one Java process) is measured on ``--meteor`` captions and
reported with and without the JVM start. sacrebleu and rouge-score are timed too.

Data (no network; needs ../shared/datasets): real human reference groups -- the
Flickr8k-Expert ground truth (1,000 images x 5) and the Pascal-50S reference sets
(x 5) -- resampled into ``--captions / --per-image`` synthetic images. Each synthetic
image takes one real group and changes one random word of each reference to a random
word of the datasets' vocabulary (so texts repeat no more than in a real study); its
``--per-image`` candidates are captions of the same group with 1-3 words changed, as a
captioning system's outputs differ from the human ones. ``--per-image 5`` is a study
with five systems per image (the references of an image are shared by its captions);
``--per-image 1`` gives every caption its own reference set (no sharing at all).
Bounded: at most 200,000 captions, no network, one seed.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rubrics import metrics  # noqa: E402

DATASETS = ROOT.parent / "shared" / "datasets"
MAX_CAPTIONS = 200_000
COCO = [f"BLEU-{n} (pycocoevalcap)" for n in range(1, 5)] + [
    "ROUGE-L (pycocoevalcap)",
    "CIDEr (pycocoevalcap)",
]


def reference_groups() -> list[list[str]]:
    """Real groups of 5 human captions of one image (Flickr8k-Expert, Pascal-50S)."""
    with (DATASETS / "flickr8k-expert" / "flickr8k_expert.json").open(encoding="utf-8") as fh:
        groups = [v["ground_truth"] for v in json.load(fh).values()]
    with (DATASETS / "pascal-50s" / "pascal_50s.json").open(encoding="utf-8") as fh:
        pascal = json.load(fh)
    groups += [it["references"] for items in pascal.values() for it in items]
    unique = list(dict.fromkeys(tuple(g) for g in groups if len(g) == 5))
    return [list(g) for g in unique]


def change_words(caption: str, k: int, vocabulary: list[str], rng: random.Random) -> str:
    words = caption.split()
    for i in rng.sample(range(len(words)), min(k, len(words))):
        words[i] = rng.choice(vocabulary)
    return " ".join(words)


def synthesize(n: int, per_image: int, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    groups = reference_groups()
    vocabulary = sorted({w.lower() for g in groups for c in g for w in c.split() if w.isalpha()})
    candidates: list[str] = []
    references: list[list[str]] = []
    while len(candidates) < n:
        group = rng.choice(groups)
        refs = [change_words(r, 1, vocabulary, rng) for r in group]
        for _ in range(min(per_image, n - len(candidates))):
            candidates.append(change_words(rng.choice(group), rng.randint(1, 3), vocabulary, rng))
            references.append(refs)
    return candidates, references


def pycocoevalcap_pipeline(candidates, references):
    """pycocoevalcap's own tokenizer and scorers (coco-caption's evaluation, unchanged)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    times = {}
    start = time.perf_counter()
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({i: [{"caption": r} for r in rs] for i, rs in enumerate(references)})
    res = tokenizer.tokenize({i: [{"caption": c}] for i, c in enumerate(candidates)})
    times["tokenize"] = time.perf_counter() - start
    out = {}
    start = time.perf_counter()
    _, bleu = Bleu(4).compute_score(gts, res, verbose=0)
    times["BLEU"] = time.perf_counter() - start
    for n in range(4):
        out[f"BLEU-{n + 1} (pycocoevalcap)"] = np.asarray(bleu[n])
    start = time.perf_counter()
    out["ROUGE-L (pycocoevalcap)"] = Rouge().compute_score(gts, res)[1]
    times["ROUGE-L"] = time.perf_counter() - start
    start = time.perf_counter()
    out["CIDEr (pycocoevalcap)"] = Cider().compute_score(gts, res)[1]
    times["CIDEr"] = time.perf_counter() - start
    return out, times


def ours(candidates, references):
    stages = {}
    last = [time.perf_counter()]

    def progress(fraction, message):
        now = time.perf_counter()
        stages[message] = now - last[0]
        last[0] = now

    start = time.perf_counter()
    # One document per candidate: what pycocoevalcap does with the whole batch at once,
    # so the two give the same CIDEr and can be compared number for number.
    out = metrics.compute(
        candidates, references, COCO, progress=progress, cider_documents="candidates"
    )
    return out, time.perf_counter() - start, stages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captions", type=int, default=100_000)
    parser.add_argument("--per-image", type=int, default=5)
    parser.add_argument("--meteor", type=int, default=1000, help="captions for METEOR's rate")
    parser.add_argument("--others", type=int, default=20_000, help="captions for sacrebleu etc.")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    n = max(1, min(args.captions, MAX_CAPTIONS))
    if not DATASETS.is_dir():
        print(f"needs {DATASETS}", file=sys.stderr)
        return 2
    candidates, references = synthesize(n, max(1, args.per_image))
    texts = len(set(candidates) | {r for rs in references for r in rs})
    print(
        f"{n} captions, 5 references each, {args.per_image} captions per image, "
        f"{texts} distinct texts"
    )
    result = {"captions": n, "per_image": args.per_image, "distinct_texts": texts}

    got, seconds, stages = ours(candidates, references)
    rate = n / seconds
    print(
        f"rubrics.metrics.compute BLEU-1..4 + ROUGE-L + CIDEr-D: {seconds:.1f} s, "
        f"{rate:,.0f} captions/s (target >= 2,000)"
    )
    for stage, t in stages.items():
        print(f"    {t:7.2f} s  {stage}")
    result.update(seconds=seconds, rate=rate, stages=stages)

    status = 0 if rate >= 2000 else 1
    if not args.no_baseline:
        expected, times = pycocoevalcap_pipeline(candidates, references)
        base = sum(times.values())
        print(
            f"pycocoevalcap (PTBTokenizer, Bleu, Rouge, Cider): {base:.1f} s, "
            f"{n / base:,.0f} captions/s; ours is {base / seconds:.1f}x faster"
        )
        for stage, t in times.items():
            print(f"    {t:7.2f} s  {stage}")
        diffs = {k: float(np.max(np.abs(got[k] - expected[k]))) for k in COCO}
        print("largest |ours - pycocoevalcap|:", {k: f"{v:.1e}" for k, v in diffs.items()})
        result.update(
            baseline_seconds=base,
            baseline_stages=times,
            ratio=base / seconds,
            max_abs_difference=diffs,
        )
        if max(diffs.values()) > 1e-9:
            status = 1

    m = max(1, min(args.meteor, n))
    name = "METEOR 1.5 (pycocoevalcap)"
    start = time.perf_counter()
    metrics.compute(candidates[:1], references[:1], [name])
    startup = time.perf_counter() - start  # a JVM start and METEOR's tables, one caption
    start = time.perf_counter()
    metrics.compute(candidates[:m], references[:m], [name])
    total = time.perf_counter() - start
    print(
        f"METEOR 1.5: {m} captions in {total:.1f} s, {m / total:,.1f} captions/s including "
        f"the JVM start (a 1-caption run took {startup:.1f} s)"
    )
    result["meteor"] = {"captions": m, "seconds": total, "one_caption_seconds": startup}

    k = max(1, min(args.others, n))
    for other in ("BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)"):
        start = time.perf_counter()
        metrics.compute(candidates[:k], references[:k], [other])
        t = time.perf_counter() - start
        print(f"{other}: {k} captions in {t:.1f} s ({k / t:,.0f} captions/s)")
        result[other] = {"captions": k, "seconds": t}

    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
