"""rubrics.metrics: hand-worked scores, and equality with the libraries' own scorers.

The fast BLEU / ROUGE-L / CIDEr-D of ``rubrics._metric_fast`` must give pycocoevalcap's
numbers (to 1e-9) on the same captions; the sacrebleu and rouge-score paths must give
those packages' own numbers. Tests that need Java (the PTB tokenizer, METEOR) skip
without it on a developer's machine and fail on CI (``tests.factories.core.skip_or_fail``
style, without importing Django).
"""

import os
import random

import numpy as np
import pytest

from rubrics import _metric_fast as fast
from rubrics import metrics

CANDIDATES = [
    "A man riding a horse on the beach.",
    "Two dogs play in the snow",
    "a dog",
    "The cat sat on the mat.",
    "A red double-decker bus drives down a busy London street!",
    "a a a a a a",
    "Several people, some with umbrellas, walk past the shop's window.",
    "A plate of food with broccoli and rice",
    "...",  # empty after the PTB tokenizer drops punctuation
]
REFERENCES = [
    ["A man rides a horse.", "a person on a horse at the beach", "Man on horse!"],
    ["Two dogs playing in snow.", "dogs in the snow"],
    ["a cat", "a black dog runs"],
    ["The cat is on the mat.", "A cat sitting on a mat"],
    ["A red bus on a street in London.", "A double decker bus driving on a city street.", "a bus"],
    ["a man", "a a dog"],
    ["People with umbrellas walking by a store.", "a crowd walks on the sidewalk in the rain"],
    ["A plate with broccoli, rice and chicken.", "food on a white plate"],
    ["a dog", "a cat"],
]


