"""Error spans: validation, MQM weighting, ESA summaries and span agreement (pure; no Django).

PROTOCOLS.md section 6. Two published protocols mark what is wrong in a text:

- **ESA** (Error Span Annotation, Kocmi et al., WMT 2024): spans marked ``minor`` or
  ``major`` (or an omission with no span), then an overall score 0-100 given with the
  spans in view. A system's ESA score is the mean of its scores.
- **MQM** (Freitag et al. 2021): spans with a category and a severity, at most five per
  segment; segment score = sum of the error weights (Major 5, Minor 1, Minor
  Fluency/Punctuation 0.1, Non-translation 25, Neutral/No-error 0); system score = mean
  segment score over segments and raters (lower is better).

Public functions and classes:

- :func:`validate_judgment` -- one annotator's spans on one text, checked and cleaned into
  a :class:`SpanJudgment` (offsets in Unicode code points, the span text stored beside them),
  or a ``ValueError`` naming the field (``spans[2].end``, ``score``...).
- :func:`code_point_offset` -- a browser's UTF-16 offset as a code-point offset; refuses an
  offset between the two halves of a surrogate pair.
- :class:`MQMWeights`, :data:`FREITAG_2021` -- error weights; :func:`mqm_system_scores` --
  per-segment sums and per-system means (and weighted errors per 100 words when word counts
  are given).
- :func:`esa_system_scores` -- per-system mean score with a cluster-bootstrap interval
  (:func:`rubrics.resampling.cluster_bootstrap_mean`, items as clusters);
  :func:`count_spans` -- span counts by system and severity (or category).

Agreement between annotators of the same text (character-level F1, spans matched,
Krippendorff's alpha of the scores) lives in :mod:`rubrics.spans_agreement`.

Offsets are half-open ``[start, end)`` code-point indexes into the text, as Python slices:
``text[start:end]`` is the span. Readers of other conventions (Appraise's inclusive
``end_i``, MQM's ``<v>...</v>`` markers) convert in :mod:`rubrics.span_files`.

As everywhere in ``rubrics``, an undefined statistic raises ``ValueError`` instead of
returning NaN.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubrics import resampling

__all__ = [
    "SEVERITIES",
    "DEFAULT_CATEGORIES",
    "MQM_MAX_SPANS",
    "MAX_NOTE_LENGTH",
    "Span",
    "SpanJudgment",
    "validate_judgment",
    "score_value",
    "code_point_offset",
    "MQMWeights",
    "FREITAG_2021",
    "MQMScore",
    "mqm_system_scores",
    "ESAScore",
    "esa_system_scores",
    "count_spans",
]

SEVERITIES = ("minor", "major")
DEFAULT_CATEGORIES = (
    "object",
    "attribute",
    "count",
    "spatial relation",
    "action",
    "text in the image",
    "hallucinated existence",
    "other",
)
# Freitag et al. 2021 asked raters for at most five errors per segment (the five most
# severe), "to temper the effect of long segments"; the default cap follows them.
MQM_MAX_SPANS = 5
MAX_NOTE_LENGTH = 500
_SURROGATES = range(0xD800, 0xE000)
_MARK_FIELDS = {"start", "end", "severity", "category", "note", "omission", "text"}


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """One clean error mark. ``start``/``end`` are None for an omission (nothing to point at)."""

    start: int | None
    end: int | None
    severity: str
    category: str
    text: str = ""
    note: str = ""

    @property
    def omission(self) -> bool:
        return self.start is None


@dataclass(frozen=True)
class SpanJudgment:
    """One annotator's clean judgment of one text: spans (in text order), score, unusable mark."""

    spans: tuple[Span, ...]
    score: float | None
    unusable: bool = False

    def counts(self) -> Counter[str]:
        """Number of marks by severity (omissions included)."""
        return Counter(span.severity for span in self.spans)


def _has_surrogate(value: str) -> bool:
    return any(ord(ch) in _SURROGATES for ch in value)


def _checked_text(value: Any, name: str, *, max_length: int | None = None) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    # A lone surrogate (half of a UTF-16 pair) is not a character: it cannot be stored as
    # UTF-8 and would shift every later offset by one between browser and server.
    if _has_surrogate(value):
        raise ValueError(f"{name} contains a lone surrogate (half of a UTF-16 pair)")
    if max_length is not None and len(value) > max_length:
        raise ValueError(f"{name} is longer than {max_length} characters")
    return value


