"""What the annotation guide shows of THumB: the definitions of P and R, the rules of
paper section 2.2.3 and the worked examples of paper Table 1 (Kasai et al., NAACL 2022).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EXAMPLES",
    "PRECISION_DEFINITION",
    "RECALL_DEFINITION",
    "RULES",
    "RubricExample",
    "RubricRule",
]

PRECISION_DEFINITION = (
    "Precision (P, 1-5) measures how precise the caption is given the image. It guards against "
    "hallucinated objects and covers objects and their properties, attributes, occasions, "
    "locations and the relations between objects. Reserve 4 for relatively minor issues: an "
    "attribute that is almost correct (pink vs. red), or something the image does not "
    "contradict but does not guarantee either."
)
"""Definition of precision shown to annotators (paper section 2.2.1)."""

RECALL_DEFINITION = (
    "Recall (R, 1-5) measures how much of the salient information in the image (objects, "
    "attributes, relations, colour) the caption covers. Generic, uninformative captions score "
    "low: 'small animal' is precise for an otter but much less informative than 'otter'. Ask: "
    "what image does this caption lead me to imagine? When it fits many images that differ "
    "substantially from this one, recall is low."
)
"""Definition of recall shown to annotators (paper section 2.2.1)."""


@dataclass(frozen=True)
class RubricRule:
    """One rule of THumB the annotation guide shows (paper section 2.2.3)."""

    key: str
    title: str
    text: str


RULES: tuple[RubricRule, ...] = (
    RubricRule(
        "double_penalties",
        "Avoid double penalties",
        "When an error is accounted for in precision, correct it before scoring recall: score "
        "recall as if the caption said the right thing (a dog that is really an otter costs "
        "precision only). This correction does not apply to hallucinated objects, which have no "
        "counterpart in the image.",
    ),
    RubricRule(
        "counts_are_attributes",
        "Object counts are attributes",
        "A wrong count is a precision error ('three frisbees' when there are two). A vague "
        "'some frisbees' when the count is clearly two is a recall problem.",
    ),
    RubricRule(
        "black_and_white",
        "Black-and-white photos",
        "Ignore whether a caption mentions that the photo is black and white or grey-scale.",
    ),
    RubricRule(
        "implied_information",
        "Implied information",
        "Do not take recall points off for information the caption already implies (a "
        "double-decker bus is typically red).",
    ),
    RubricRule(
        "imagine",
        "Recall: what would you imagine?",
        "For recall ask: what image does this caption lead me to imagine? If it fits many "
        "images that differ substantially from this one, recall should be low.",
    ),
)
"""The rules of paper section 2.2.3 as PROTOCOLS.md states them."""


@dataclass(frozen=True)
class RubricExample:
    """One worked example of paper Table 1 (no conciseness or inclusive penalty)."""

    example_id: str
    systems: tuple[str, ...]
    caption: str
    precision: int
    recall: int
    fluency: float
    total: float


EXAMPLES: tuple[RubricExample, ...] = (
    RubricExample("1-A", ("Up-Down",), "A dog playing with a frisbee on the ground.", 3, 4, 0, 3.5),
    RubricExample(
        "1-B",
        ("VinVL-base",),
        "A otter is laying on the sand next to two frisbees.",
        5,
        4,
        0.1,
        4.4,
    ),
    RubricExample(
        "1-C",
        ("VinVL-large",),
        "A small animal laying on a rock with three frisbees.",
        4,
        3,
        0,
        3.5,
    ),
    RubricExample("2-A", ("Up-Down",), "A close up of a plate of broccoli.", 5, 3, 0, 4.0),
    RubricExample(
        "2-B",
        ("Unified-VLP", "VinVL-base", "VinVL-large"),
        "A plate of pasta and broccoli on a table.",
        4,
        4,
        0,
        4.0,
    ),
    RubricExample(
        "2-C",
        ("Human",),
        "A multi colored dish with broccoli and white twisted pasta in it.",
        5,
        5,
        0.1,
        4.9,
    ),
    RubricExample(
        "3-A", ("Unified-VLP",), "A little girl holding a video game controller.", 3, 4, 0, 3.5
    ),
    RubricExample(
        "3-B", ("VinVL-large",), "A little girl is blow drying her hair on a couch.", 4, 5, 0, 4.5
    ),
    RubricExample(
        "3-C", ("Human",), "A little girl holding a blow dryer next to her head.", 5, 5, 0, 5.0
    ),
    RubricExample("4-A", ("Up-Down",), "A black cat laying in a red suitcase.", 3, 5, 0, 4.0),
    RubricExample(
        "4-B",
        ("Unified-VLP", "VinVL-base", "VinVL-large"),
        "A black cat sitting on top of a red suitcase.",
        5,
        5,
        0,
        5.0,
    ),
    RubricExample(
        "4-C",
        ("Human",),
        "A large black cat laying on top of a pink piece of luggage.",
        4,
        5,
        0,
        4.5,
    ),
    RubricExample(
        "5-A",
        ("Up-Down", "Unified-VLP"),
        "A man standing in front of a display of donuts.",
        3,
        2,
        0,
        2.5,
    ),
    RubricExample(
        "5-B", ("VinVL-large",), "A woman standing behind a counter at a donut shop.", 5, 3, 0, 4.0
    ),
    RubricExample(
        "5-C",
        ("Human",),
        "Woman selling doughnuts with doughnut stock in the background.",
        5,
        5,
        0.3,
        4.7,
    ),
)
"""Paper Table 1 worked examples, caption texts as printed there."""
