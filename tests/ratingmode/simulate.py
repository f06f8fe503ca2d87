"""How a simulated worker rates a test-rating item."""

from annotation.modes.base import SimulatedAnswer
from annotation.modes.simulated import system_quality


def simulated_answers(mode, lease, worker, context) -> list[SimulatedAnswer]:
    """One rating per part, near the hidden quality of the caption's system."""
    system = context["systems"].get(lease.item.spec["caption"], "")
    return [
        SimulatedAnswer(part, {"rating": worker.level(system_quality(system), 1, 5)}, 1.0)
        for part in range(lease.item.spec["parts"])
    ]