def _short(value: Any, limit: int = 40) -> str:
    """repr() cut to ``limit`` characters: a message quotes what was sent, not all of it."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _offset(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{name} must be a whole number (a code-point offset), got {_short(value)}"
        )
    return int(value)


def score_value(value: Any) -> float:
    """``value`` as a float when it is a real number from 0 to 100 (an ESA score)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"score must be a number from 0 to 100, got {_short(value)}")
    number = float(value)
    if not math.isfinite(number) or not 0 <= number <= 100:
        raise ValueError(f"score must be a number from 0 to 100, got {_short(value)}")
    return number


def validate_judgment(
    text: str,
    spans: Sequence[Mapping[str, Any]],
    *,
    score: Any = None,
    unusable: bool = False,
    categories: Sequence[str] | None = DEFAULT_CATEGORIES,
    max_spans: int = MQM_MAX_SPANS,
    allow_overlap: bool = False,
    require_score: bool = True,
) -> SpanJudgment:
    """Check one annotator's marks on ``text`` and return them clean, or raise ValueError.

    Each element of ``spans`` is a mapping with ``severity`` ("minor"/"major"),
    ``category`` (one of ``categories``; ``categories=None`` accepts any and stores ""),
    an optional ``note`` and either ``start``/``end`` (half-open code-point offsets,
    ``0 <= start < end <= len(text)``, optionally with ``text``, the characters the page
    highlighted, which must equal ``text[start:end]``) or ``omission: True`` (no offsets;
    a note is required: an omission points at nothing, so the note says what is missing).
    Any other field is refused.
    ``unusable`` marks the whole text as unusable (MQM's Non-translation); it stands
    alone, so spans beside it are refused. ``max_spans`` caps the marks (omissions
    included); overlapping spans are refused unless ``allow_overlap``. ``score`` is the
    ESA score 0-100 (required unless ``require_score=False``).

    Messages name the field: ``spans[1].end: ...``. The returned spans are sorted by
    position (omissions last) and carry ``text[start:end]``.
    """
    text = _checked_text(text, "text")
    if isinstance(spans, str | bytes) or not isinstance(spans, Sequence):
        raise ValueError("spans must be a list of marks")
    if isinstance(max_spans, bool) or not isinstance(max_spans, int) or max_spans < 1:
        raise ValueError(f"max_spans must be a whole number >= 1, got {max_spans!r}")
    if not isinstance(unusable, bool):
        raise ValueError(f"unusable must be true or false, got {_short(unusable)}")
    allowed = None if categories is None else {c.casefold(): c for c in categories}
    if len(spans) > max_spans:
        raise ValueError(f"spans: {len(spans)} marks, at most {max_spans} are allowed")
    if unusable and spans:
        raise ValueError("unusable: the whole text is marked unusable; remove the other marks")
    clean = [_checked_mark(raw, f"spans[{i}]", text, allowed) for i, raw in enumerate(spans)]
    positioned = sorted((s for s in clean if not s.omission), key=lambda s: (s.start, s.end))
    if not allow_overlap:
        _check_no_overlap(positioned)
    if score is None:
        if require_score:
            raise ValueError("score must be a number from 0 to 100, got None")
        clean_score = None
    else:
        clean_score = score_value(score)
    omissions = [s for s in clean if s.omission]
    return SpanJudgment(tuple(positioned + omissions), clean_score, unusable)