def require_java():
    if not metrics.java_available():
        reason = "Java is not installed (METEOR and the PTB tokenizer need it)"
        if os.environ.get("CAPEVAL_REQUIRE_SERVICES", "") == "1":
            pytest.fail(f"{reason} (CAPEVAL_REQUIRE_SERVICES=1 makes this an error)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def coco_reference():
    """pycocoevalcap's own pipeline: its PTBTokenizer, then its scorers."""
    require_java()
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    gts = {i: [{"caption": r} for r in rs] for i, rs in enumerate(REFERENCES)}
    res = {i: [{"caption": c}] for i, c in enumerate(CANDIDATES)}
    tokenizer = PTBTokenizer()
    gts_tok, res_tok = tokenizer.tokenize(gts), tokenizer.tokenize(res)
    _, bleu = Bleu(4).compute_score(gts_tok, res_tok, verbose=0)
    _, rouge = Rouge().compute_score(gts_tok, res_tok)
    _, cider = Cider().compute_score(gts_tok, res_tok)
    out = {f"BLEU-{n} (pycocoevalcap)": np.asarray(bleu[n - 1]) for n in range(1, 5)}
    out["ROUGE-L (pycocoevalcap)"] = np.asarray(rouge)
    out["CIDEr (pycocoevalcap)"] = np.asarray(cider)
    out["tokens"] = (gts_tok, res_tok)
    return out


COCO_FAST = [f"BLEU-{n} (pycocoevalcap)" for n in range(1, 5)] + [
    "ROUGE-L (pycocoevalcap)",
    "CIDEr (pycocoevalcap)",
]


def test_metric_names_say_implementation_and_java():
    assert set(metrics.METRICS) == {
        "BLEU-1 (pycocoevalcap)",
        "BLEU-2 (pycocoevalcap)",
        "BLEU-3 (pycocoevalcap)",
        "BLEU-4 (pycocoevalcap)",
        "BLEU-4 (sacrebleu)",
        "ROUGE-L (pycocoevalcap)",
        "ROUGE-L (rouge-score)",
        "METEOR 1.5 (pycocoevalcap)",
        "CIDEr (pycocoevalcap)",
    }
    for name, spec in metrics.METRICS.items():
        assert spec.name == name and spec.implementation in name
        assert spec.needs_java == (spec.implementation == "pycocoevalcap")
    assert metrics.METRICS["CIDEr (pycocoevalcap)"].corpus_dependent


def test_ptb_tokenize_equals_pycocoevalcap(coco_reference):
    gts_tok, res_tok = coco_reference["tokens"]
    assert metrics.ptb_tokenize(CANDIDATES) == [res_tok[i][0] for i in range(len(CANDIDATES))]
    flat = [r for rs in REFERENCES for r in rs]
    assert metrics.ptb_tokenize(flat) == [t for i in range(len(REFERENCES)) for t in gts_tok[i]]


@pytest.mark.parametrize("name", COCO_FAST)
def test_fast_scores_equal_pycocoevalcap(coco_reference, name):
    got = metrics.compute(CANDIDATES, REFERENCES, [name])[name]
    np.testing.assert_allclose(got, coco_reference[name], rtol=0, atol=1e-9)


def test_cider_documents_candidates_is_pycocoevalcap_on_the_whole_batch(coco_reference):
    # Images 0-2 each scored for two candidates (two "systems"): pycocoevalcap handed all
    # six at once counts every reference set twice and takes N = 6.
    from pycocoevalcap.cider.cider import Cider

    gts_tok, res_tok = coco_reference["tokens"]
    gts = {i: gts_tok[i % 3] for i in range(6)}
    res = {i: res_tok[i] for i in range(6)}
    _, expected = Cider().compute_score(gts, res)
    name = "CIDEr (pycocoevalcap)"
    got = metrics.compute(
        CANDIDATES[:6], [REFERENCES[i % 3] for i in range(6)], [name], cider_documents="candidates"
    )
    np.testing.assert_allclose(got[name], expected, rtol=0, atol=1e-9)


def test_cider_documents_reference_sets_is_pycocoevalcap_per_system(coco_reference):
    # The default counts each image's references once (N = 3 images): the same numbers as
    # pycocoevalcap called once per system with one caption per image (THumB's Table 2),
    # even when the references come in another order.
    from pycocoevalcap.cider.cider import Cider

    gts_tok, res_tok = coco_reference["tokens"]
    gts = {i: gts_tok[i] for i in range(3)}
    expected = np.concatenate(
        [Cider().compute_score(gts, {i: res_tok[i + 3 * s] for i in range(3)})[1] for s in range(2)]
    )
    refs = [REFERENCES[i % 3] if i < 3 else REFERENCES[i % 3][::-1] for i in range(6)]
    name = "CIDEr (pycocoevalcap)"
    got = metrics.compute(CANDIDATES[:6], refs, [name])
    np.testing.assert_allclose(got[name], expected, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="cider_documents must be"):
        metrics.compute(CANDIDATES[:1], REFERENCES[:1], [name], cider_documents="images")


def test_meteor_equals_pycocoevalcap(coco_reference):
    from pycocoevalcap.meteor.meteor import Meteor

    gts_tok, res_tok = coco_reference["tokens"]
    keep = [i for i in range(len(CANDIDATES)) if res_tok[i][0]]  # METEOR needs a word
    _, expected = Meteor().compute_score(
        {i: gts_tok[i] for i in keep}, {i: res_tok[i] for i in keep}
    )
    name = "METEOR 1.5 (pycocoevalcap)"
    got = metrics.compute([CANDIDATES[i] for i in keep], [REFERENCES[i] for i in keep], [name])[
        name
    ]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert got.min() > 0 and got.max() < 1


def test_sacrebleu_and_rouge_score_equal_their_packages():
    from rouge_score.rouge_scorer import RougeScorer
    from sacrebleu.metrics import BLEU

    got = metrics.compute(CANDIDATES, REFERENCES, ["BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)"])
    bleu = BLEU(effective_order=True)
    expected_bleu = [
        bleu.sentence_score(c, r).score for c, r in zip(CANDIDATES, REFERENCES, strict=True)
    ]
    np.testing.assert_allclose(got["BLEU-4 (sacrebleu)"], expected_bleu, rtol=0, atol=1e-12)
    scorer = RougeScorer(["rougeL"])
    expected_rouge = [
        scorer.score_multi(r, c)["rougeL"].fmeasure
        for c, r in zip(CANDIDATES, REFERENCES, strict=True)
    ]
    np.testing.assert_allclose(got["ROUGE-L (rouge-score)"], expected_rouge, rtol=0, atol=1e-12)
    # Reference sets shared by several candidates (each set's n-grams are counted once).
    shared = [REFERENCES[i % 3] for i in range(len(CANDIDATES))]
    got = metrics.compute(CANDIDATES, shared, ["BLEU-4 (sacrebleu)"])["BLEU-4 (sacrebleu)"]
    expected = [bleu.sentence_score(c, r).score for c, r in zip(CANDIDATES, shared, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_hand_worked_bleu_and_rouge():
    # "the cat sat on the mat" vs "the cat is on the mat" (both 6 tokens, BP = 1):
    # unigrams 5/6 (the x2, cat, on, mat), bigrams 3/5 (the cat, on the, the mat),
    # trigrams 1/4 (on the mat); BLEU-2 = sqrt(5/6 * 3/5) = sqrt(1/2).
    # LCS = 5 ("the cat on the mat"), so P = R = 5/6 and ROUGE-L (any beta) = 5/6.
    corpus = fast.CocoCorpus(["the cat sat on the mat"], [("the cat is on the mat",)], [0])
    bleu = corpus.bleu()
    assert bleu[0][0] == pytest.approx(5 / 6, abs=1e-9)
    assert bleu[1][0] == pytest.approx(np.sqrt(0.5), abs=1e-9)
    assert bleu[2][0] == pytest.approx((5 / 6 * 3 / 5 * 1 / 4) ** (1 / 3), abs=1e-9)
    assert bleu[3][0] < 1e-3  # no 4-gram matches: only pycocoevalcap's tiny constant
    assert corpus.rouge_l()[0] == pytest.approx(5 / 6, abs=1e-12)
    # Brevity penalty against the closest reference length: 3 words vs 6 -> exp(1 - 2).
    short = fast.CocoCorpus(["the cat sat"], [("the cat sat on the mat", "a b")], [0])
    # closest of (6, 2) to 3 is 2 (|3-2| < |3-6|): no penalty, unigram precision 1.
    assert short.bleu()[0][0] == pytest.approx(1.0, abs=1e-9)
    short = fast.CocoCorpus(["the cat sat"], [("the cat sat on the mat",)], [0])
    assert short.bleu()[0][0] == pytest.approx(np.exp(1 - 2), abs=1e-9)


def test_hand_worked_cider():
    # Two candidates, disjoint vocabularies: every reference n-gram has df = 1, so every
    # weight is log(2) - log(1) = log 2; a candidate equal to its single reference has
    # cosine 1 at each n and no length penalty: CIDEr-D = 10 * mean(1, 1, 1, 1) = 10.
    corpus = fast.CocoCorpus(["a b c d", "w x y z"], [("a b c d",), ("p q r s",)], [0, 1])
    np.testing.assert_allclose(corpus.cider_d(), [10.0, 0.0], atol=1e-12)
    # One candidate: log(N) = log 1 = 0 and every weight is 0 -> CIDEr-D is 0.
    single = fast.CocoCorpus(["a b c d"], [("a b c d",)], [0])
    assert single.cider_d()[0] == 0.0


def _lcs_table(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def test_bit_parallel_lcs_equals_the_dynamic_programme():
    rng = random.Random(7)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 80))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 80))]
        assert fast.lcs_length(fast.token_masks(a), len(a), b) == _lcs_table(a, b)


