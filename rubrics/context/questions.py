"""The context mode's questions, their 1-5 scales and where each wording comes from.

Dimension names are fixed by the mode's judgment payloads: part 0 (before the image, every
rater) answers ``BEFORE``; part 1 (after the image, sighted raters only) answers ``AFTER``
and the free-text ``MISSING_QUESTION``. ``QUESTIONS[part]`` lists the rating questions in
the order a page asks them.

Sources (the studies' own materials, read in their public repositories):

* ``KREISS_2022``: the BLV participants' Google Form (Apps Script
  ``behavioral_experiments/evaluation_blv/apps_script_createForm.js``; its question texts
  are the column headers of ``behavioral_data/raw/evaluation_blv/*.csv``) and the sighted
  participants' web experiment (``behavioral_experiments/evaluation_sighted/views/views.js``)
  of ``elisakreiss/contextual-description-evaluation``;
* ``CONTEXTREF_2024``: ``dataset/human_subject_study/views/views.js`` of
  ``elisakreiss/contextref``, the same questions with the BLV form's wording, plus an
  "added information" question.

Both studies used 5-point scales (radio buttons 1-5) labelled at the two ends only. The
end words below are theirs; the three middle words are CapEval's, because the mode's pages
name every point of a scale for screen-reader users (a radio group read as "2, 3, 4"
says nothing). Every departure is listed in docs/protocol-choices.md ("Context").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AFTER",
    "AFTER_QUESTIONS",
    "BEFORE",
    "BEFORE_QUESTIONS",
    "CONTEXTREF_2024",
    "GROUPS",
    "KAPUR_KREISS_2024",
    "KREISS_2022",
    "MISSING_QUESTION",
    "QUESTIONS",
    "SCALE_MAX",
    "SCALE_MIN",
    "Question",
]

BEFORE = ("overall", "imaginability", "relevance", "irrelevance")
"""Dimensions rated before the image is shown (every rater)."""

AFTER = ("overall", "accuracy")
"""Dimensions rated after the image is shown (sighted raters only)."""

GROUPS = ("blv", "sighted")
"""Rater groups, reported apart: blind or low-vision, and sighted."""

SCALE_MIN, SCALE_MAX = 1, 5

KREISS_2022 = (
    'Kreiss, Bennett, Hooshmand, Zelikman, Morris and Potts, "Context Matters for Image '
    'Descriptions for Accessibility: Challenges for Referenceless Evaluation Metrics", '
    "EMNLP 2022 (arXiv:2205.10646); study materials in "
    "github.com/elisakreiss/contextual-description-evaluation"
)
CONTEXTREF_2024 = (
    'Kreiss, Zelikman, Potts and Haber, "ContextRef: Evaluating Referenceless Metrics for '
    'Image Description Generation", ICLR 2024 (arXiv:2309.11710); study materials in '
    "github.com/elisakreiss/contextref"
)
KAPUR_KREISS_2024 = (
    'Kapur and Kreiss, "Reference-Based Metrics Are Biased Against Blind and Low-Vision '
    "Users' Image Description Preferences\", Third Workshop on NLP for Positive Impact "
    "(NLP4PI) 2024, pages 308-314"
)


@dataclass(frozen=True)
class Question:
    """One rating question: its dimension, text, short name and the words of 1 to 5.

    ``scale[0]`` names 1 and ``scale[4]`` names 5; 5 is the better end on every scale
    (for "irrelevance", 5 means no unnecessary information). ``source`` says where the
    wording and the end words come from and what CapEval changed.
    """

    name: str
    text: str
    short: str
    scale: tuple[str, str, str, str, str]
    source: str = ""


_WELL = ("Not well", "Slightly well", "Moderately well", "Well", "Very well")
_GOOD = ("Not good", "Slightly good", "Moderately good", "Good", "Very good")

_IMAGINABILITY = Question(
    "imaginability",
    "How well can you imagine this image in your mind?",
    "Imagining the image",
    _WELL,
    f"{KREISS_2022} (BLV form question 1 and sighted experiment, same words; also "
    f"{CONTEXTREF_2024}); ends 'Not well' / 'Very well'",
)
_IRRELEVANCE = Question(
    "irrelevance",
    "Does the description mention extra information unnecessary for making the image accessible?",
    "Unnecessary information",
    ("Yes, too much", "Quite a lot", "Some", "Very little", "No, just right"),
    f"{KREISS_2022} (BLV form question 3; ends 'Yes, too much' / 'No, just right'; the "
    f"sighted 2022 experiment asked 'Does the description mention too much irrelevant "
    f"information for accessibility needs?'); {CONTEXTREF_2024} uses the BLV words with "
    f"the end 'No, not too much'",
)
_RELEVANCE = Question(
    "relevance",
    "How well does the description capture the relevant aspects of the image?",
    "Relevant aspects",
    _WELL,
    f"{KREISS_2022} (BLV form question 4 and sighted experiment, same words; also "
    f"{CONTEXTREF_2024}); ends 'Not well' / 'Very well'",
)
_OVERALL = Question(
    "overall",
    "How good is the description for overall nonvisual accessibility?",
    "Overall",
    _GOOD,
    f"{KREISS_2022} (BLV form question 5; the sighted 2022 experiment asked 'For "
    f"accessibility, how good is the description overall?'); {CONTEXTREF_2024} (same "
    f"words as the BLV form); ends 'Not good' / 'Very good'",
)
_OVERALL_AFTER = Question(
    "overall",
    "Now that you see the image: how good is the description for overall nonvisual accessibility?",
    "Overall, with the image",
    _GOOD,
    f"{KREISS_2022} and {CONTEXTREF_2024}: sighted participants answered the overall "
    f"question again once the image was shown (the opening words are CapEval's)",
)
_ACCURACY = Question(
    "accuracy",
    "Now that you see the image: how accurate is the description?",
    "Accuracy",
    (
        "Not accurate",
        "Slightly accurate",
        "Moderately accurate",
        "Mostly accurate",
        "Fully accurate",
    ),
    f"CapEval's scale. {KREISS_2022} and {CONTEXTREF_2024} asked accuracy after the image "
    f"as a checkbox, 'The description contains inaccurate information.', with an optional "
    f"'Please clarify what the inaccuracies are in the description.'",
)

BEFORE_QUESTIONS: tuple[Question, ...] = (_IMAGINABILITY, _IRRELEVANCE, _RELEVANCE, _OVERALL)
"""Part 0 in the order asked: the BLV form's order without its "image fit" question,
overall last as in both studies."""

AFTER_QUESTIONS: tuple[Question, ...] = (_OVERALL_AFTER, _ACCURACY)
"""Part 1 (sighted raters, the image shown) in the order asked."""

QUESTIONS: dict[int, dict[str, Question]] = {
    0: {q.name: q for q in BEFORE_QUESTIONS},
    1: {q.name: q for q in AFTER_QUESTIONS},
}
"""Part -> dimension -> question, in the order asked."""

MISSING_QUESTION = (
    "What does the description leave out that someone who cannot see the image would need "
    "here? Leave this empty if nothing is missing."
)
"""Part 1's free text (optional). CapEval's words: the nearest in the studies are the
before-image "Do you have any remaining questions about the image?" (sighted, 2022) and
"Write any remaining questions that you would ask about this image, which would help you
to understand it in the context of the Wikipedia article." (BLV form question 6)."""