def _checked_mark(raw: Any, where: str, text: str, allowed: dict[str, str] | None) -> Span:
    """One mark of ``validate_judgment``, clean, or a ValueError naming ``where``."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping, got {type(raw).__name__}")
    unknown = set(raw) - _MARK_FIELDS
    if unknown:
        # a misspelt field ("severty") must not pass as a mark without it
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    severity = raw.get("severity")
    if not isinstance(severity, str) or severity.casefold() not in SEVERITIES:
        raise ValueError(f"{where}.severity must be one of {SEVERITIES}, got {_short(severity)}")
    category = _checked_category(raw.get("category"), where, allowed)
    note = raw.get("note")
    note = _checked_text("" if note is None else note, f"{where}.note", max_length=MAX_NOTE_LENGTH)
    omission = raw.get("omission", False)
    if not isinstance(omission, bool):
        raise ValueError(f"{where}.omission must be true or false, got {_short(omission)}")
    if omission:
        if raw.get("start") is not None or raw.get("end") is not None:
            raise ValueError(f"{where}: an omission has no start or end")
        if not note.strip():
            raise ValueError(f"{where}.note: an omission needs a short note of what is missing")
        return Span(None, None, severity.casefold(), category, "", note)
    start, end = _checked_range(raw, where, len(text))
    marked = text[start:end]
    claimed = raw.get("text")
    if claimed is not None and claimed != marked:
        # The page sends the characters it highlighted; a mismatch means the offsets were
        # counted another way (UTF-16 units, text after normalisation) and point elsewhere.
        raise ValueError(
            f"{where}.text {_short(claimed)} is not the text at {start}..{end} "
            f"({_short(marked)}); "
            "offsets must count code points"
        )
    return Span(start, end, severity.casefold(), category, marked, note)


def _checked_category(given: Any, where: str, allowed: dict[str, str] | None) -> str:
    if allowed is None:
        return ""
    if not isinstance(given, str) or given.casefold() not in allowed:
        raise ValueError(
            f"{where}.category must be one of the study's categories "
            f"({', '.join(allowed.values())}), got {_short(given)}"
        )
    return allowed[given.casefold()]


def _checked_range(raw: Mapping[str, Any], where: str, length: int) -> tuple[int, int]:
    start = _offset(raw.get("start"), f"{where}.start")
    end = _offset(raw.get("end"), f"{where}.end")
    if start < 0 or start > length:
        raise ValueError(f"{where}.start {start} is outside the text (0..{length})")
    if end < 0 or end > length:
        raise ValueError(f"{where}.end {end} is outside the text (0..{length})")
    if start >= end:
        raise ValueError(f"{where}.end must be greater than start (got {start}..{end})")
    return start, end


def _check_no_overlap(positioned: Sequence[Span]) -> None:
    for before, after in zip(positioned, positioned[1:], strict=False):
        if after.start < before.end:  # type: ignore[operator]
            raise ValueError(
                f"spans: {before.start}..{before.end} and {after.start}..{after.end} overlap"
            )


def code_point_offset(text: str, utf16_offset: int) -> int:
    """Convert an offset in UTF-16 code units (JavaScript string indexes) to code points.

    A browser counts a character outside the Basic Multilingual Plane (most emoji) as two
    units; Python counts one. Raises ValueError when the offset falls between the two
    halves of a surrogate pair or outside the text.
    """
    units = 0
    for index, ch in enumerate(text):
        if units == utf16_offset:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > utf16_offset:
            raise ValueError(
                f"offset {utf16_offset} falls inside a surrogate pair (character {index})"
            )
    if units == utf16_offset:
        return len(text)
    raise ValueError(f"offset {utf16_offset} is outside the text ({units} UTF-16 units)")


# ---------------------------------------------------------------------------
# MQM weighting
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MQMWeights:
    """Error weights by severity, with (category, severity) overrides.

    Severities and categories are compared case-insensitively. ``overrides`` maps
    ``(category, severity)`` to a weight; severity ``"*"`` applies to every severity of that
    category (Freitag et al.'s Non-translation is a whole-segment category worth 25 whatever
    its severity). ``zero`` lists severities worth 0: MQM's Neutral and the TED files'
    ``No-error`` (a row saying the rater saw the segment and found nothing, which must count
    as a segment with score 0). ``critical=None`` refuses Critical: Freitag et al. have no
    Critical level, and guessing its weight would change the ranking silently.
    """

    major: float = 5.0
    minor: float = 1.0
    critical: float | None = None
    zero: tuple[str, ...] = ("neutral", "no-error")
    overrides: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("major", "minor", "critical"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"{name} weight must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} weight must be finite and >= 0, got {value!r}")
        for key, value in self.overrides.items():
            if not (
                isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)
            ):
                raise ValueError(f"override keys must be (category, severity), got {key!r}")
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
                raise ValueError(f"override {key!r} must be a number >= 0, got {value!r}")

    def weight(self, category: str, severity: str) -> float:
        """The weight of one error; ValueError for a severity the weights do not know."""
        cat, sev = category.casefold(), severity.casefold()
        lowered = {(c.casefold(), s.casefold()): w for (c, s), w in self.overrides.items()}
        if (cat, sev) in lowered:
            return float(lowered[(cat, sev)])
        if (cat, "*") in lowered:
            return float(lowered[(cat, "*")])
        if sev in self.zero:
            return 0.0
        if sev == "major":
            return float(self.major)
        if sev == "minor":
            return float(self.minor)
        if sev == "critical" and self.critical is not None:
            return float(self.critical)
        raise ValueError(f"severity {severity!r} has no weight (category {category!r})")


FREITAG_2021 = MQMWeights(
    major=5.0,
    minor=1.0,
    overrides={("Fluency/Punctuation", "minor"): 0.1, ("Non-translation", "*"): 25.0},
)


@dataclass(frozen=True)
class MQMScore:
    """A system's MQM score: mean weighted errors per (segment, rater), and per 100 words."""

    mean: float
    n_segments: int
    total: float
    per_100_words: float | None