@pytest.mark.parametrize(
    ("candidates", "references", "names", "message"),
    [
        ([], [], None, "no candidates"),
        (["a dog"], [], None, "one list per candidate"),
        (["a dog"], [[]], None, "has no references"),
        (["  "], [["a dog"]], None, "candidate 0 is empty"),
        (["a dog"], [["a dog", ""]], None, "reference 1 of candidate 0"),
        (["a dog"], ["a dog"], None, "not one string"),
        ("a dog", [["a dog"]], None, "not one string"),
        (["a dog"], [["a dog"]], ["BLEU-4"], "unknown metric"),
        (["a dog"], [["a dog"]], [], "no metric names"),
    ],
)
def test_bad_input_is_a_clear_error(candidates, references, names, message):
    with pytest.raises(ValueError, match=message):
        metrics.compute(candidates, references, names)


def test_java_metrics_without_java_name_the_install(monkeypatch):
    monkeypatch.setattr(metrics, "_java", lambda: None)
    assert not metrics.java_available()
    with pytest.raises(ValueError, match="METEOR 1.5 .*apt-get install default-jre-headless"):
        metrics.compute(["a dog"], [["a dog"]], ["METEOR 1.5 (pycocoevalcap)"])
    # Metrics that need no Java still run.
    got = metrics.compute(["a dog"], [["a dog"]], ["ROUGE-L (rouge-score)"])
    assert got["ROUGE-L (rouge-score)"].tolist() == [1.0]


def test_progress_reports_every_stage_up_to_one():
    require_java()
    seen = []
    metrics.compute(
        CANDIDATES[:3],
        REFERENCES[:3],
        ["BLEU-4 (pycocoevalcap)", "CIDEr (pycocoevalcap)", "ROUGE-L (rouge-score)"],
        progress=lambda fraction, message: seen.append((fraction, message)),
    )
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(seen) == 4
    assert "CIDEr (pycocoevalcap)" in seen[2][1]
