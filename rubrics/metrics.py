"""Automatic caption metrics, named with their implementation (pure Python; no Django).

Public interface:

- :data:`METRICS` -- ``name -> MetricSpec`` for every metric :func:`compute` knows. A name
  includes the implementation, because the same metric differs between packages
  (``"BLEU-4 (pycocoevalcap)"`` and ``"BLEU-4 (sacrebleu)"`` give different numbers for
  the same caption).
- :func:`compute` -- one score per candidate per metric, as float64 arrays.
- :func:`java_available` -- whether METEOR (and the PTB tokenizer) can run.

Which implementation the papers use:

- the coco-caption tradition (Flickr8k-Expert, Pascal-50S, the survey of caption
  evaluation, Table 4/5): pycocoevalcap, every text first run through its Stanford PTB
  tokenizer (lowercased, punctuation tokens removed). BLEU-n (``"closest"`` reference
  length, per-sentence scores with pycocoevalcap's tiny/small constants), ROUGE-L
  (beta = 1.2, max precision and max recall over the references), METEOR 1.5 and CIDEr
  (pycocoevalcap's ``Cider`` class *is* CIDEr-D: clipped counts, length penalty with
  sigma = 6, times 10).
- THumB (Kasai et al. 2022, appendix A.2): sacrebleu sentence BLEU-4 and rouge-score
  ROUGE-L on the untokenized text, pycocoevalcap CIDEr.

Scales are each implementation's own: pycocoevalcap BLEU, ROUGE-L and METEOR and
rouge-score ROUGE-L in [0, 1]; sacrebleu in [0, 100]; CIDEr-D in [0, 10]. Papers print
x100 (``MetricSpec.percent`` says which ones need it).

CIDEr's document frequencies and its ``log(N)`` come from the reference sets passed to
:func:`compute` (by default one document per distinct reference set, i.e. per image;
see ``cider_documents``). A caption's CIDEr therefore depends on the batch it is scored
in, including N itself: an n-gram no reference contains weighs ``log N``. Score a whole
study (or a whole dataset) in one call.

Speed: BLEU, ROUGE-L and CIDEr are re-implemented here (n-gram counts shared by BLEU
and CIDEr, references cooked once per distinct reference set, bit-parallel LCS), and
the tests check them equal to pycocoevalcap's, sacrebleu's and rouge-score's own
scorers. The PTB tokenizer runs once per call over the distinct texts (one Java
process), not once per caption. METEOR runs pycocoevalcap's own ``Meteor`` wrapper
(one Java process per call).
"""

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.tokenizer import ptbtokenizer

from rubrics import _metric_fast as fast

__all__ = [
    "METRICS",
    "MetricSpec",
    "Progress",
    "compute",
    "java_available",
    "JAVA_INSTALL_HINT",
    "ptb_tokenize",
    "CiderDocuments",
]

Progress = Callable[[float, str], None]
CiderDocuments = Literal["reference_sets", "candidates"]

JAVA_INSTALL_HINT = (
    "METEOR and the PTB tokenizer of pycocoevalcap need a Java runtime (java on PATH): "
    "install it with `apt-get install default-jre-headless` (the Dockerfile and .ci/run do "
    "this) so that `java` is on PATH"
)

PTB = "PTB (Stanford CoreNLP 3.4.1 via pycocoevalcap: lowercased, punctuation removed)"


@dataclass(frozen=True)
class MetricSpec:
    """What a metric name means: the metric, the package that computes it, its tokenizer.

    ``percent`` is True when papers print the score x100 (BLEU, ROUGE-L and METEOR on
    [0, 1], CIDEr-D on [0, 10]); sacrebleu's score is already on [0, 100].
    ``corpus_dependent`` is True when a caption's score depends on the other captions
    scored in the same call (CIDEr's document frequencies).
    """

    name: str
    metric: str
    implementation: str
    tokenizer: str
    needs_java: bool
    percent: bool
    corpus_dependent: bool = False


def _spec(
    metric: str, impl: str, tokenizer: str, *, java: bool, percent: bool = True, corpus=False
):
    name = f"{metric} ({impl})"
    return name, MetricSpec(name, metric, impl, tokenizer, java, percent, corpus)


