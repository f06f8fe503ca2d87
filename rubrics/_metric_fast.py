"""Fast re-implementations of pycocoevalcap's BLEU, ROUGE-L and CIDEr-D (numpy).

Private helper of :mod:`rubrics.metrics`. Why it exists: pycocoevalcap's scorers
re-cook every reference set for every candidate in Python dictionaries and fill an
O(m n) Python table for each LCS, a few hundred captions a second. Here:

- BLEU and CIDEr-D share one :class:`NgramTable`: every n-gram of every text as an
  integer id with its count, built with ``numpy.unique``; each distinct reference set
  appears once. Clipped counts, document frequencies, tf-idf vectors and the
  candidate-reference dot products are then array operations (sorted keys,
  ``searchsorted``, ``bincount``) instead of dictionary loops.
- ROUGE-L lengths use the bit-parallel LCS algorithm of Allison & Dix (1986) /
  Hyyro (2004) on Python integers: one pass over the reference tokens.

The arithmetic is pycocoevalcap 1.2's, with the same float constants; only the order
of a few float sums differs (about 1e-15). The tests compare with pycocoevalcap's own
scorers on real captions, and ``bench/metrics.py`` on 100,000. The quirks are kept on
purpose, because published numbers depend on them:

- BLEU: per-sentence score with ``tiny = 1e-15`` added to the matches and
  ``small = 1e-9`` to the guesses; brevity penalty against the "closest" reference
  length (ties: the shorter one).
- CIDEr-D: document frequency = number of documents whose reference set contains
  the n-gram, ``log(N)`` with N documents (pycocoevalcap: a document per candidate;
  see :meth:`CocoCorpus.cider_d`); the length penalty uses
  the number of *bigrams* (pycocoevalcap's ``if n == 1: length += term_freq``),
  sigma = 6; hypothesis weights clipped at the reference weights; x10.
- ROUGE-L: tokens are ``text.split(" ")`` (an empty text is one empty token), beta = 1.2,
  max precision and max recall over the references taken separately.
"""

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

# rouge_score.tokenize is what its DefaultTokenizer(use_stemmer=False) calls; importing the
# tokenizers module instead would load NLTK's stemmer (seconds) for nothing.
from rouge_score import tokenize

_N = 4
_TINY = 1e-15
_SMALL = 1e-9
_SIGMA = 6.0
_BETA = 1.2


def lcs_length(masks: dict[str, int], width: int, other: Sequence[str]) -> int:
    """Length of the longest common subsequence of a token list and ``other``.

    ``masks[token]`` has bit i set when the first list's token i equals ``token``;
    ``width`` is the first list's length. Bit-parallel (Hyyro 2004): V starts all ones,
    and after every token of ``other`` the zeros of V mark the LCS so far.
    """
    full = (1 << width) - 1
    v = full
    for token in other:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return width - v.bit_count()


def token_masks(tokens: Sequence[str]) -> dict[str, int]:
    """Bit masks of token positions, for :func:`lcs_length`."""
    masks: dict[str, int] = {}
    for i, token in enumerate(tokens):
        masks[token] = masks.get(token, 0) | (1 << i)
    return masks


# ---------------------------------------------------------------------------
# sacrebleu and rouge-score (untokenized text, THumB's choice)
# ---------------------------------------------------------------------------


def sacrebleu_sentence_bleu(cands: list[str], refs: list[tuple[str, ...]]) -> NDArray[np.float64]:
    """sacrebleu's sentence BLEU-4 (its defaults: 13a tokenizer, exp smoothing, effective order).

    ``BLEU.sentence_score`` re-tokenizes and re-counts the references for every
    candidate; here each distinct reference set goes through sacrebleu's own
    ``_cache_references`` once and each candidate through the same two steps
    ``sentence_score`` runs (``_compute_segment_statistics``, ``_aggregate_and_compute``).
    These are private methods: the version is pinned below 3 and a test compares every
    score with ``sentence_score``.
    """

    # sacrebleu (with portalocker) is imported here, not at module level: the judge
    # alignment report reaches this module through rubrics.metaeval, and the export path,
    # which imports that report, must load no metric library it does not use (issue 27).
    from sacrebleu.metrics import BLEU

    scorer = BLEU(effective_order=True)
    cached: dict[tuple[str, ...], dict] = {}
    out = np.empty(len(cands), dtype=np.float64)
    for i, (cand, rs) in enumerate(zip(cands, refs, strict=True)):
        info = cached.get(rs)
        if info is None:
            info = cached[rs] = scorer._cache_references([[r] for r in rs])[0]
        stats = scorer._compute_segment_statistics(scorer._preprocess_segment(cand), info)
        out[i] = scorer._aggregate_and_compute([stats]).score
    return out


