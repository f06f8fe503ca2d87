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

The count is one a worker can reach (issue 46, row 2): nobody sees an image twice and gold
battles use images too, so at the defaults (20 battles) a 6-image study paid nobody. The
count and the gold schedule are capped by ``reach``, the most answers one worker can be
served (``reach_sentence`` says so when the study opens); and a worker the study runs out
of work for (the others took the battles left) is paid for what they did
(``exhausted_fields``), with the rules applied to it, never told to return.

Like the modes, nothing here writes: the protocol returns these in its ``Outcome``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from annotation.models import Caption, Item, Judgment, Participant, Study
from annotation.modes import catch
from annotation.modes.arena.gold import worker_seed
from annotation.modes.base import CompletionProgress
from rubrics import arena_workers as rules
from rubrics import catch as catch_rules

#: The flag of a worker the constant-outcome or position-bias rule flagged at the count.
PATTERN_FLAG = "answer_pattern"
#: ``Reach`` per study public id, read once per process: a live study's captions and
#: battles never change (imports need a draft), and the dashboard polls.
_REACH: dict[str, Reach] = {}


@dataclass(frozen=True)
class Reach:
    """The most answers one worker can be served (``most``): one per image (``images``:
    those with a study caption, which battles and gold battles show), and of battles at most
    ``pairs`` system pairs times ``cap_per_pair``, plus the scheduled gold battles."""

    most: int
    images: int
    pairs: int


def reach(study: Study, config: Any) -> Reach:
    key = str(study.public_id)
    found = _REACH.get(key)
    if found is not None:
        return found
    images = (
        Caption.objects.filter(study_id=study.pk, purpose=Caption.Purpose.STUDY)
        .exclude(text="")
        .order_by()
        .values("image_id")
        .distinct()
        .count()
    )
    pairs = len(
        set(
            Item.objects.filter(study_id=study.pk, kind="battle")
            .order_by()
            .values_list("spec__system_a", "spec__system_b")
            .distinct()
        )
    )
    golds = config.catch_min_seen if config.catch_rate else 0
    found = Reach(min(images, pairs * config.cap_per_pair + golds), images, pairs)
    if study.status != Study.Status.DRAFT and pairs:
        _REACH[key] = found
    return found


def reach_sentence(study: Study, config: Any) -> str:
    """What the researcher reads when the code's count is more than a worker can be served
    ("" when it is not): the numbers, what happens instead, and how to change it."""
    want = needed(config)
    can = reach(study, config)
    if not can.pairs or can.most >= want:
        return ""
    why = f"nobody sees an image twice, gold battles included, and the study has {can.images}"
    why += f" image{'s' if can.images != 1 else ''}"
    if can.most < can.images:
        why += (
            f"; {can.pairs} system pair{'s' if can.pairs != 1 else ''} of at most "
            f"{config.cap_per_pair} battles each"
        )
    weak = (
        f" Below {rules.MIN_ANSWERS} answers the constant-answer and position-bias checks "
        "cannot apply."
        if can.most < rules.MIN_ANSWERS
        else ""
    )
    return (
        f"The completion code asks for {want} battles, but one crowd worker can be served at "
        f"most {can.most} ({why}). Workers are given the code after {can.most} answers, "
        f"with the checks applied to those.{weak} For the count you set, import at least "
        f'{want} images, or lower "Battles a crowd worker judges to earn the code".'
    )


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


def needed(config: Any, study: Study | None = None) -> int:
    """Answers before the code: the setting, and never fewer than the rules need; with
    ``study``, never more than one worker can be served there (``reach``)."""
    want = max(config.completion_battles, rules.MIN_ANSWERS)
    if study is None:
        return want
    can = reach(study, config)
    # No battle yet (a draft): nothing to cap by.
    return max(1, min(want, can.most)) if can.pairs else want


