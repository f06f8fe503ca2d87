"""The replayed-gate rule (issue 29): a player whose practice answers match the expert
ratings far better than their later game ratings match the consensus.

The tutorial and probation feedback shows each pair's expert rating, so ids can pool what
they saw and a later id can replay it: full marks on the gate, then ratings no better than
chance in the game. An honest player's two agreements differ only by chance and by how much
harder a consensus is to hit than an expert rating, so the rule looks at the gap between
the two shares, not at either alone. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class GateReplay:
    gate_hits: int
    gate_answers: int
    game_hits: int
    game_answers: int

    @property
    def gap(self) -> float:
        """Share of gate answers equal to the expert rating minus share of game ratings
        equal to the consensus (0 when either side is empty)."""
        if not self.gate_answers or not self.game_answers:
            return 0.0
        return self.gate_hits / self.gate_answers - self.game_hits / self.game_answers

    def suspected(self, max_gap: float) -> bool:
        """True when the gap reaches ``max_gap`` (a share, 0 to 1)."""
        if not 0 < max_gap <= 1:
            raise ValueError("max_gap must be in (0, 1]")
        return self.gap >= max_gap - 1e-12

    def detail(self) -> str:
        return (
            f"practice answers matched the expert rating on {self.gate_hits} of "
            f"{self.gate_answers}, but game ratings matched the consensus on "
            f"{self.game_hits} of {self.game_answers}"
        )


def gate_replay(
    gate: Iterable[tuple[int, int]], game: Iterable[tuple[int, int | None]]
) -> GateReplay:
    """Count exact matches: ``gate`` as (rating, expert rating), ``game`` as (rating,
    consensus before it); a game rating with no consensus yet (``None``) is left out."""
    gate_pairs = list(gate)
    game_pairs = [(rating, consensus) for rating, consensus in game if consensus is not None]
    return GateReplay(
        gate_hits=sum(1 for rating, truth in gate_pairs if rating == truth),
        gate_answers=len(gate_pairs),
        game_hits=sum(1 for rating, consensus in game_pairs if rating == consensus),
        game_answers=len(game_pairs),
    )