METRICS: dict[str, MetricSpec] = dict(
    [
        *(_spec(f"BLEU-{n}", "pycocoevalcap", PTB, java=True) for n in range(1, 5)),
        _spec(
            "BLEU-4",
            "sacrebleu",
            "sacrebleu 13a (sentence BLEU, exp smoothing, effective order)",
            java=False,
            percent=False,
        ),
        _spec("ROUGE-L", "pycocoevalcap", PTB, java=True),
        _spec(
            "ROUGE-L",
            "rouge-score",
            "rouge-score default (lowercase, non-alphanumerics removed, no stemming)",
            java=False,
        ),
        _spec("METEOR 1.5", "pycocoevalcap", PTB + " + METEOR -norm", java=True),
        _spec("CIDEr", "pycocoevalcap", PTB, java=True, percent=True, corpus=True),
    ]
)


# ---------------------------------------------------------------------------
# Java and the PTB tokenizer
# ---------------------------------------------------------------------------


def _java() -> str | None:
    """The java executable on PATH (pycocoevalcap's METEOR wrapper starts ``java`` too)."""
    return shutil.which("java")


def java_available() -> bool:
    """True when a Java runtime can be started (METEOR and the PTB tokenizer need one)."""
    java = _java()
    return java is not None and _java_runs(java)