def rouge_score_rouge_l(cands: list[str], refs: list[tuple[str, ...]]) -> NDArray[np.float64]:
    """rouge-score's ROUGE-L F-measure, max over the references (its ``score_multi``).

    Tokenized with rouge-score's own tokenizer (no stemmer); the LCS is bit-parallel.
    """
    cache: dict[str, list[str]] = {}

    def tok(text: str) -> list[str]:
        got = cache.get(text)
        if got is None:
            got = cache[text] = tokenize.tokenize(text, None)
        return got

    out = np.empty(len(cands), dtype=np.float64)
    for i, (cand, rs) in enumerate(zip(cands, refs, strict=True)):
        pred = tok(cand)
        masks = token_masks(pred)
        best = 0.0
        for r in rs:
            target = tok(r)
            if not pred or not target:
                continue
            lcs = lcs_length(masks, len(pred), target)
            precision = lcs / len(pred)
            recall = lcs / len(target)
            if precision + recall > 0:
                best = max(best, 2 * precision * recall / (precision + recall))
        out[i] = best
    return out


# ---------------------------------------------------------------------------
# Vectorised n-gram tables (numpy): BLEU and CIDEr-D for large batches
# ---------------------------------------------------------------------------


class NgramTable:
    """Every 1..4-gram of every text as integer ids, with its count per text (numpy arrays).

    Texts are whitespace-split (pycocoevalcap's ``precook``). A k-gram's id is built from
    the (k-1)-gram's id and the next word's id through ``numpy.unique``, so ids stay
    small whatever the vocabulary. The entries are sorted by text, then by n-gram id:
    ``text[e]``, ``gram[e]``, ``count[e]``; ``order[g]`` is the length of n-gram ``g``.
    """

    def __init__(self, texts: Sequence[str], n: int = _N):
        vocabulary: dict[str, int] = {}
        words = [t.split() for t in texts]
        ids = np.fromiter(
            (vocabulary.setdefault(w, len(vocabulary)) for ws in words for w in ws),
            np.int64,
        )
        self.lengths = np.fromiter(map(len, words), np.int64, len(words))
        owner = np.repeat(np.arange(len(words), dtype=np.int64), self.lengths)
        left = np.repeat(self.lengths, self.lengths) - (
            np.arange(ids.size) - np.repeat(np.cumsum(self.lengths) - self.lengths, self.lengths)
        )  # words from this position to the end of its text, itself included
        v = max(len(vocabulary), 1)
        texts_of, grams_of, orders = [], [], []
        previous = ids
        offset = 0
        for k in range(1, n + 1):
            starts = np.flatnonzero(left >= k)
            if k == 1:
                local = ids
                size = v
            else:
                pairs = previous[starts] * v + ids[starts + k - 1]
                uniq, inv = np.unique(pairs, return_inverse=True)
                local = np.full(ids.size, -1, dtype=np.int64)
                local[starts] = inv
                size = uniq.size
            texts_of.append(owner[starts])
            grams_of.append(local[starts] + offset)
            orders.append(np.full(size, k, dtype=np.int64))
            previous = local
            offset += size
        self.n_grams = offset
        self.order = np.concatenate(orders) if orders else np.zeros(0, np.int64)
        keys = np.concatenate(texts_of) * offset + np.concatenate(grams_of)
        keys, self.count = np.unique(keys, return_counts=True)
        self.text, self.gram = np.divmod(keys, max(offset, 1))


