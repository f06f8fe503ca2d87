"""What every mode's simulated worker shares (``Mode.simulate``): the hidden quality of a
system's captions and a worker's seeded habits.

Hidden truth per system (1 = wrong, 5 = excellent): ``Human`` 4.6, names containing
"good" 4.0, "mid" 3.0, "bad" 1.6, anything else 3.2. Each worker has a bias and a noise level
drawn from the seed, so the agreement statistics have something to measure.
``services/simulation.py`` runs the crowd; the modes say how one worker answers one lease.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from annotation.models import Caption

#: Hidden quality of a system's captions by a word in its name (see the module docstring).
QUALITY_BY_WORD = (("good", 4.0), ("mid", 3.0), ("bad", 1.6))
HUMAN_QUALITY = 4.6
OTHER_QUALITY = 3.2


def system_quality(system: str) -> float:
    """The hidden quality (1 to 5) the simulated crowd sees in a system's captions."""
    if system == Caption.HUMAN:
        return HUMAN_QUALITY
    name = system.lower()
    return next((q for word, q in QUALITY_BY_WORD if word in name), OTHER_QUALITY)


@dataclass
class SimulatedWorker:
    """One worker's habits: a bias on every score, a noise level, and their pace."""

    rng: random.Random
    bias: float
    noise: float

    def level(self, truth: float, low: int, high: int) -> int:
        """A score near ``truth`` on the scale ``low``..``high``."""
        value = round(truth + self.bias + self.rng.gauss(0, self.noise))
        return max(low, min(high, value))

    def seconds(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)
