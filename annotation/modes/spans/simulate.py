"""How a simulated worker marks a detailed caption (``Mode.simulate``), and the errors
written into the demo's detailed captions (``annotation/demo/spans_captions.csv``).

Each demo caption was written for its photograph with known errors planted in it
(``DEMO_ERRORS``: the words, as in the caption, with the severity and category a careful
annotator would give). A simulated worker finds each planted error with a probability that
falls with their noise, sometimes calls its severity the other way, and scores the caption
from what they marked (100 less 15 a major and 5 a minor, with their bias and noise). A
caption with no planted errors listed (another study's) gets no marks and a score near
its system's hidden quality.
"""

from __future__ import annotations

from typing import Any

from annotation.models import Assignment
from annotation.modes.base import SimulatedAnswer
from annotation.modes.simulated import SimulatedWorker, system_quality
from annotation.modes.spans.protocol import caption_of

#: (image, system) -> [(words, severity, category)] planted in the demo's detailed captions.
DEMO_ERRORS: dict[tuple[str, str], list[tuple[str, str, str]]] = {
    ("astronaut.jpg", "GoodBot"): [
        ("a white and black helmet with a dark visor", "minor", "attribute"),
    ],
    ("astronaut.jpg", "BadBot"): [
        ("serious", "minor", "attribute"),
        ("long black hair", "major", "attribute"),
        ("a starry night sky", "major", "hallucinated existence"),
        ("bright green", "major", "attribute"),
        ("two round mission patches on each shoulder", "major", "count"),
        ("he holds a small globe", "major", "hallucinated existence"),
        ("beside a cup of coffee", "major", "hallucinated existence"),
        ("a full-size space shuttle sits on the launch pad", "major", "object"),
    ],
    ("camera.jpg", "GoodBot"): [
        ("some trees along the edge of the field", "minor", "hallucinated existence"),
    ],
    ("camera.jpg", "BadBot"): [
        ("A colour photograph", "major", "attribute"),
        ("a woman kneeling on a sandy beach", "major", "object"),
        ("a pair of binoculars on a short tripod", "major", "object"),
        ("waving with the other", "major", "action"),
        ("four thick wooden legs", "major", "count"),
        ("two children play with a ball near the water", "major", "hallucinated existence"),
        ("dark storm clouds", "major", "attribute"),
    ],
    ("chelsea.jpg", "GoodBot"): [
        ("One ear is visible at the top left edge", "minor", "spatial relation"),
    ],
    ("chelsea.jpg", "BadBot"): [
        ("a black and white puppy", "major", "object"),
        ("a deep blue with round pupils", "major", "attribute"),
        ("its tongue hanging out", "major", "hallucinated existence"),
        ("a red collar with a silver bell", "major", "hallucinated existence"),
        ("a wooden fence and three flower pots", "major", "hallucinated existence"),
        ("Bright midday sunlight casts hard shadows", "minor", "attribute"),
    ],
    ("coffee.jpg", "GoodBot"): [
        ("a small curved handle on the left", "minor", "spatial relation"),
    ],
    ("coffee.jpg", "BadBot"): [
        ("three mugs of milky tea", "major", "count"),
        ("a glass table", "major", "attribute"),
        ("a heart drawn in the milk", "major", "hallucinated existence"),
        ("covered with biscuits", "major", "hallucinated existence"),
        ("next to a slice of lemon", "major", "hallucinated existence"),
        ("A laptop and a pair of glasses lie beside the plate", "major", "hallucinated existence"),
    ],
    ("coins.jpg", "GoodBot"): [
        ("the largest ones at the right end of the rows", "minor", "spatial relation"),
    ],
    ("coins.jpg", "BadBot"): [
        ("A colour photograph", "major", "attribute"),
        ("scattered loosely across a white kitchen table", "major", "spatial relation"),
        ("about a hundred coins", "major", "count"),
        ("each shows a number and the name of a country", "major", "text in the image"),
        ("A hand reaches in from the right to pick one up", "major", "hallucinated existence"),
        ("a price label lies beside them", "minor", "hallucinated existence"),
    ],
    ("rocket.jpg", "GoodBot"): [
        ("two thin lightning masts rise near the rocket", "minor", "count"),
    ],
    ("rocket.jpg", "BadBot"): [
        ("a short red rocket lying on its side on a truck", "major", "object"),
        ("surrounded by workers in yellow helmets", "major", "hallucinated existence"),
        ("a large crane lifts a second rocket", "major", "hallucinated existence"),
        ("covered in snow", "major", "attribute"),
        ("A crowd of spectators watches from behind a fence", "major", "hallucinated existence"),
        ("as it lifts off", "major", "action"),
    ],
}


def simulated_answers(
    mode, lease: Assignment, worker: SimulatedWorker, context: dict[str, Any]
) -> list[SimulatedAnswer]:
    """Mark the planted errors the worker notices, then score the caption (page terms)."""
    text = caption_of(lease.item).text
    image = lease.item.image.name if lease.item.image else ""
    planted = DEMO_ERRORS.get((image, lease.item.spec.get("system", "")), [])
    config = context["settings"]
    # A careful worker (noise 0.4) finds about 90% of the planted errors, a sloppy one
    # (noise 0.9) about 70%.
    found = 1.05 - 0.4 * worker.noise
    marks = []
    for words, severity, category in planted:
        if len(marks) >= config.max_spans or worker.rng.random() > found:
            continue
        if worker.rng.random() < 0.15:
            severity = "minor" if severity == "major" else "major"
        start = text.find(words)
        if start < 0 or category not in config.category_list():
            continue
        marks.append(
            {
                "start": start,
                "end": start + len(words),
                "text": words,
                "severity": severity,
                "category": category,
            }
        )
    if planted:
        penalty = sum(15 if m["severity"] == "major" else 5 for m in marks)
        truth = 100.0 - penalty
    else:
        truth = 20.0 * system_quality(lease.item.spec.get("system", ""))
    score = truth + 10 * worker.bias + worker.rng.gauss(0, 10 * worker.noise)
    data = {"spans": marks, "score": round(max(0.0, min(100.0, score)))}
    # Reading a 150-word caption and marking it: half a minute to two minutes.
    seconds = max(float(config.min_seconds), 0.0) + worker.seconds(30, 120)
    return [SimulatedAnswer(0, data, seconds)]
