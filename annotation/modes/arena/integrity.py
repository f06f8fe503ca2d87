"""The arena's checks of a crowd worker before the completion code (issue 45, row 4;
docs/protocol-choices.md, "Arena battles").

A bot answering "A", "tie" or "both bad" on every battle earned the code at 20 battles,
before the gold rule had seen its 3 gold battles (drawn at a 10% rate, they came after 28
to 56 answers), and nothing flagged a constant tie. Now:

- the first ``catch_min_seen`` gold battles are *scheduled*: one at a random place in each
  of equal stretches of the battles before the code's count (``rubrics.arena_workers.
  gold_positions``), so the gold rule has judged the worker by the count; gold battles count
  toward it (the worker cannot tell them apart, and a count that skipped them would);
- at the count, the constant-outcome and position-bias rules
  (``rubrics.arena_workers.answer_pattern``) are applied once to every answer so far; a
  worker they flag is flagged ``answer_pattern``, their judgments excluded (kept, with the
  reason), screened out where the study pays screen-outs, and served nothing more;
- ``completion_earned``: the count reached, both rules applied and passed.

Like the modes, nothing here writes: the protocol returns these in its ``Outcome``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from annotation.models import Judgment, Participant
from annotation.modes import catch
from annotation.modes.base import CompletionProgress
from rubrics import arena_workers as rules

#: The flag of a worker the constant-outcome or position-bias rule flagged at the count.
PATTERN_FLAG = "answer_pattern"


def is_flagged(participant: Participant) -> bool:
    return any(
        isinstance(flag, dict) and flag.get("kind") == PATTERN_FLAG
        for flag in participant.flags or []
    )


def flag_reason(participant: Participant) -> str:
    for flag in participant.flags or []:
        if isinstance(flag, dict) and flag.get("kind") == PATTERN_FLAG:
            return str(flag.get("detail") or "")
    return ""


def withheld(participant: Participant) -> str:
    """The sentence a worker the answer-pattern rules flagged reads (``completion_withheld``)."""
    if not is_flagged(participant):
        return ""
    reason = flag_reason(participant).removeprefix("answer pattern: ")
    why = reason or "one answer on nearly every battle"
    return (
        f"Your answers did not pass this study's checks ({why}), so they are excluded and "
        "do not earn the completion code."
    )


def answered(state: dict[str, Any] | None) -> int:
    """Battles and gold battles the worker answered (the code's count)."""
    state = state or {}
    return int(state.get("battles", 0)) + int(state.get("gold", 0))


def needed(config: Any) -> int:
    """Answers before the code: the setting, and never fewer than the rules need."""
    return max(config.completion_battles, rules.MIN_ANSWERS)


def scheduled(config: Any) -> tuple[int, int]:
    """``(gold battles scheduled, battles they are spread over)``: ``catch_min_seen`` gold
    battles within the battles before the count (none without gold battles). The settings'
    check keeps the count at least twice ``catch_min_seen``; a study stored before it was
    checked still gets a schedule (stretches of one battle)."""
    if not config.catch_rate:
        return 0, 0
    count = config.catch_min_seen
    return count, max(needed(config) - count, count)


def gold_due(participant: Participant, config: Any, state: dict[str, Any]) -> bool:
    """Whether the schedule wants a gold battle now: fewer made than due after the worker's
    battles so far. Drawn from the study's seed and the worker, the same at every call."""
    count, within = scheduled(config)
    if not count:
        return False
    rng = np.random.default_rng([participant.study.seed, participant.pk, 0x601D])
    positions = rules.gold_positions(count, within, rng)
    return int(state.get("gold_made", 0)) < rules.golds_due(positions, state.get("battles", 0))


def pattern_fields(
    participant: Participant,
    config: Any,
    state: dict[str, Any],
    latest: str,
    labels: dict[str, str],
) -> dict[str, Any]:
    """``Outcome`` fields of the rules at the count: applied once, to a crowd worker who has
    reached it and is not excluded already, over every answer stored and ``latest`` (this
    submission's outcome, not stored yet); ``labels`` name the outcomes in the reason.
    Sets ``state["pattern"]`` ("passed" or "flagged")."""
    if (
        participant.source == Participant.Source.ACCOUNT
        or "pattern" in state
        or answered(state) < needed(config)
        or catch.is_flagged(participant)
    ):
        return {}
    outcomes = [
        outcome
        for outcome in Judgment.objects.filter(participant_id=participant.pk).values_list(
            "payload__outcome", flat=True
        )
        if outcome in rules.OUTCOMES
    ]
    pattern = rules.answer_pattern([*outcomes, latest], max_share=config.answer_max_share)
    if not pattern.flagged:
        state["pattern"] = "passed"
        return {}
    state["pattern"] = "flagged"
    reason = f"answer pattern: {pattern.reason(labels)}"
    return {
        "flags": ({"kind": PATTERN_FLAG, "detail": reason},),
        "exclude_participant": reason,
        **({"screen_out": reason} if config.screens_out else {}),
    }


def completion_earned(participant: Participant, config: Any) -> bool:
    """The count reached; the gold rule applied (``catch_min_seen`` gold battles answered)
    and passed; the constant-outcome and position-bias rules applied and passed."""
    state = participant.state or {}
    if answered(state) < needed(config) or state.get("pattern") != "passed":
        return False
    if catch.is_flagged(participant) or is_flagged(participant):
        return False
    return not config.catch_rate or int(state.get("gold", 0)) >= config.catch_min_seen


def completion_progress(participant: Participant, config: Any) -> CompletionProgress:
    return CompletionProgress(
        answered(participant.state), needed(config), "battles", "and the study's checks passed"
    )
