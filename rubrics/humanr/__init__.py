"""HUMANr head-to-head protocol: scoring, groups of trials and the report.

Source: "ObjectNet Captions: Models are not superhuman captioners" (section 4.2,
Fig. 1 and Fig. 4) and the toolkit by Cummings and Mayo, as distilled in
``../shared/PROTOCOLS.md`` section 3.

A worker sees an image and two captions and answers "Which caption goes best
with the image?" on a 1-9 slider: 1 = only the left caption matches, 5 = both
match equally well, 9 = only the right caption matches. Orient the answer so
that the human (reference) caption is on the left, ``s = raw`` if it was on the
left else ``10 - raw``; the comparison's value is ``(s - 5) / 4`` in [-1, 1],
negative when the human caption is preferred. A system's HUMANr is the mean
value over its kept comparisons.

Human-vs-Human pairs: one of the two human captions is chosen at random as the
reference (``choose_reference``); the caller then passes
``human_on_left=True`` when that reference caption was shown on the left.

Attention checks: a human caption of the image (the correct one) against a
human caption of a different, random image; for a check, ``human_on_left``
means "the correct caption was on the left". A check fails when the oriented
answer is >= 5 (neutral counts as a failure), and a failed check drops every
response of its group from the scores.

Modules: ``scoring`` (one answer), ``groups`` (groups of trials), ``responses`` (the
answered trials), ``estimators`` and ``reproducibility`` (the report's estimators, each
into a frozen result), ``baseline`` (each system against the Human-vs-Human baseline) and
``reporting`` (:func:`estimate` composes them into a :class:`ReportResult`; :func:`report`
is its JSON dict). Every public name is importable from ``rubrics.humanr``.
"""

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this package (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from rubrics.humanr.baseline import BASELINE_TEST, BaselineTest, baseline_tests
from rubrics.humanr.estimators import TInterval, t_interval
from rubrics.humanr.groups import Group, Trial, build_groups, build_system_groups
from rubrics.humanr.reporting import ReportResult, SystemEntry, estimate, report
from rubrics.humanr.responses import Responses
from rubrics.humanr.scoring import (
    GROUP_SIZE,
    HUMAN_SYSTEM,
    NEUTRAL,
    SLIDER_MAX,
    SLIDER_MIN,
    attention_check_failed,
    choose_reference,
    comparison_value,
    orient,
)

__all__ = [
    "BASELINE_TEST",
    "GROUP_SIZE",
    "HUMAN_SYSTEM",
    "NEUTRAL",
    "SLIDER_MAX",
    "SLIDER_MIN",
    "BaselineTest",
    "Group",
    "ReportResult",
    "Responses",
    "SystemEntry",
    "TInterval",
    "Trial",
    "attention_check_failed",
    "baseline_tests",
    "build_groups",
    "build_system_groups",
    "choose_reference",
    "comparison_value",
    "estimate",
    "orient",
    "report",
    "t_interval",
]
