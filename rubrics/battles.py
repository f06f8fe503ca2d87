"""Readers for published battle logs (pure Python; no Django).

PROTOCOLS.md section 5. Two formats:

- :func:`read_battles_jsonl` -- JSON Lines in LMArena's schema: ``model_a``, ``model_b``,
  ``winner`` in ``model_a | model_b | tie | tie (bothbad)``, optional ``judge``,
  ``caption_a``, ``caption_b``, ``image`` (strings or null). ``model_a`` is the side
  shown left, as in LMArena's logs.
- :func:`read_iiw_sxs` -- ImageInWords' side-by-side files (Garg et al. 2024,
  github.com/google/imageinwords, CC-BY-4.0): ``DCI_Test.jsonl`` (IIW vs DCI),
  ``DOCCI_Test.jsonl`` (IIW vs DOCCI) and ``IIW-400.jsonl`` (two SxS columns: IIW-Human
  vs GPT-4V and IIW-Human vs IIW-P5B). Each comparison is one battle with its five
  per-criterion labels, coded -2..2 from side A's view (A is always the IIW description).
  What the files lack is stated per comparison in ``missing``: no file holds images
  (only ids), DCI-Test holds only the IIW text, IIW-400 has no GPT-4V text.

Bad lines raise ``ValueError`` naming the line number (1-based, counting blank lines,
which are skipped) and the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rubrics import json_text

OUTCOMES: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")
CRITERIA: tuple[str, ...] = (
    "Comprehensiveness",
    "Specificity",
    "Hallucination",
    "First few line(s) as tldr",
    "Human Like",
)
_OPTIONAL = ("judge", "caption_a", "caption_b", "image")


@dataclass(frozen=True)
class Battle:
    line: int
    model_a: str
    model_b: str
    winner: str
    judge: str | None = None
    caption_a: str | None = None
    caption_b: str | None = None
    image: str | None = None


def _objects(lines: Iterable[str]) -> Iterable[tuple[int, dict]]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        # Syntax, nesting past Python's recursion, an integer too long: all with the line.
        obj = json_text.loads(raw, first_line=number)
        if not isinstance(obj, dict):
            raise ValueError(f"line {number}: expected a JSON object, got {type(obj).__name__}")
        yield number, obj


def _text(number: int, obj: dict, key: str, required: bool) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"line {number}: field {key!r} is missing")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f"line {number}: field {key!r} must be a non-empty string")
    return value


def read_battles_jsonl(lines: Iterable[str]) -> list[Battle]:
    """Parse LMArena-schema JSON Lines; unknown extra fields are ignored."""
    battles: list[Battle] = []
    for number, obj in _objects(lines):
        a = _text(number, obj, "model_a", True)
        b = _text(number, obj, "model_b", True)
        winner = obj.get("winner")
        if winner not in OUTCOMES:
            raise ValueError(
                f"line {number}: field 'winner' is {winner!r}, not one of {', '.join(OUTCOMES)}"
            )
        if a == b:
            raise ValueError(f"line {number}: model_a and model_b are both {a!r}")
        extra = {key: _text(number, obj, key, False) for key in _OPTIONAL}
        battles.append(Battle(number, a, b, winner, **extra))  # type: ignore[arg-type]
    if not battles:
        raise ValueError("no battles in the file")
    return battles


@dataclass(frozen=True)
class SxSComparison:
    line: int
    source: str  # file stem, e.g. "DCI_Test"
    image: str
    system_a: str  # the IIW description's name in the file's labels
    system_b: str
    caption_a: str | None
    caption_b: str | None
    labels: dict[str, int]  # criterion -> -2..2, positive = A better
    raw_labels: dict[str, str]
    missing: tuple[str, ...] = field(default_factory=tuple)


# Per file: the image key, and per SxS column (None = top-level metrics) the side names as
# the labels spell them and the text keys (None = the text is not in the file).
_SPECS: dict[str, tuple[str, list[tuple[str | None, str, str, str | None, str | None]]]] = {
    "DCI_Test": ("image", [(None, "IIW", "DCI", "IIW", None)]),
    "DOCCI_Test": ("image", [(None, "IIW", "DOCCI", "IIW", "DOCCI")]),
    "IIW-400": (
        "image/key",
        [
            ("iiw-human-sxs-gpt4v", "IIW-Human", "GPT-4V", "IIW", None),
            ("iiw-human-sxs-iiw-p5b", "IIW-Human", "IIW-P5B", "IIW", "IIW-P5B"),
        ],
    ),
}
SOURCES: tuple[str, ...] = tuple(_SPECS)


def label_code(label: str, system_a: str, system_b: str) -> int:
    """ImageInWords' 5-point label to -2..2 from A's view; ValueError if unknown."""
    codes = {
        f"{system_a} is substantially better": 2,
        f"{system_a} is marginally better": 1,
        "Neutral": 0,
        f"{system_b} is marginally better": -1,
        f"{system_b} is substantially better": -2,
    }
    if label not in codes:
        raise ValueError(f"label {label!r} is not one of: {', '.join(codes)}")
    return codes[label]


def read_iiw_sxs(lines: Iterable[str], source: str) -> list[SxSComparison]:
    """Parse one ImageInWords file; ``source`` is its stem (one of :data:`SOURCES`).

    A row of IIW-400 without an SxS column holds no comparison and is skipped (300 of
    its 400 rows are descriptions only).
    """
    if source not in _SPECS:
        raise ValueError(
            f"unknown ImageInWords file {source!r}; expected one of {', '.join(SOURCES)}"
        )
    image_key, columns = _SPECS[source]
    out: list[SxSComparison] = []
    for number, obj in _objects(lines):
        image = _text(number, obj, image_key, True)
        for column, name_a, name_b, text_a, text_b in columns:
            if column is None:
                metrics = obj
            else:
                metrics = obj.get(column)
                if metrics is None:
                    continue
                if not isinstance(metrics, dict):
                    raise ValueError(f"line {number}: field {column!r} must be an object")
            labels: dict[str, int] = {}
            raw: dict[str, str] = {}
            for criterion in CRITERIA:
                key = f"metrics/{criterion}"
                where = f"{column}.{key}" if column else key
                value = metrics.get(key)
                if not isinstance(value, str):
                    raise ValueError(f"line {number}: field {where!r} is missing or not a string")
                try:
                    labels[criterion] = label_code(value, name_a, name_b)
                except ValueError as exc:
                    raise ValueError(f"line {number}: field {where!r}: {exc}") from None
                raw[criterion] = value
            caption_a = _text(number, obj, text_a, True) if text_a else None
            caption_b = _text(number, obj, text_b, True) if text_b else None
            missing = ["image (the file holds only its id)"]
            if caption_b is None:
                missing.append(f"the {name_b} description (not in the file)")
            out.append(
                SxSComparison(
                    number,
                    source,
                    image,
                    name_a,
                    name_b,
                    caption_a,
                    caption_b,
                    labels,
                    raw,
                    tuple(missing),
                )
            )
    if not out:
        raise ValueError(f"no side-by-side comparisons in {source}")
    return out
