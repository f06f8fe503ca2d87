"""The arena's importer: published battle logs as closed arena studies.

Two formats (readers in ``rubrics/battles.py``):

- ``battles``: JSON Lines with LMArena's schema (``model_a``, ``model_b``, ``winner`` in
  ``model_a|model_b|tie|tie (bothbad)``, optional ``judge``, ``caption_a``, ``caption_b``,
  ``image``). ``model_a`` is the side that was shown left, as in LMArena's logs.
- ``iiw-sxs``: an ImageInWords side-by-side file (``DCI_Test.jsonl``, ``DOCCI_Test.jsonl``,
  ``IIW-400.jsonl``, named so); each comparison is a battle with its five per-criterion
  labels and no overall verdict (the release has none), so it enters the report's
  per-criterion table and not the leaderboard.

Each battle is one ``Item`` of kind ``battle`` in the arena's canonical order (the system
whose name sorts first is ``a``), answered once; each judge is one ``Participant`` (one
"dataset-judge" when the log names none). What a file lacks is kept as missing, never
invented: an image is cited by its id (no file), a missing description is an empty caption,
and the summary and the study's description say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation import filelimits
from annotation.errors import InvalidInput
from annotation.models import Caption, Image, Item, Participant, Study
from annotation.modes.arena.protocol import BATTLE, IIW_NAMES
from annotation.modes.importing import Answer, Importer, ImportRows, NewStudy, fileless_image
from rubrics import battles as readers

BATTLE_FORMATS = ("battles", "iiw-sxs")
#: LMArena's winner, as shown (model_a on the left), to the arena page's outcome.
_SHOWN = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "bothbad"}
_SWAP = {"model_a": "model_b", "model_b": "model_a"}
_CRITERION_KEYS = {iiw: key for key, iiw in IIW_NAMES.items()}


@dataclass(frozen=True)
class _Row:
    image: str
    system_a: str  # as in the file (a: shown left)
    system_b: str
    text_a: str | None
    text_b: str | None
    judge: str
    winner: str | None  # LMArena's name from the file's view; None: no overall verdict
    criteria: dict[str, int]  # our keys, from the file's A view
    line: int = 0
    # The stored fields as a reader names them: one-line names, and texts (captions).
    names: dict[str, str | None] = field(default_factory=dict)
    texts: dict[str, str | None] = field(default_factory=dict)


def _battle_rows(lines: list[str]) -> list[_Row]:
    return [
        _Row(
            b.image or f"battle-{b.line}",
            b.model_a,
            b.model_b,
            b.caption_a,
            b.caption_b,
            b.judge or "dataset-judge",
            b.winner,
            {},
            b.line,
            {"image": b.image, "model_a": b.model_a, "model_b": b.model_b, "judge": b.judge},
            {"caption_a": b.caption_a, "caption_b": b.caption_b},
        )
        for b in readers.read_battles_jsonl(lines)
    ]


def _sxs_rows(lines: list[str], stem: str) -> list[_Row]:
    return [
        _Row(
            c.image,
            c.system_a,
            c.system_b,
            c.caption_a,
            c.caption_b,
            "dataset-judge",
            None,
            {_CRITERION_KEYS[name]: value for name, value in c.labels.items()},
            c.line,
            {"image": c.image},
            {
                f"the {c.system_a} description": c.caption_a,
                f"the {c.system_b} description": c.caption_b,
            },
        )
        for c in readers.read_iiw_sxs(lines, stem)
    ]


def _missing(rows: list[_Row], fmt: str) -> list[str]:
    """What the file lacks, in words (the summary and the study's description)."""
    missing = ["image files: the file cites images by id only"]
    if any(row.image.startswith("battle-") for row in rows):
        missing.append("the image of some battles (each gets a placeholder id, battle-<line>)")
    for side in ("a", "b"):
        systems = sorted(
            {getattr(row, f"system_{side}") for row in rows if getattr(row, f"text_{side}") is None}
        )
        if systems:
            missing.append(f"caption texts of {', '.join(systems)} (not in the file)")
    if fmt == "iiw-sxs":
        missing.append(
            "an overall verdict: ImageInWords' SxS has per-criterion labels only, so these "
            "battles enter the per-criterion results and not the leaderboard"
        )
    return missing


def read_battles(path: Path, fmt: str) -> tuple[list[_Row], list[str]]:
    """The file's battles and what it lacks; InvalidInput naming the bad lines."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path.name}: cannot read the file ({exc})", field="file") from exc
    try:
        rows = _battle_rows(lines) if fmt == "battles" else _sxs_rows(lines, path.stem)
    except ValueError as exc:
        raise InvalidInput(f"{path.name}: {exc}", field="file") from exc
    # What is stored must be storable: a NUL (PostgreSQL), half a surrogate pair (UTF-8).
    problems = [
        problem
        for row in rows
        for problem in filelimits.field_problems(
            f"line {row.line}", {**row.names, **row.texts}, multiline=row.texts
        )
    ]
    if problems:
        raise InvalidInput(
            f"{path.name}: " + "; ".join(problems[:20]),
            field="file",
            details={"errors": problems},
        )
    return rows, _missing(rows, fmt)


def _answer(row: _Row, swap: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The battle's payload as the arena page posts it and the result the server keeps,
    in the item's canonical order (``swap``: the file's a is the item's b)."""
    payload: dict[str, Any] = {"left": "b" if swap else "a"}
    result: dict[str, Any] = {"imported": True, "pair_probability": 1.0}
    if row.winner is not None:
        payload["outcome"] = _SHOWN[row.winner]
        result["winner"] = _SWAP.get(row.winner, row.winner) if swap else row.winner
    else:
        result["winner"] = None
    if row.criteria:
        payload["criteria"] = row.criteria
        sign = -1 if swap else 1
        result["criteria"] = {k: sign * v for k, v in row.criteria.items()}
    return payload, result


class _BattleRows:
    """The battles' rows for a new study, step by step (each once the previous is saved)."""

    def __init__(self, rows: list[_Row]):
        self.rows = rows
        self.images: dict[str, Image] = {}
        self.captions: dict[tuple[str, str, str], Caption] = {}
        self.judges: dict[str, Participant] = {}
        self.items: list[Item] = []
        self.answered: list[tuple[Participant, dict[str, Any], dict[str, Any]]] = []

    def image_rows(self, study: Study) -> list[Image]:
        for row in self.rows:
            if row.image not in self.images:
                self.images[row.image] = fileless_image(
                    study=study, name=row.image[:255], source=row.image[:500]
                )
        return list(self.images.values())

    def caption_rows(self, study: Study) -> list[Caption]:
        # One caption per (image, system, text): a system's text of an image is shared by
        # its battles there.
        for row in self.rows:
            for system, text in ((row.system_a, row.text_a), (row.system_b, row.text_b)):
                key = (row.image, system, text or "")
                if key not in self.captions:
                    self.captions[key] = Caption(
                        study=study,
                        image=self.images[row.image],
                        system=system[:100],
                        raw_text=text or "",
                        text=text or "",
                        purpose=Caption.Purpose.STUDY,
                        line=len(self.captions) + 1,
                    )
        return list(self.captions.values())

    def judge_rows(self, study: Study) -> list[Participant]:
        self.judges = {
            judge: Participant(
                study=study,
                source=Participant.Source.ACCOUNT,
                external_id=judge[:200],
                state={"imported": True},
            )
            for judge in sorted({row.judge for row in self.rows})
        }
        return list(self.judges.values())

    def item_rows(self, study: Study) -> list[Item]:
        for position, row in enumerate(self.rows):
            caption_a = self.captions[(row.image, row.system_a, row.text_a or "")]
            caption_b = self.captions[(row.image, row.system_b, row.text_b or "")]
            swap = row.system_a > row.system_b
            if swap:
                caption_a, caption_b = caption_b, caption_a
            self.items.append(
                Item(
                    study=study,
                    kind=BATTLE,
                    image=self.images[row.image],
                    position=position,
                    target=1,
                    judgment_count=1,
                    spec={
                        "caption_a": caption_a.pk,
                        "caption_b": caption_b.pk,
                        "system_a": caption_a.system,
                        "system_b": caption_b.system,
                        "image_id": self.images[row.image].pk,
                    },
                )
            )
            self.answered.append((self.judges[row.judge], *_answer(row, swap)))
        return self.items

    def answers(self, study: Study) -> list[Answer]:
        return [
            Answer(item, judge, payload, result)
            for item, (judge, payload, result) in zip(self.items, self.answered, strict=True)
        ]


class BattleImporter(Importer):
    """A battle log (``battles``) or an ImageInWords SxS file (``iiw-sxs``)."""

    formats = BATTLE_FORMATS

    def read(self, path: Path, fmt: str, **options: Any) -> ImportRows:
        rows, missing = read_battles(path, fmt)
        built = _BattleRows(rows)
        captions = len({(r.image, s, t or "") for r in rows for s, t in _sides(r)})
        return ImportRows(
            study=NewStudy(
                name=path.name,
                settings={"catch_rate": 0, "min_seconds": 0, "criteria": fmt == "iiw-sxs"},
                description=("Imported; missing: " + "; ".join(missing) + ".")[:2000],
            ),
            steps=(built.image_rows, built.caption_rows, built.judge_rows, built.item_rows),
            answers=built.answers,
            summary=(
                f"{len(rows)} battles, {captions} captions, closed.",
                *(f"Missing: {what}." for what in missing),
            ),
            details={"battles": len(rows), "missing": tuple(missing)},
        )


def _sides(row: _Row) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    return ((row.system_a, row.text_a), (row.system_b, row.text_b))
