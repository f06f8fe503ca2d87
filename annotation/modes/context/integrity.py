"""The context mode's check of crowd workers: the constant-rating rule
(``rubrics/context/checks.py``), applied once, when a worker reaches the code's count or
the study runs out of work for them, over every before-image rating they gave.

A flagged worker is excluded (a flag with its reason; their judgments stay, marked), is
screened out where the study pays screen-outs, and reads why instead of the code
(``completion_withheld``), as in the arena (issue 45, row 4).
"""

from __future__ import annotations

from typing import Any

from annotation.models import Judgment, Participant
from rubrics.context.checks import rating_pattern
from rubrics.context.questions import BEFORE

PATTERN_FLAG = "rating_pattern"


def is_flagged(participant: Participant) -> bool:
    return any(
        isinstance(flag, dict) and flag.get("kind") == PATTERN_FLAG
        for flag in participant.flags or []
    )


def withheld(participant: Participant) -> str:
    """The sentence a flagged worker reads in place of the code ("" when not flagged)."""
    if not is_flagged(participant):
        return ""
    reason = next(
        str(flag.get("detail") or "")
        for flag in participant.flags
        if isinstance(flag, dict) and flag.get("kind") == PATTERN_FLAG
    )
    return (
        f"Your answers did not pass this study's checks ({reason}), so they are excluded "
        "and do not earn the completion code."
    )


def pattern_fields(
    participant: Participant, config: Any, state: dict[str, Any], latest: dict[str, Any]
) -> dict[str, Any]:
    """``Outcome`` fields of the rule over the worker's stored before-image ratings and
    ``latest`` (the payload being stored, ``{}`` when none); sets ``state["pattern"]``.
    Registered annotators are not crowd workers: no code, no rule."""
    if participant.source == Participant.Source.ACCOUNT or "pattern" in state:
        return {}
    stored = Judgment.objects.filter(participant_id=participant.pk, part=0).values_list(
        "payload", flat=True
    )
    ratings = [payload[name] for payload in [*stored, latest] for name in BEFORE if name in payload]
    pattern = rating_pattern(ratings, max_share=config.answer_max_share)
    if not pattern.constant:
        state["pattern"] = "passed"
        return {}
    state["pattern"] = "flagged"
    reason = f"rating pattern: {pattern.reason()}"
    return {
        "flags": ({"kind": PATTERN_FLAG, "detail": pattern.reason()},),
        "exclude_participant": reason,
        **({"screen_out": reason} if config.screens_out else {}),
    }
