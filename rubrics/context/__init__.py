"""The context mode's pure protocol: questions and scales, and the BLV/sighted report.

Sources: Kreiss et al., "Context Matters for Image Descriptions for Accessibility:
Challenges for Referenceless Evaluation Metrics" (EMNLP 2022) and ContextRef (Kreiss et
al., ICLR 2024); see ``questions`` and docs/protocol-choices.md for the wording and every
departure. Pure Python + numpy/scipy, no Django.

* ``questions``: the dimensions (``BEFORE``, ``AFTER``), groups, questions and scale words;
* ``stats``: rater-clustered means and intervals, group differences, ordinal alpha;
* ``report``: ``ContextRating`` and ``context_report``, composed into ``ContextResult``.
"""

from rubrics.context.questions import (
    AFTER,
    AFTER_QUESTIONS,
    BEFORE,
    BEFORE_QUESTIONS,
    GROUPS,
    MISSING_QUESTION,
    QUESTIONS,
    SCALE_MAX,
    SCALE_MIN,
    Question,
)
from rubrics.context.report import (
    METHOD,
    ContextCell,
    ContextRating,
    ContextResult,
    GroupCell,
    SystemResult,
    context_report,
)
from rubrics.context.stats import (
    Agreement,
    Estimate,
    clustered_mean,
    group_difference,
    ordinal_alpha,
)

__all__ = [
    "AFTER",
    "AFTER_QUESTIONS",
    "BEFORE",
    "BEFORE_QUESTIONS",
    "GROUPS",
    "METHOD",
    "MISSING_QUESTION",
    "QUESTIONS",
    "SCALE_MAX",
    "SCALE_MIN",
    "Agreement",
    "ContextCell",
    "ContextRating",
    "ContextResult",
    "Estimate",
    "GroupCell",
    "Question",
    "SystemResult",
    "clustered_mean",
    "context_report",
    "group_difference",
    "ordinal_alpha",
]
