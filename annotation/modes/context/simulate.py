"""How a simulated rater answers a context item (``Mode.simulate``).

The two groups weigh the same hidden qualities differently, so that a report of a
simulated study shows a difference between them (issue 43; Kreiss et al. 2022 and Kapur
and Kreiss 2024 found blind and low-vision (BLV) raters' overall judgments follow what a
description gives in its context, where sighted raters' follow how much of the image it
describes). Each description has a hidden detail, its system's quality
(``modes/simulated.py``), and each description in a context a hidden fit, drawn from
the pair's texts, so a description suits one of its contexts better than the other:

- imaginability follows the detail; relevance the fit (and a little the detail);
  unnecessary information (5: none) falls with detail in a context it does not fit;
- overall: BLV raters 3/4 relevance and 1/4 detail, sighted raters the other way round;
- with the image (sighted): accuracy follows the detail, and overall moves towards it
  (seeing the image shows what a poor description got wrong).

Every answer is sent after the item's minimum time (the reading time of its words, or
the study's floor with the image) plus the worker's own pace.
"""

from __future__ import annotations

import hashlib
from typing import Any

from annotation.models import Assignment, Caption
from annotation.modes.base import SimulatedAnswer
from annotation.modes.context.protocol import BLV, item_texts, reading_seconds
from annotation.modes.simulated import SimulatedWorker, system_quality

#: How much the overall rating of each group rests on relevance to the context (the rest
#: on the description's detail).
OVERALL_RELEVANCE_WEIGHT = {BLV: 0.75, "sighted": 0.25}
#: What a sighted rater says is missing from a description of little detail.
MISSING_NOTES = (
    "What the main subject is doing.",
    "The setting and the colours.",
    "The text visible in the image.",
    "How many people or objects there are.",
)


def hidden_fit(description: Caption, context: Caption) -> float:
    """How well a description fits a context, -1.5 to 1.5, the same in every run and every
    database: drawn from the two captions' texts and import lines, never their ids (ids
    differ between databases and runs, and a fit drawn from them moved a CI run's report)."""
    key = f"{description.line}:{description.text}\n{context.line}:{context.raw_text}"
    digest = hashlib.sha256(key.encode()).digest()
    return digest[0] / 255 * 3 - 1.5


def truths(detail: float, fit: float, group: str) -> dict[str, float]:
    """The hidden value of each before-image dimension for a rater of ``group``."""
    relevance = 3 + 0.4 * (detail - 3) + fit
    weight = OVERALL_RELEVANCE_WEIGHT[group]
    return {
        "imaginability": detail,
        "relevance": relevance,
        "irrelevance": 4 - 0.3 * (detail - 3) + 0.5 * min(0.0, fit),
        "overall": weight * relevance + (1 - weight) * detail,
    }


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Part 0 for every rater, part 1 too for a sighted rater's item."""
    item = lease.item
    config = context["settings"]
    detail = system_quality(context["systems"].get(item.spec["caption"], ""))
    description, placed = item_texts(item)
    before = truths(detail, hidden_fit(description, placed), item.kind)
    answers = [
        SimulatedAnswer(
            0,
            {name: str(worker.level(value, 1, 5)) for name, value in before.items()},
            reading_seconds(description, placed, config) + worker.seconds(3, 15),
        )
    ]
    if mode.parts(item) > 1:
        after = {
            "overall": str(worker.level(before["overall"] + 0.3 * (detail - 3), 1, 5)),
            "accuracy": str(worker.level(detail, 1, 5)),
            "missing": ""
            if detail >= 4
            else MISSING_NOTES[worker.rng.randrange(len(MISSING_NOTES))],
        }
        answers.append(
            SimulatedAnswer(1, after, config.min_seconds_with_image + worker.seconds(2, 8))
        )
    return answers
