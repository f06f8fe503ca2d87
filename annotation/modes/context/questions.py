"""The questions of a context item as the pages and the validation use them.

PLACEHOLDER until ``rubrics/context/questions.py`` (helper "rubric") is committed: the
wording there, with its sources, replaces this and this module then only adapts it.
"""

from __future__ import annotations

from dataclasses import dataclass

BEFORE = ("overall", "imaginability", "relevance", "irrelevance")
AFTER = ("overall", "accuracy")
LOWEST, SCALE_TOP = 1, 5


@dataclass(frozen=True)
class Question:
    """One rating: the question asked, its short name in messages, the words of 1 to 5."""

    name: str
    text: str
    short: str
    scale: tuple[str, str, str, str, str]


_QUALITY = ("Very poor", "Poor", "Fair", "Good", "Very good")
_EXTENT = ("Not at all", "A little", "Somewhat", "Mostly", "Completely")

QUESTIONS: dict[int, dict[str, Question]] = {
    0: {
        "overall": Question(
            "overall",
            "How good is this description as alt text for the image, in this context?",
            "Overall",
            _QUALITY,
        ),
        "imaginability": Question(
            "imaginability",
            "How well can you imagine the image from this description?",
            "Imagining the image",
            _EXTENT,
        ),
        "relevance": Question(
            "relevance",
            "How well does the description give what matters about the image in this context?",
            "Relevance to the context",
            _EXTENT,
        ),
        "irrelevance": Question(
            "irrelevance",
            "How well does the description leave out detail that does not matter here?",
            "Irrelevant detail",
            _EXTENT,
        ),
    },
    1: {
        "overall": Question(
            "overall",
            "Now that you see the image: how good is this description as alt text, in "
            "this context?",
            "Overall, with the image",
            _QUALITY,
        ),
        "accuracy": Question(
            "accuracy",
            "How accurate is the description of the image?",
            "Accuracy",
            ("Very inaccurate", "Inaccurate", "Partly accurate", "Accurate", "Fully accurate"),
        ),
    },
}

MISSING_QUESTION = (
    "What important information about the image is missing from the description, if any?"
)