class CocoCorpus:
    """pycocoevalcap's BLEU and CIDEr-D for a whole batch at once, vectorised with numpy.

    ``cand_tok[i]`` is candidate i's PTB-tokenized text, ``ref_sets[ref_index[i]]`` its
    tokenized references (each distinct set once). The arithmetic is pycocoevalcap's;
    only the order of some float sums differs, so scores agree to about 1e-15 (the tests
    and the benchmark check 1e-9). BLEU and CIDEr share one :class:`NgramTable`.
    """

    def __init__(self, cand_tok: list[str], ref_sets: list[tuple[str, ...]], ref_index: list[int]):
        self.cand_tok, self.ref_sets = cand_tok, ref_sets
        self._bleu: list[NDArray[np.float64]] | None = None
        self.n_cand = len(cand_tok)
        self.ref_index = np.asarray(ref_index, dtype=np.int64)
        self.set_size = np.fromiter(map(len, ref_sets), np.int64, len(ref_sets))
        self.set_start = np.cumsum(self.set_size) - self.set_size
        self.table = NgramTable([*cand_tok, *(r for rs in ref_sets for r in rs)])
        t = self.table
        is_ref = t.text >= self.n_cand
        # Candidate entries, and reference entries keyed by (reference text, n-gram).
        self.c_text, self.c_gram, self.c_count = t.text[~is_ref], t.gram[~is_ref], t.count[~is_ref]
        self.r_text = t.text[is_ref] - self.n_cand
        self.r_gram, self.r_count = t.gram[is_ref], t.count[is_ref]
        self.r_set = np.repeat(np.arange(len(ref_sets), dtype=np.int64), self.set_size)[self.r_text]
        # Per (reference set, n-gram): the largest count in any reference of the set.
        sg = self.r_set * t.n_grams + self.r_gram
        order = np.argsort(sg, kind="stable")
        sg_sorted = sg[order]
        first = np.flatnonzero(np.r_[True, sg_sorted[1:] != sg_sorted[:-1]])
        self.sg_keys = sg_sorted[first]
        self.sg_max = np.maximum.reduceat(self.r_count[order], first)
        # Candidate-reference pairs: candidate c against each reference of its set.
        sizes = self.set_size[self.ref_index]
        self.pair_cand = np.repeat(np.arange(self.n_cand, dtype=np.int64), sizes)
        self.pair_first = np.cumsum(sizes) - sizes
        within = np.arange(self.pair_cand.size) - np.repeat(self.pair_first, sizes)
        self.pair_ref = self.set_start[self.ref_index][self.pair_cand] + within

    def _lookup(self, keys: NDArray[np.int64], sorted_keys: NDArray[np.int64]):
        pos = np.searchsorted(sorted_keys, keys)
        pos = np.minimum(pos, max(sorted_keys.size - 1, 0))
        found = sorted_keys[pos] == keys if sorted_keys.size else np.zeros(keys.size, bool)
        return pos, found

    def bleu(self) -> list[NDArray[np.float64]]:
        """Per-candidate BLEU-1..4 as pycocoevalcap's ``Bleu(4)`` (computed once, then kept)."""
        if self._bleu is None:
            self._bleu = self._compute_bleu()
        return self._bleu

    def _compute_bleu(self) -> list[NDArray[np.float64]]:
        t = self.table
        keys = self.ref_index[self.c_text] * t.n_grams + self.c_gram
        pos, found = self._lookup(keys, self.sg_keys)
        clipped = np.where(found, np.minimum(self.c_count, self.sg_max[pos]), 0)
        n_of = t.order[self.c_gram] - 1
        correct = np.bincount(
            self.c_text * _N + n_of, weights=clipped, minlength=self.n_cand * _N
        ).reshape(self.n_cand, _N)
        testlen = t.lengths[: self.n_cand]
        reflens = t.lengths[self.n_cand :][self.pair_ref]
        # "closest": smallest |reflen - testlen|, ties to the shorter reference.
        width = int(t.lengths.max(initial=0)) + 1
        key = np.abs(reflens - testlen[self.pair_cand]) * width + reflens
        reflen = np.minimum.reduceat(key, self.pair_first) % width
        ratio = (testlen + _TINY) / (reflen + _SMALL)
        penalty = np.where(ratio < 1, np.exp(1 - 1 / np.where(ratio < 1, ratio, 1.0)), 1.0)
        out = []
        bleu = np.ones(self.n_cand)
        for k in range(_N):
            guess = np.maximum(0, testlen - k)
            bleu = bleu * ((correct[:, k] + _TINY) / (guess + _SMALL))
            value = bleu ** (1.0 / (k + 1))
            out.append(np.where(ratio < 1, value * penalty, value))
        return out

    def cider_d(self, documents: str = "candidates", chunk: int = 20_000) -> NDArray[np.float64]:
        """Per-candidate CIDEr-D as pycocoevalcap's ``Cider``, document frequencies from this batch.

        ``documents="candidates"`` is pycocoevalcap's own count (one document per
        candidate: a reference set used by k candidates counts k times, N = number of
        candidates); ``"reference_sets"`` counts each distinct reference set once (N =
        number of sets), which is what pycocoevalcap gives when it is called with one
        caption per image, as for each system separately. Candidates are processed
        ``chunk`` at a time to bound memory.
        """
        if documents not in ("candidates", "reference_sets"):
            raise ValueError(
                f"documents must be 'candidates' or 'reference_sets', got {documents!r}"
            )
        t = self.table
        uses = np.bincount(self.ref_index, minlength=self.set_size.size)
        if documents == "reference_sets":
            uses = (uses > 0).astype(np.int64)
        sets_of_keys = self.sg_keys // max(t.n_grams, 1)
        df = np.bincount(
            self.sg_keys % max(t.n_grams, 1), weights=uses[sets_of_keys], minlength=t.n_grams
        )
        ref_len = np.log(float(uses.sum()))
        weight = ref_len - np.log(np.maximum(1.0, df))
        x = t.count * weight[t.gram]
        n_of = t.order[t.gram] - 1
        norms = np.sqrt(
            np.bincount(t.text * _N + n_of, weights=x * x, minlength=t.lengths.size * _N)
        ).reshape(-1, _N)
        bigrams = np.maximum(t.lengths - 1, 0)  # pycocoevalcap's "length" counts bigrams
        is_ref = t.text >= self.n_cand
        r_keys = (t.text[is_ref] - self.n_cand) * t.n_grams + t.gram[is_ref]  # sorted
        r_x = x[is_ref]
        c_x, c_n = x[~is_ref], n_of[~is_ref]
        val = np.zeros(self.pair_cand.size * _N)
        sizes = self.set_size[self.ref_index]
        # Candidate entries against every reference of the candidate's set, in chunks.
        bounds = np.searchsorted(self.c_text, np.arange(0, self.n_cand + chunk, chunk))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            if lo == hi:
                continue
            c = self.c_text[lo:hi]
            reps = sizes[c]
            e = np.repeat(np.arange(lo, hi), reps)
            j = np.arange(e.size) - np.repeat(np.cumsum(reps) - reps, reps)
            ref = self.set_start[self.ref_index[self.c_text[e]]] + j
            pos, found = self._lookup(ref * t.n_grams + self.c_gram[e], r_keys)
            e, j, pos = e[found], j[found], pos[found]  # n-grams the reference lacks add 0
            xh, xr = c_x[e], r_x[pos]
            pair = self.pair_first[self.c_text[e]] + j
            val += np.bincount(
                pair * _N + c_n[e], weights=np.minimum(xh, xr) * xr, minlength=val.size
            )
        val = val.reshape(-1, _N)
        nh = norms[self.pair_cand]
        nr = norms[self.n_cand + self.pair_ref]
        both = (nh != 0) & (nr != 0)
        val = np.where(both, val / np.where(both, nh * nr, 1.0), val)
        delta = (bigrams[self.pair_cand] - bigrams[self.n_cand + self.pair_ref]).astype(np.float64)
        val *= (np.e ** (-(delta**2) / (2 * _SIGMA**2)))[:, None]
        score = np.add.reduceat(val, self.pair_first, axis=0)
        return (score[:, 0] + score[:, 1] + score[:, 2] + score[:, 3]) / 4.0 / sizes * 10.0

    # -- ROUGE-L ---------------------------------------------------------------

    def rouge_l(self) -> NDArray[np.float64]:
        """Per-candidate ROUGE-L as pycocoevalcap's ``Rouge`` (beta 1.2)."""
        ref_tokens = [[r.split(" ") for r in rs] for rs in self.ref_sets]
        out = np.empty(len(self.cand_tok), dtype=np.float64)
        beta2 = _BETA**2
        for i, (cand, ri) in enumerate(zip(self.cand_tok, self.ref_index.tolist(), strict=True)):
            tokens = cand.split(" ")
            masks = token_masks(tokens)
            width = len(tokens)
            prec_max = rec_max = 0.0
            for ref in ref_tokens[ri]:
                lcs = lcs_length(masks, width, ref)
                prec_max = max(prec_max, lcs / float(width))
                rec_max = max(rec_max, lcs / float(len(ref)))
            if prec_max != 0 and rec_max != 0:
                out[i] = ((1 + beta2) * prec_max * rec_max) / float(rec_max + beta2 * prec_max)
            else:
                out[i] = 0.0
        return out
