"""A judge's arena answer: one of LMArena's four outcomes for the two captions as shown."""

from __future__ import annotations

from typing import Any

from annotation.errors import InvalidInput
from annotation.models import Item, Judgment, Study
from annotation.modes.arena.protocol import BATTLE, OUTCOME_LABELS, OUTCOMES
from annotation.modes.base import Judging

#: Preference of each outcome code: the caption shown first (a), the second (b), a tie.
_CHOICE = {"model_a": 0.0, "model_b": 1.0, "tie": 0.5, "tie (bothbad)": 0.5}
#: A choice as a Dawid-Skene label (``Judging.human_labels``).
_LABELS = {0.0: "first", 1.0: "second", 0.5: "tie"}


class ArenaJudging(Judging):
    unit = "pair"
    # The arena's headline is its Bradley-Terry leaderboard (ties half a win to each side).
    estimate = "bradley_terry"
    answer_help = '{"outcome": "a" | "b" | "tie" | "bothbad"} (a: the caption shown first)'

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        outcome = data.get("outcome") if isinstance(data, dict) else None
        # The page's own list of outcomes (the criteria are not asked of a judge).
        if not isinstance(outcome, str) or outcome not in OUTCOMES:
            raise InvalidInput(
                "Choose one of: " + ", ".join(OUTCOME_LABELS.values()) + ".", field="outcome"
            )
        return {"outcome": outcome, "winner": OUTCOMES[outcome]}

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        return {"choice": _CHOICE[answer["winner"]]}

    def human_labels(self, study: Study) -> list[tuple[int, Any, Any]]:
        """Every stored battle verdict in the pair's id order (the reliability section)."""
        rows = Judgment.objects.filter(study=study, item__kind=BATTLE).values_list(
            "participant_id", "item__spec", "result__winner"
        )
        out = []
        for participant, spec, winner in rows:
            if winner not in _CHOICE:
                continue
            a, b = spec["caption_a"], spec["caption_b"]
            choice = _CHOICE[winner] if a < b else 1.0 - _CHOICE[winner]
            out.append((participant, (min(a, b), max(a, b)), _LABELS[choice]))
        return out

    def human_battles(self, study: Study) -> list[tuple[int, int, float]]:
        """Every kept battle with an overall verdict, ties as half a win to each side (as
        the leaderboard counts them), as shown: ``(caption a, caption b, share b won)``."""
        rows = Judgment.objects.filter(study=study, item__kind=BATTLE, excluded=False)
        return [
            (spec["caption_a"], spec["caption_b"], _CHOICE[winner])
            for spec, winner in rows.values_list("item__spec", "result__winner")
            if winner in _CHOICE
        ]

    def item_unit(self, item: Item) -> tuple[int, int | None] | None:
        """A battle: its caption a shown first (a gold battle is no question for a judge)."""
        return (item.spec["caption_a"], item.spec["caption_b"]) if item.kind == BATTLE else None

    def task_prompt(self, study: Study) -> str:
        choices = "; ".join(f'"{code}": {label}' for code, label in OUTCOME_LABELS.items())
        return (
            "Two captions of the image follow. Which one describes the image better: more "
            "accurate, more complete, with no hallucinated detail?\n\n"
            "Caption A: {caption_a}\nCaption B: {caption_b}\n\n"
            f"Outcomes: {choices}.\n\n"
            'Reply with only a JSON object: {"outcome": "a" | "b" | "tie" | "bothbad"}'
        )

    def parse_reply(self, text: str) -> Any:
        """A bare outcome code ("a", "tie") or a JSON object with ``outcome``."""
        word = text.strip().strip(".\"'").lower()
        return {"outcome": word} if word in OUTCOMES else super().parse_reply(text)