def mqm_system_scores(
    systems: Sequence[Hashable],
    segments: Sequence[Hashable],
    raters: Sequence[Hashable],
    categories: Sequence[str],
    severities: Sequence[str],
    weights: MQMWeights = FREITAG_2021,
    *,
    words: Mapping[tuple[Hashable, Hashable], int] | None = None,
) -> dict[Hashable, MQMScore]:
    """Per-system MQM scores from one row per error (Freitag et al. 2021).

    Row i is one error (or a No-error row) of ``systems[i]`` on ``segments[i]`` by
    ``raters[i]``. The segment score is one rater's sum of weights for one segment of one
    system; the system score is the mean over its (segment, rater) units, so a rater who
    found nothing still counts (with a No-error row). ``words`` (optional) maps
    ``(system, segment)`` to the word count of that output; then ``per_100_words`` =
    100 x total weight / total words rated (each unit's words counted once per rater).
    """
    n = len(systems)
    if not n:
        raise ValueError("no rows to score")
    if not (len(segments) == len(raters) == len(categories) == len(severities) == n):
        raise ValueError("systems, segments, raters, categories and severities differ in length")
    cache: dict[tuple[str, str], float] = {}
    units: dict[tuple[Hashable, Hashable, Hashable], float] = defaultdict(float)
    for i in range(n):
        key = (categories[i], severities[i])
        w = cache.get(key)
        if w is None:
            try:
                w = cache[key] = weights.weight(*key)
            except ValueError as exc:
                raise ValueError(f"row {i}: {exc}") from None
        units[(systems[i], segments[i], raters[i])] += w
    by_system: dict[Hashable, list[tuple[Hashable, float]]] = defaultdict(list)
    for (system, segment, _rater), total in units.items():
        by_system[system].append((segment, total))
    result: dict[Hashable, MQMScore] = {}
    for system, rows in by_system.items():
        values = np.array([v for _, v in rows], dtype=np.float64)
        per_100 = None
        if words is not None:
            try:
                n_words = sum(words[(system, segment)] for segment, _ in rows)
            except KeyError as exc:
                raise ValueError(f"words has no count for {exc.args[0]!r}") from None
            if n_words <= 0:
                raise ValueError(f"system {system!r}: no words to divide by")
            per_100 = float(100.0 * values.sum() / n_words)
        result[system] = MQMScore(float(values.mean()), len(rows), float(values.sum()), per_100)
    return result


# ---------------------------------------------------------------------------
# ESA
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ESAScore:
    """A system's mean ESA score, its bootstrap interval and how many judgments it rests on."""

    mean: float
    low: float
    high: float
    n: int


def esa_system_scores(
    systems: Sequence[Hashable],
    items: Sequence[Hashable],
    scores: Sequence[float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: resampling.Seed = 0,
) -> dict[Hashable, ESAScore]:
    """Per-system mean ESA score with a percentile cluster-bootstrap interval.

    The ESA score of a system is the plain mean of its scores (Kocmi et al. 2024). The
    interval resamples items (clusters: several annotators of one item move together,
    so agreeing raters do not narrow it) with :func:`rubrics.resampling.cluster_bootstrap_mean`;
    each system gets its own stream seeded by ``seed``.
    """
    if not (len(systems) == len(items) == len(scores)):
        raise ValueError("systems, items and scores differ in length")
    if not len(systems):
        raise ValueError("no scores")
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, system in enumerate(systems):
        groups[system].append(i)
    values = np.array([score_value(s) for s in scores], dtype=np.float64)
    # Codes by first appearance, not hash(): str hashes change between processes, and the
    # clusters' sort order decides which draws a seed gives.
    codes = {item: i for i, item in enumerate(dict.fromkeys(items))}
    item_codes = np.array([codes[x] for x in items], dtype=np.int64)
    result: dict[Hashable, ESAScore] = {}
    for system, rows in groups.items():
        idx = np.asarray(rows)
        est = resampling.cluster_bootstrap_mean(
            values[idx], item_codes[idx], n_resamples, confidence, seed
        )
        result[system] = ESAScore(est.mean, est.low, est.high, len(rows))
    return result


def count_spans(
    systems: Sequence[Hashable], labels: Sequence[Hashable]
) -> dict[Hashable, Counter[Hashable]]:
    """Counts of marks by system and label (a severity, a category or a pair of both)."""
    if len(systems) != len(labels):
        raise ValueError("systems and labels differ in length")
    result: dict[Hashable, Counter[Hashable]] = defaultdict(Counter)
    for system, label in zip(systems, labels, strict=True):
        result[system][label] += 1
    return dict(result)
