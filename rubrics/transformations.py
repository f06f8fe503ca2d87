"""The pathological caption transformations of Cui et al. (CVPR 2018).

"Learning to Evaluate Image Captioning" (``../shared/papers/``, Sec. 3.3) defines
three transformations that turn a good human caption into a bad one whose badness
is known in advance. CapEval uses them for catch trials (a rater who calls such a
caption good is not reading) and the metric lab uses them for robustness curves.

- ``T_RC`` (:func:`random_caption`): "we randomly sample human written captions
  from other images". The paper draws from the top gamma percent nearest-neighbour
  images; CapEval has no image features, so it draws uniformly from the captions
  it is given (the caller passes captions of other images).
- ``T_WP`` (:func:`permute_words`): "we randomly permute at least 2 words in the
  reference caption", gamma percent of them, and the result must differ from the
  caption (``P_gamma(c) \\ {c}``).
- ``T_RW`` (:func:`replace_words`): "we replace from 2 to all words of the
  reference caption with random words from the vocabulary", gamma percent of them.

Conventions shared by the functions:

- A *word* is a whitespace-separated token (``caption.split()``); punctuation stays
  attached to its word, and the result is joined with single spaces.
- The number of words touched is ``k = max(2, floor(gamma * n + 0.5))`` capped at
  ``n`` (the share rounded half up, then the paper's "at least 2"); ``gamma == 0``
  returns the caption unchanged ("gamma% = 0 denotes the original caption").
- Every random choice comes from the ``numpy.random.Generator`` argument, so one
  seed gives one result.

Pure Python and numpy; no Django.
"""

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "TRANSFORMATIONS",
    "changed_count",
    "permute_words",
    "random_caption",
    "replace_words",
    "vocabulary",
]

TRANSFORMATIONS = ("T_RC", "T_WP", "T_RW")

# Rejection sampling bound for the rare draw whose chosen words are all equal
# (for example two "a"s); past it one chosen position is moved deterministically.
_MAX_DRAWS = 100


def _check_gamma(gamma: float) -> float:
    """``gamma`` as a float in [0, 1]; ``ValueError`` otherwise (bool, NaN, out of range)."""
    if isinstance(gamma, bool | np.bool_) or not isinstance(gamma, numbers.Real):
        raise ValueError(f"gamma must be a number from 0 to 1, got {gamma!r}")
    value = float(gamma)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"gamma must be a number from 0 to 1, got {gamma!r}")
    return value


def changed_count(n_words: int, gamma: float) -> int:
    """How many of ``n_words`` words a transformation with share ``gamma`` touches.

    ``0`` when ``gamma`` is 0; otherwise ``gamma * n_words`` rounded half up
    (``floor(x + 0.5)``, so 2.5 -> 3, unlike Python's banker's ``round``), raised
    to at least 2 as the paper asks, and capped at ``n_words``.
    """
    gamma = _check_gamma(gamma)
    if gamma == 0.0 or n_words == 0:
        return 0
    return min(n_words, max(2, math.floor(gamma * n_words + 0.5)))


def _words(caption: str) -> list[str]:
    if not isinstance(caption, str) or not caption.split():
        raise ValueError("caption must be a non-empty string of words")
    return caption.split()


def random_caption(others: Sequence[str], rng: np.random.Generator) -> str:
    """T_RC: one caption drawn uniformly from ``others`` (human captions of other images).

    The caller decides what "other" means (CapEval: images the worker has not
    seen); empty strings are refused because they would be an obvious tell.
    """
    choices = [text for text in others if isinstance(text, str) and text.strip()]
    if not choices:
        raise ValueError("others must hold at least one non-empty caption")
    return choices[int(rng.integers(len(choices)))]


def _derangement(k: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of ``range(k)`` with no fixed point (k >= 2)."""
    while True:  # about e = 2.72 draws on average
        order = rng.permutation(k)
        if not np.any(order == np.arange(k)):
            return order


def permute_words(caption: str, gamma: float, rng: np.random.Generator) -> str:
    """T_WP: permute a share ``gamma`` of the caption's words.

    ``k = changed_count(n, gamma)`` positions are drawn uniformly without
    replacement, and the words at those positions are rearranged among them by a
    random *derangement*: every chosen word leaves its position for another chosen
    position, the other words stay where they are. So the multiset of words is
    unchanged, and when the chosen words are all different exactly ``k`` positions
    change. Positions are redrawn when the chosen words are all equal (swapping two
    "a"s would change nothing), which makes the result differ from the caption,
    as the paper's ``P_gamma(c) \\ {c}`` requires.

    ``ValueError`` when the caption has fewer than two different words (no
    permutation of it is a different sentence).
    """
    words = _words(caption)
    k = changed_count(len(words), gamma)
    if k == 0:
        return caption
    if len(set(words)) < 2:
        raise ValueError("caption must have at least two different words to permute")
    n = len(words)
    for _ in range(_MAX_DRAWS):
        chosen = rng.choice(n, size=k, replace=False)
        if len({words[i] for i in chosen}) >= 2:
            break
    else:
        # All draws picked equal words: swap the last chosen position for the first
        # position holding another word, so the chosen words are not all equal.
        other = next(i for i in range(n) if words[i] != words[chosen[0]])
        chosen[-1] = other
    order = _derangement(k, rng)
    result = list(words)
    for target, source in zip(chosen, chosen[order], strict=True):
        result[target] = words[source]
    return " ".join(result)


def replace_words(
    caption: str, gamma: float, vocabulary: Sequence[str], rng: np.random.Generator
) -> str:
    """T_RW: replace a share ``gamma`` of the caption's words by random vocabulary words.

    ``k = changed_count(n, gamma)`` positions are drawn uniformly without
    replacement; each word there is replaced by a word drawn uniformly from the
    distinct vocabulary words that differ from it, ignoring case (replacing "Dog"
    by "dog" would change nothing a reader sees). So exactly ``k`` positions
    change. The vocabulary needs at least two distinct words (lower-cased).
    """
    words = _words(caption)
    k = changed_count(len(words), gamma)
    if k == 0:
        return caption
    # Distinct single words, sorted, so the same vocabulary in another order gives
    # the same result for the same seed.
    pool = sorted({w for w in vocabulary if isinstance(w, str) and len(w.split()) == 1})
    if len({w.lower() for w in pool}) < 2:
        raise ValueError("vocabulary must hold at least two different words")
    chosen = rng.choice(len(words), size=k, replace=False)
    result = list(words)
    for position in chosen:
        candidates = [w for w in pool if w.lower() != words[position].lower()]
        result[position] = candidates[int(rng.integers(len(candidates)))]
    return " ".join(result)


def vocabulary(captions: Sequence[str]) -> tuple[str, ...]:
    """The distinct lower-cased words of ``captions``, sorted (a T_RW vocabulary).

    Words are whitespace tokens with surrounding punctuation stripped, so "dog."
    and "dog" are one word; tokens with no letter or digit are dropped.
    """
    # Each distinct token is cleaned once: a study's detailed captions repeat their words
    # (3.6 million tokens, a few thousand distinct, in bench/crowd_load.py's arena study),
    # and splitting into a set runs in C while the cleaning below is Python per token.
    tokens: set[str] = set()
    for text in captions:
        tokens.update(text.split())
    found: set[str] = set()
    for token in tokens:
        word = token.strip(".,;:!?\"'()[]{}").lower()
        if any(ch.isalnum() for ch in word):
            found.add(word)
    return tuple(sorted(found))
