"""The error-span protocol: mark what is wrong in one caption, then score it (ESA, MQM).

PROTOCOLS.md section 6; the rules are ``rubrics.spans`` (validation in code points, MQM
weights) and ``docs/protocol-choices.md``, "Error spans". An item is one caption::

    spec = {"caption": <id>, "system": "..."}

The payload is the annotator's marks and score as ``rubrics.spans.validate_judgment``
cleaned them: ``{"spans": [{"start", "end", "severity", "category", "text", "note",
"omission"}], "score": 0-100, "unusable": bool}``. Offsets are half-open code-point
indexes into the caption's stored text, and the page sends each span's ``text`` beside
them, so offsets counted another way (UTF-16 units) are refused rather than stored
pointing at the wrong characters. The result holds the MQM-weighted errors with the
study's weights, so the report and the export need not re-weight every judgment.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from annotation.errors import InvalidInput
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study, rows
from annotation.modes.base import CompletionProgress, Mode, Outcome
from annotation.modes.settings import (
    CHECKS,
    CROWD,
    MAX_RESAMPLES,
    REPORT,
    CrowdSettings,
    flag,
    number,
    text,
    whole,
)
from rubrics import spans as rules

CAPTION = "caption"
#: How many of a study's caption items are served (``target`` above 0). Params: study id,
#: ``CAPTION``.
SERVED_CAPTIONS = f"""SELECT COUNT(*) FROM "{Item._meta.db_table}"
WHERE "study_id" = %s AND "kind" = %s AND "target" > 0"""
#: Longest JSON list of marks a page may post: 50 marks of a 500-character note each is
#: about 30 kB; anything longer is refused before it is parsed.
MAX_SPANS_JSON = 64_000
#: Most categories a study may list (a page of radio buttons stays usable).
MAX_CATEGORIES = 30
#: The report's choices of the system table's order (``SpansSettings.ranking``).
RANKINGS = ("auto", "esa", "mqm")
# The category may itself hold a slash (MQM's "Fluency/Punctuation"): the severity is
# whatever follows the last one.
_OVERRIDE = re.compile(r"^\s*(.+?)\s*/\s*(minor|major|\*)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*$")


def parse_categories(value: str) -> tuple[str, ...]:
    """The comma-separated category list of the settings; ValueError if empty or repeated."""
    names = tuple(part.strip() for part in value.split(",") if part.strip())
    if not names:
        raise ValueError("categories: list at least one category, separated by commas")
    if len({n.casefold() for n in names}) != len(names):
        raise ValueError("categories: a category is listed twice")
    if len(names) > MAX_CATEGORIES:
        raise ValueError(f"categories: at most {MAX_CATEGORIES} categories")
    return names


def parse_overrides(value: str) -> dict[tuple[str, str], float]:
    """``"count/major=10; other/*=0.5"`` as MQM weight overrides (``rubrics.spans.MQMWeights``)."""
    overrides: dict[tuple[str, str], float] = {}
    for part in value.split(";"):
        if not part.strip():
            continue
        match = _OVERRIDE.match(part)
        if match is None:
            raise ValueError(
                f"weight_overrides: {part.strip()!r} is not category/severity=weight "
                "(severity minor, major or *)"
            )
        category, severity, weight = match.groups()
        overrides[(category, severity)] = float(weight)
    return overrides


@dataclass(frozen=True)
class SpansSettings(CrowdSettings):
    categories: str = text(
        ", ".join(rules.DEFAULT_CATEGORIES),
        max_length=1000,
        label="Error categories",
        doc="Error categories annotators choose from, separated by commas.",
    )
    # MQM asks for at most five errors per segment (Freitag et al. 2021); 50 marks is far
    # past any caption of 400 words and bounds what one submission stores.
    max_spans: int = whole(
        rules.MQM_MAX_SPANS,
        label="Most marks per caption",
        low=1,
        high=50,
        doc="Marks one annotator may make on a caption.",
    )
    allow_overlap: bool = flag(
        False, label="Marks may overlap", doc="Allow two marked spans to share characters."
    )
    major_weight: float = number(
        5,
        label="Weight of a major error",
        group=REPORT,
        low=0,
        high=1000,
        doc="MQM weight of a major error.",
    )
    minor_weight: float = number(
        1,
        label="Weight of a minor error",
        group=REPORT,
        low=0,
        high=1000,
        doc="MQM weight of a minor error.",
    )
    # MQM's Non-translation is worth 25 (Freitag et al.); a whole caption marked unusable
    # is its analogue here.
    unusable_weight: float = number(
        25,
        label="Weight of an unusable caption",
        group=REPORT,
        low=0,
        high=1000,
        doc="MQM weight of a caption marked unusable as a whole.",
    )
    weight_overrides: str = text(
        "",
        label="Weights of single categories",
        group=REPORT,
        max_length=1000,
        doc="Category weights, e.g. 'count/major=10; other/*=0.5' (severity minor, major, *).",
    )
    # Annotators per caption; 2 or more gives span agreement. 100 is far past any use.
    target: int = whole(
        3,
        label="Annotators who mark each caption",
        group=CHECKS,
        low=1,
        high=100,
        doc="Annotators who mark each caption.",
    )
    # Server-measured; a 400-word caption takes minutes, an hour is past any.
    min_seconds: int = whole(
        10,
        label="Least seconds before an answer counts",
        group=CHECKS,
        low=0,
        high=3600,
        doc="Seconds a caption must be shown before an answer counts.",
    )
    # ESA-AI (Zouhar et al. 2025): spans a judge or metric suggested
    # (``manage.py import_span_suggestions``), each accepted or rejected by the annotator.
    suggestions: bool = flag(
        False,
        label="Show suggested spans to accept or reject",
        doc="Show imported suggested spans for annotators to accept or reject.",
    )
    # The mode had no crowd completion at all (issue 46, row 20): a paid worker could never
    # earn the code. A detailed caption takes minutes to mark; 10,000 bounds the count.
    completion_captions: int = whole(
        10,
        label="Captions a crowd worker marks to earn the code",
        group=CROWD,
        low=1,
        high=10_000,
        doc="Captions a crowd worker marks to earn the completion code.",
    )
    bootstrap_resamples: int = whole(
        1000,
        label="Resamples for the confidence intervals",
        low=100,
        high=MAX_RESAMPLES,
        doc="Resamples of the report's bootstrap intervals of the ESA scores.",
        report=True,
    )
    # Two campaigns of the same items (issue 47): their agreement (modes/spans/compare.py).
    compare_study: int = whole(
        None,
        optional=True,
        label="Compare spans with study (its number)",
        group=REPORT,
        low=1,
        high=2**31 - 1,
        doc="Another error-span study of the same captions: the report gives the span "
        "agreement between this study's annotators and that one's. Empty: none.",
    )
    # The system table's order (issue 47): ESA's headline is its mean score, MQM's the
    # weighted errors; ordering an ESA campaign by errors put GPT4-5shot above refA.
    ranking: str = text(
        "auto",
        label="Systems ordered by",
        group=REPORT,
        choices=RANKINGS,
        doc="The score the system table is ordered by: esa (the mean score, highest first), "
        "mqm (weighted errors per caption, fewest first), auto (esa when the judgments carry "
        "scores, else mqm).",
    )

    def check(self) -> None:
        try:
            self.category_list()
            self.weights()
        except ValueError as exc:
            field = str(exc).split(":", 1)[0]
            raise InvalidInput(str(exc), field=field) from None

    def category_list(self) -> tuple[str, ...]:
        return parse_categories(self.categories)

    def weights(self) -> rules.MQMWeights:
        return rules.MQMWeights(
            major=self.major_weight,
            minor=self.minor_weight,
            overrides=parse_overrides(self.weight_overrides),
        )


def weighted_errors(
    payload: dict[str, Any], config: SpansSettings, weights: rules.MQMWeights | None = None
) -> float:
    """The MQM-weighted errors of one judgment with the study's weights.

    A severity the weights do not know counts 0: only imports store one (ESA's
    "undecided"; MQM's Neutral and No-error are 0 by definition), and a study's own
    judgments are minor or major by validation. ``weights``: ``config.weights()`` made
    once by a caller weighting many judgments (parsing them is most of the cost).
    """
    if payload.get("unusable"):
        return float(config.unusable_weight)
    weights = weights or config.weights()
    total = 0.0
    for mark in payload["spans"]:
        try:
            total += weights.weight(mark["category"], mark["severity"])
        except ValueError:
            continue
    return total


def shown_suggestions(item: Item, config: SpansSettings) -> list[dict[str, Any]]:
    """The item's imported suggestions when the study shows them, else none."""
    return list(item.spec.get("suggestions") or []) if config.suggestions else []


def suggestion_decisions(item: Item, config: SpansSettings, posted: Any) -> list[dict[str, Any]]:
    """Each shown suggestion with the annotator's ``decision`` (accepted / rejected) and the
    mark it adds; InvalidInput when one is undecided or a decision names no suggestion."""
    shown = shown_suggestions(item, config)
    posted = posted or {}
    if not isinstance(posted, dict):
        raise InvalidInput("suggestions: the decisions must be a mapping.", field="suggestions")
    known = {s["id"] for s in shown}
    if set(posted) - known:
        raise InvalidInput(
            "suggestions: a decision names a suggestion this caption does not have.",
            field="suggestions",
        )
    undecided = [s["text"] for s in shown if posted.get(s["id"]) not in ("accept", "reject")]
    if undecided:
        raise InvalidInput(
            f"Suggestions: accept or reject each suggested error ({len(undecided)} left: "
            f"{', '.join(repr(t[:40]) for t in undecided[:3])}).",
            field="suggestions",
        )
    return [
        {
            "id": s["id"],
            "source": s["source"],
            "decision": "accepted" if posted[s["id"]] == "accept" else "rejected",
            "mark": {
                key: s[key] for key in ("start", "end", "text", "severity", "category", "note")
            },
        }
        for s in shown
    ]


def caption_of(item: Item) -> Caption:
    """The item's caption with its image: one fixed statement (``rows.by_pk``), as every
    page and answer reads it; built by the ORM it was a tenth of the request (issue 48)."""
    return rows.by_pk(Caption, item.spec["caption"], related="image")


def _field_of(message: str) -> str:
    """The form field a ``validate_judgment`` message names (``spans[2].end: ...``)."""
    head = re.split(r"[\s:.\[]", message, maxsplit=1)[0]
    return head if head in ("score", "unusable") else "spans"


class SpansProtocol(Mode):
    name = "spans"
    label = "Error spans (ESA / MQM)"
    settings_class = SpansSettings
    # Captions are numbered image by image: by position, every worker began on one image.
    order_per_worker = True

    def build_items(self, study: Study) -> list[Item]:
        """One item per study caption: the image and that caption."""
        config = self.settings(study)
        captions = study.captions.filter(purpose=Caption.Purpose.STUDY).order_by("id")
        items = [
            Item(
                study=study,
                kind=CAPTION,
                image_id=image_id,
                position=position,
                target=config.target,
                spec={"caption": caption_id, "system": system},
            )
            for position, (caption_id, image_id, system) in enumerate(
                captions.values_list("id", "image_id", "system")
            )
        ]
        if not items:
            raise InvalidInput("An error-span study needs captions; it has none.", field="captions")
        return items

    def min_seconds(self, assignment: Assignment) -> float:
        return float(self.settings(assignment.participant.study).min_seconds)

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """The marks and score checked against the caption's text (``validate_judgment``)."""
        config = self.settings(assignment.participant.study)
        marks = data.get("spans", [])
        if isinstance(marks, str):
            if len(marks) > MAX_SPANS_JSON:
                raise InvalidInput("spans: the list of marks is too long.", field="spans")
            try:
                marks = json.loads(marks) if marks.strip() else []
            except ValueError:
                raise InvalidInput("spans: the marks are not a JSON list.", field="spans") from None
        if not isinstance(marks, list):
            raise InvalidInput("spans: the marks must be a list.", field="spans")
        if data.get("omission"):
            # The page's omission fields are one more mark, counted against the cap.
            marks = [*marks, data["omission"]]
        decisions = suggestion_decisions(assignment.item, config, data.get("suggestions"))
        # An accepted suggestion is one more mark, as suggested (checked as any mark is).
        marks = [*marks, *(d["mark"] for d in decisions if d["decision"] == "accepted")]
        caption = caption_of(assignment.item)
        try:
            clean = rules.validate_judgment(
                caption.text,
                marks,
                score=data.get("score"),
                unusable=data.get("unusable", False),
                categories=config.category_list(),
                max_spans=config.max_spans,
                allow_overlap=config.allow_overlap,
            )
        except ValueError as exc:
            message = str(exc)
            raise InvalidInput(
                message[:1].upper() + message[1:], field=_field_of(message)
            ) from None
        return {
            "spans": [
                {
                    "start": mark.start,
                    "end": mark.end,
                    "severity": mark.severity,
                    "category": mark.category,
                    "text": mark.text,
                    "note": mark.note,
                    "omission": mark.omission,
                }
                for mark in clean.spans
            ],
            "score": clean.score,
            "unusable": clean.unusable,
            **(
                {
                    "suggestions": [
                        {"id": d["id"], "source": d["source"], "decision": d["decision"]}
                        for d in decisions
                    ]
                }
                if decisions
                else {}
            ),
        }

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """Counts by severity and the MQM-weighted errors with the study's weights."""
        config = self.settings(assignment.participant.study)
        marks = payload["spans"]
        return {
            "minor": sum(1 for m in marks if m["severity"] == "minor"),
            "major": sum(1 for m in marks if m["severity"] == "major"),
            "omissions": sum(1 for m in marks if m["omission"]),
            "weighted": weighted_errors(payload, config),
        }

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        state = dict(participant.state or {})
        state["captions"] = state.get("captions", 0) + 1
        return Outcome(state=state)

    # Nobody marks a caption twice, so a study of fewer captions than the code's count could
    # pay nobody, and a worker arriving when the last captions were taken got nothing
    # (issue 46, row 2, as in the arena): the count is capped by the captions, and a worker
    # the study runs out of captions for is paid for those they marked.

    def _needed(self, study: Study) -> int:
        wanted = self.settings(study).completion_captions
        # No caption item yet (a draft): nothing to cap by. Items a people + judge design
        # left out (target 0) are never served, so they do not count. Every page and answer
        # asks: one fixed statement (issue 48; the ORM's count cost more to build than to run).
        with rows.cursor() as cursor:
            cursor.execute(SERVED_CAPTIONS, [study.pk, CAPTION])
            (captions,) = cursor.fetchone()
        return min(wanted, captions) if captions else wanted

    def completion_earned(self, participant: Participant) -> bool:
        state = participant.state or {}
        return bool(state.get("exhausted")) or state.get("captions", 0) >= self._needed(
            participant.study
        )

    def completion_progress(self, participant: Participant) -> CompletionProgress:
        done = (participant.state or {}).get("captions", 0)
        return CompletionProgress(done, self._needed(participant.study), "captions")

    def completion_reach(self, study: Study) -> str:
        wanted = self.settings(study).completion_captions
        # Items a people + judge design left out (target 0) are never served.
        captions = Item.objects.filter(study_id=study.pk, kind=CAPTION, target__gt=0).count()
        if not captions or captions >= wanted:
            return ""
        return (
            f"The completion code asks for {wanted} captions, but one crowd worker can be "
            f"served at most {captions} (nobody marks a caption twice, and the study has "
            f"{captions}). Workers are given the code after {captions}. For the count you "
            'set, import more captions, or lower "Captions a crowd worker marks to earn '
            'the code".'
        )

    def completion_exhausted(self, participant: Participant) -> Outcome | None:
        state = dict(participant.state or {})
        if not state.get("captions") or state.get("exhausted"):
            return None  # nothing marked (an id arriving after the work is gone), or paid
        return Outcome(state={**state, "exhausted": True})