def scheduled(config: Any, study: Study | None = None) -> tuple[int, int]:
    """``(gold battles scheduled, battles they are spread over)``: ``catch_min_seen`` gold
    battles within the battles before the count (none without gold battles). Where ``reach``
    lowers the count, the gold battles shrink with it, keeping the share the settings give
    (4 in 20: 2 in 9), not 4 of a worker's 9 images, which a demo's crowd could not afford.
    The settings' check keeps the count at least twice ``catch_min_seen``; a study stored
    before it was checked still gets a schedule (stretches of one battle)."""
    if not config.catch_rate:
        return 0, 0
    want, count = needed(config), needed(config, study)
    golds = min(config.catch_min_seen, -(-config.catch_min_seen * count // want))
    return golds, max(count - golds, golds)


def golds_needed(participant: Participant, config: Any) -> int:
    """Gold battles the gold rule waits for before it applies (``catch_min_seen``, fewer
    where the count is capped by ``reach``)."""
    return scheduled(config, participant.study)[0] if config.catch_rate else config.catch_min_seen


def gold_due(participant: Participant, config: Any, state: dict[str, Any]) -> bool:
    """Whether the schedule wants a gold battle now: fewer made than due after the worker's
    battles so far. Drawn from the study's seed and the worker, the same at every call."""
    count, within = scheduled(config, participant.study)
    if not count:
        return False
    rng = np.random.default_rng([participant.study.seed, worker_seed(participant), 0x601D])
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
        or answered(state) < needed(config, participant.study)
        or catch.is_flagged(participant)
    ):
        return {}
    return _pattern(participant, config, state, [latest], labels)


def _pattern(
    participant: Participant,
    config: Any,
    state: dict[str, Any],
    latest: list[str],
    labels: dict[str, str],
) -> dict[str, Any]:
    """The rules applied to every stored answer and ``latest``; sets ``state["pattern"]``."""
    outcomes = [
        outcome
        for outcome in Judgment.objects.filter(participant_id=participant.pk).values_list(
            "payload__outcome", flat=True
        )
        if outcome in rules.OUTCOMES
    ]
    pattern = rules.answer_pattern([*outcomes, *latest], max_share=config.answer_max_share)
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


def exhausted_fields(
    participant: Participant, config: Any, labels: dict[str, str]
) -> dict[str, Any] | None:
    """``Outcome`` fields for a crowd worker with answers whom the study has nothing more to
    serve before the count (issue 46, row 2): the rules applied to what they did (the gold
    rule to every gold battle seen, however few; the answer-pattern rules as at the count),
    and ``state["exhausted"]``, which lets ``completion_earned`` pay them. None when there
    is nothing to decide: no answer (an id arriving after the work is gone earns nothing),
    flagged already, or settled before."""
    state = dict(participant.state or {})
    if (
        participant.source == Participant.Source.ACCOUNT
        or not answered(state)
        or state.get("exhausted")
        or catch.is_flagged(participant)
        or is_flagged(participant)
    ):
        return None
    state["exhausted"] = answered(state)
    tally = catch.counts(participant)
    if catch_rules.breaks_two_sided(
        (tally["altered_seen"], tally["altered_missed"]),
        (tally["control_seen"], tally["control_missed"]),
        min_seen=1,
        max_missed_share=config.catch_max_missed_share,
    ):
        reason = catch.exclusion_reason(
            tally["altered_seen"] + tally["control_seen"],
            tally["altered_missed"] + tally["control_missed"],
        )
        return {
            "state": state,
            "flags": ({"kind": catch.FLAG_KIND, "detail": reason},),
            "exclude_participant": reason,
            **({"screen_out": reason} if config.screens_out else {}),
        }
    fields = {} if "pattern" in state else _pattern(participant, config, state, [], labels)
    return {"state": state, **fields}


def completion_earned(participant: Participant, config: Any) -> bool:
    """The count reached, the gold rule applied (its gold battles answered) and passed, or
    the study ran out of work for the worker first (``exhausted_fields``); either way the
    constant-outcome and position-bias rules applied and passed."""
    state = participant.state or {}
    if state.get("pattern") != "passed":
        return False
    if catch.is_flagged(participant) or is_flagged(participant):
        return False
    if state.get("exhausted"):
        return True
    if answered(state) < needed(config, participant.study):
        return False
    return not config.catch_rate or int(state.get("gold", 0)) >= golds_needed(participant, config)


def completion_progress(participant: Participant, config: Any) -> CompletionProgress:
    return CompletionProgress(
        answered(participant.state),
        needed(config, participant.study),
        "battles",
        "and the study's checks passed",
    )
