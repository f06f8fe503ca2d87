"""Agreement between annotators of the same text: error spans and ESA scores (pure; no Django).

- :func:`span_agreement` -- character-level F1 and the share of spans matched, with and
  without severity, pooled over every pair of annotators of every shared text
  (:class:`SpanAgreement` states the rules); :func:`span_agreement_between` the same over
  pairs of one annotator from each of two groups (two campaigns of the same texts);
- :func:`score_alpha` -- Krippendorff's alpha (interval level) of the 0-100 scores, through
  :func:`rubrics.agreement.krippendorff_alpha` (checked against the ``krippendorff`` package).

Marks are ``(start, end, severity)`` half-open code-point spans as :mod:`rubrics.spans`
validates them; omissions have no characters and are left out by the caller. An undefined
statistic raises ``ValueError`` instead of returning NaN.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from rubrics import agreement
from rubrics.spans import SEVERITIES, score_value

__all__ = ["Marks", "SpanAgreement", "span_agreement", "span_agreement_between", "score_alpha"]

# An annotator's marks on one text: (start, end, severity) half-open code-point spans.
Marks = Sequence[tuple[int, int, str]]


@dataclass(frozen=True)
class SpanAgreement:
    """Span agreement pooled over every pair of annotators of every shared text.

    ``char_f1``: 2 |A and B| / (|A| + |B|) over marked characters, pooled (micro-average)
    over pairs; ``char_f1_severity`` counts a shared character only when both gave it the
    same severity. ``matched``: the share of spans that overlap (by at least one character)
    a span of the other annotator; ``matched_severity`` also requires the same severity.
    ``n_texts``/``n_pairs``: texts with >= 2 annotators and annotator pairs used.
    """

    char_f1: float
    char_f1_severity: float
    matched: float
    matched_severity: float
    n_texts: int
    n_pairs: int


def _severity_codes(length: int, marks: Marks, where: str) -> np.ndarray:
    """Per-character severity code: 0 unmarked, else 1 + index in SEVERITIES (max wins)."""
    codes = np.zeros(length, dtype=np.int8)
    for start, end, severity in marks:
        if not 0 <= start < end <= length:
            raise ValueError(f"{where}: span {start}..{end} is outside a text of length {length}")
        sev = str(severity).casefold()
        code = SEVERITIES.index(sev) + 1 if sev in SEVERITIES else len(SEVERITIES) + 1
        np.maximum(codes[start:end], code, out=codes[start:end])
    return codes


def _matched(mine: Marks, codes_other: np.ndarray, theirs: Marks) -> tuple[int, int]:
    any_hit = severity_hit = 0
    for start, end, severity in mine:
        if codes_other[start:end].any():
            any_hit += 1
            sev = str(severity).casefold()
            if any(s < end and start < e and str(v).casefold() == sev for s, e, v in theirs):
                severity_hit += 1
    return any_hit, severity_hit


def span_agreement(texts: Iterable[tuple[int, Sequence[Marks]]]) -> SpanAgreement:
    """Span agreement between annotators of the same texts (see :class:`SpanAgreement`).

    ``texts``: one ``(length, [marks of annotator 1, marks of annotator 2, ...])`` per
    text; texts with fewer than two annotators are skipped. Several annotators are
    averaged by pooling every unordered pair's counts (micro-average), so a text with
    three annotators weighs three pairs. Omissions have no characters and are left out.
    Raises ValueError when no pair marked anything (F1 is 0/0).
    """
    return _pooled(
        (t, length, [(a, b) for a in range(len(marks)) for b in range(a + 1, len(marks))], marks)
        for t, (length, marks) in enumerate(texts)
    )


def span_agreement_between(
    texts: Iterable[tuple[int, Sequence[Marks], Sequence[Marks]]],
) -> SpanAgreement:
    """Span agreement between two groups of annotators of the same texts (two campaigns of
    the same items, or people and a judge): only pairs of one annotator of each group
    count, pooled as :func:`span_agreement` pools them.

    ``texts``: one ``(length, [marks of each first-group annotator], [marks of each
    second-group annotator])`` per text; a text missing either group is skipped. With one
    annotator on each side of every text this is :func:`span_agreement` of the pairs.
    """

    def pairs():
        for t, (length, first, second) in enumerate(texts):
            marks = [*first, *second]
            n = len(first)
            yield t, length, [(a, n + b) for a in range(n) for b in range(len(second))], marks

    return _pooled(pairs())


def _pooled(texts: Iterable[tuple[int, int, list[tuple[int, int]], Sequence[Marks]]]):
    """The pooled counts over each text's annotator pairs ``(a, b)`` (indices into its
    marks); the statistics of :class:`SpanAgreement`."""
    inter = inter_sev = marked = 0
    hits = hits_sev = n_spans = 0
    n_texts = n_pairs = 0
    for t, length, pairs, annotators in texts:
        if not pairs:
            continue
        n_texts += 1
        codes = [
            _severity_codes(length, m, f"text {t} annotator {a}") for a, m in enumerate(annotators)
        ]
        for a, b in pairs:
            n_pairs += 1
            ca, cb = codes[a], codes[b]
            both = (ca > 0) & (cb > 0)
            inter += int(both.sum())
            inter_sev += int((both & (ca == cb)).sum())
            marked += int((ca > 0).sum() + (cb > 0).sum())
            for mine, other_codes, theirs in (
                (annotators[a], cb, annotators[b]),
                (annotators[b], ca, annotators[a]),
            ):
                h, hs = _matched(mine, other_codes, theirs)
                hits += h
                hits_sev += hs
                n_spans += len(mine)
    if not n_pairs:
        raise ValueError("span agreement is undefined: no text has two annotators")
    if not marked:
        raise ValueError("span agreement is undefined: no annotator marked any character")
    return SpanAgreement(
        char_f1=2 * inter / marked,
        char_f1_severity=2 * inter_sev / marked,
        matched=hits / n_spans,
        matched_severity=hits_sev / n_spans,
        n_texts=n_texts,
        n_pairs=n_pairs,
    )


def score_alpha(
    units: Sequence[Hashable], raters: Sequence[Hashable], scores: Sequence[float]
) -> float:
    """Krippendorff's alpha (interval) of the 0-100 scores, from one row per judgment.

    Builds the raters x units matrix (NaN where a rater did not judge a unit) and calls
    :func:`rubrics.agreement.krippendorff_alpha`. A rater judging a unit twice is refused:
    alpha has one value per (rater, unit) cell.
    """
    if not (len(units) == len(raters) == len(scores)):
        raise ValueError("units, raters and scores differ in length")
    unit_index = {u: i for i, u in enumerate(dict.fromkeys(units))}
    rater_index = {r: i for i, r in enumerate(dict.fromkeys(raters))}
    matrix = np.full((len(rater_index), len(unit_index)), np.nan)
    for unit, rater, score in zip(units, raters, scores, strict=True):
        cell = (rater_index[rater], unit_index[unit])
        if not np.isnan(matrix[cell]):
            raise ValueError(f"rater {rater!r} judged unit {unit!r} twice")
        matrix[cell] = score_value(score)
    return agreement.krippendorff_alpha(matrix, "interval")