@functools.lru_cache(maxsize=4)
def _java_runs(java: str) -> bool:
    # Starting a JVM takes a fraction of a second: ask each executable once per process.
    try:
        done = subprocess.run([java, "-version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _require_java(names: Sequence[str]) -> str:
    java = _java()
    if java is None or not java_available():
        raise ValueError(f"{', '.join(names)} cannot run without Java. {JAVA_INSTALL_HINT}")
    return java


def _pycocoevalcap_dir() -> Path:
    # pycocoevalcap is a namespace package (no __init__.py): locate it by a module.
    return Path(ptbtokenizer.__file__).resolve().parent.parent


# The tokens pycocoevalcap's PTBTokenizer drops after tokenizing (its PUNCTUATIONS list).
_PTB_PUNCTUATION = frozenset(
    ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-"]
    + [".", "?", "!", ",", ":", "-", "--", "...", ";"]
)


def ptb_tokenize(texts: Sequence[str]) -> list[str]:
    """pycocoevalcap's PTB tokenization of each text, in one Java process for all of them.

    The same command as ``pycocoevalcap.tokenizer.ptbtokenizer.PTBTokenizer`` (Stanford
    CoreNLP 3.4.1, ``-preserveLines -lowerCase``, then its punctuation tokens removed),
    so the output is identical; the difference is that it takes a flat list, runs once
    per call and writes its input file to the system temporary folder instead of into
    the installed package. Returns space-joined tokens, one string per text.
    """
    if not texts:
        return []
    java = _require_java(["the PTB tokenizer"])
    jar = _pycocoevalcap_dir() / "tokenizer" / "stanford-corenlp-3.4.1.jar"
    lines = [t.replace("\r", " ").replace("\n", " ") for t in texts]
    with tempfile.TemporaryDirectory(prefix="capeval-ptb-") as tmp:
        path = Path(tmp) / "sentences.txt"
        path.write_text("\n".join(lines), encoding="utf-8")
        done = subprocess.run(
            [java, "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer"]
            + ["-preserveLines", "-lowerCase", str(path)],
            capture_output=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"PTB tokenizer failed: {done.stderr.decode(errors='replace')[-500:]}")
    out = done.stdout.decode("utf-8").split("\n")
    if len(out) < len(lines):
        raise RuntimeError(f"PTB tokenizer returned {len(out)} lines for {len(lines)} texts")
    return [
        " ".join(w for w in line.rstrip().split(" ") if w not in _PTB_PUNCTUATION)
        for line in out[: len(lines)]
    ]


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


def _check_inputs(
    candidates: Sequence[str], references: Sequence[Sequence[str]], names: Sequence[str] | None
) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    if isinstance(candidates, str) or isinstance(references, str):
        raise ValueError("candidates and references must be sequences of strings, not one string")
    cands = list(candidates)
    refs = [tuple(r) if not isinstance(r, str) else r for r in references]
    if not cands:
        raise ValueError("no candidates to score")
    if len(refs) != len(cands):
        raise ValueError(
            "references must have one list per candidate: "
            f"{len(cands)} candidates, {len(refs)} lists"
        )
    for i, (c, rs) in enumerate(zip(cands, refs, strict=True)):
        if not isinstance(c, str) or not c.strip():
            raise ValueError(f"candidate {i} is empty or not a string: {c!r}")
        if isinstance(rs, str):
            raise ValueError(f"references[{i}] must be a list of strings, not one string")
        if not rs:
            raise ValueError(f"candidate {i} has no references (metrics need at least one)")
        for j, r in enumerate(rs):
            if not isinstance(r, str) or not r.strip():
                raise ValueError(f"reference {j} of candidate {i} is empty or not a string: {r!r}")
    chosen = list(METRICS) if names is None else list(names)
    if isinstance(names, str):
        raise ValueError("names must be a list of metric names, not one string")
    if not chosen:
        raise ValueError("no metric names given")
    unknown = [n for n in chosen if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known: {list(METRICS)}")
    return cands, refs, list(dict.fromkeys(chosen))


# ---------------------------------------------------------------------------
# compute
# ---------------------------------------------------------------------------


def compute(
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    names: Sequence[str] | None = None,
    *,
    progress: Progress | None = None,
    cider_documents: CiderDocuments = "reference_sets",
) -> dict[str, NDArray[np.float64]]:
    """Score every candidate against its references with each named metric (all when None).

    ``references[i]`` are the reference captions of ``candidates[i]`` (at least one).
    Returns ``{name: array of len(candidates)}`` on each implementation's own scale (see
    the module docstring). ``progress(fraction, message)`` is called as stages finish
    (fraction in [0, 1]).

    CIDEr's document frequencies come from the reference sets given here.
    ``cider_documents="reference_sets"`` (the default) counts each distinct reference
    set once -- an image's references are one document however many captions of the
    image are scored, and N is the number of images -- which is what pycocoevalcap gives
    when called once per system with one caption per image (THumB, Table 2).
    ``"candidates"`` is pycocoevalcap's count when it is handed every candidate at
    once: one document per candidate (the Flickr8k-Expert numbers of the survey and of
    CLIPScore were computed so). Reference sets are the same when they hold the same
    texts, in any order.

    Raises ValueError for empty input, a blank candidate or reference, a candidate
    without references, an unknown name, or a Java metric without Java (the message
    says how to install it).
    """
    cands, refs, chosen = _check_inputs(candidates, references, names)
    if cider_documents not in ("reference_sets", "candidates"):
        raise ValueError(
            f"cider_documents must be 'reference_sets' or 'candidates', got {cider_documents!r}"
        )
    report = progress or (lambda fraction, message: None)
    java_names = [n for n in chosen if METRICS[n].needs_java]
    if java_names:
        _require_java(java_names)

    out: dict[str, NDArray[np.float64]] = {}
    steps = len(chosen) + (1 if java_names else 0)
    done = 0

    def step(message: str) -> None:
        nonlocal done
        done += 1
        report(done / steps, message)

    if java_names:
        cand_tok, ref_sets, ref_index = _tokenize_all(cands, refs)
        step(f"tokenized {len(cands)} candidates (PTB)")
        coco = fast.CocoCorpus(cand_tok, ref_sets, ref_index)
        for name in chosen:
            if not METRICS[name].needs_java:
                continue
            if name.startswith("BLEU-"):
                n = int(name[5])
                out[name] = coco.bleu()[n - 1]
            elif name == "ROUGE-L (pycocoevalcap)":
                out[name] = coco.rouge_l()
            elif name == "CIDEr (pycocoevalcap)":
                out[name] = coco.cider_d(cider_documents)
            elif name == "METEOR 1.5 (pycocoevalcap)":
                # The one metric scored caption by caption (a Java process): progress by
                # caption, or the bar stood still for half a minute (issue 46, row 16).
                start = done
                out[name] = _meteor(
                    cand_tok,
                    ref_sets,
                    ref_index,
                    progress=lambda k, n, start=start: report(
                        (start + k / n) / steps, f"METEOR, {k} of {n} captions"
                    ),
                )
            step(f"{name} done")
    # These two depend on nothing but the pair: score each distinct pair once.
    pairs = list(dict.fromkeys(zip(cands, refs, strict=True)))
    back = None if len(pairs) == len(cands) else _pair_index(pairs, cands, refs)
    for name, scorer in (
        ("BLEU-4 (sacrebleu)", fast.sacrebleu_sentence_bleu),
        ("ROUGE-L (rouge-score)", fast.rouge_score_rouge_l),
    ):
        if name in chosen:
            values = scorer([c for c, _ in pairs], [r for _, r in pairs])
            out[name] = values if back is None else values[back]
            step(f"{name} done")
    return {name: out[name] for name in chosen}


def _pair_index(
    pairs: list[tuple[str, tuple[str, ...]]], cands: list[str], refs: list[tuple[str, ...]]
) -> NDArray[np.intp]:
    """For each candidate, the position of its (candidate, references) pair in ``pairs``."""
    where = {p: i for i, p in enumerate(pairs)}
    return np.fromiter((where[p] for p in zip(cands, refs, strict=True)), np.intp, len(cands))


def _tokenize_all(
    cands: list[str], refs: list[tuple[str, ...]]
) -> tuple[list[str], list[tuple[str, ...]], list[int]]:
    """PTB-tokenize candidates and references in one Java run over the distinct texts.

    Returns the tokenized candidates, the distinct tokenized reference sets and, per
    candidate, the index of its reference set (so each set is cooked once).
    """
    # One entry per distinct set of texts (order ignored); the first order seen is kept.
    set_ids: dict[tuple[str, ...], int] = {}
    first: list[tuple[str, ...]] = []
    ref_index = []
    for rs in refs:
        key = tuple(sorted(rs))
        if key not in set_ids:
            set_ids[key] = len(first)
            first.append(rs)
        ref_index.append(set_ids[key])
    texts = list(dict.fromkeys([*cands, *(r for rs in first for r in rs)]))
    tokenized = dict(zip(texts, ptb_tokenize(texts), strict=True))
    cand_tok = [tokenized[c] for c in cands]
    ref_sets = [tuple(tokenized[r] for r in rs) for rs in first]
    return cand_tok, ref_sets, ref_index


#: METEOR reports progress at most this many times per call (every caption up to this many).
METEOR_REPORTS = 200


def _meteor(
    cand_tok: list[str],
    ref_sets: list[tuple[str, ...]],
    ref_index: list[int],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> NDArray[np.float64]:
    """METEOR 1.5 per candidate with pycocoevalcap's own wrapper (one Java process).

    Scored in batches, ``progress(scored, total)`` after each: a caption at a time up to
    ``METEOR_REPORTS`` distinct pairs, then that many equal batches. A segment's score
    depends on its own statistics only, so batches give the one-call scores.
    """
    # Each distinct (candidate, reference set) pair is scored once: Flickr8k-Expert, for
    # one, lists every caption once per rating.
    pairs = list(dict.fromkeys(zip(cand_tok, ref_index, strict=True)))
    every = max(1, -(-len(pairs) // METEOR_REPORTS))
    scores: list[float] = []
    scorer = Meteor()
    try:
        for begin in range(0, len(pairs), every):
            batch = pairs[begin : begin + every]
            gts = {i: list(ref_sets[k]) for i, (_, k) in enumerate(batch)}
            res = {i: [c] for i, (c, _) in enumerate(batch)}
            scores.extend(scorer.compute_score(gts, res)[1])
            if progress is not None:
                progress(len(scores), len(pairs))
    finally:
        del scorer
    by_pair = dict(zip(pairs, scores, strict=True))
    return np.fromiter(
        (by_pair[p] for p in zip(cand_tok, ref_index, strict=True)), np.float64, len(cand_tok)
    )
