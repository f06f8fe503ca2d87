"""Adaptive allocation: when a VICR pair has enough ratings, which HUMANr systems need more.

Issue 15 ("plan and stop"). Pure functions over plain numbers and arrays; the assignment
service only calls them. Nothing here is timed or random unless a seed is passed.

VICR: stop a pair when its consensus is settled
-----------------------------------------------
A pair's consensus is ``rubrics.vicr.consensus``: the mean of its ratings rounded half up.
A fixed design collects ``max_ratings`` ratings for every pair. The adaptive rule collects
``min_ratings`` and then one more at a time while the consensus could still move.

Why not "the consensus cannot change whatever the remaining ratings are"? That exact rule
never stops early on a 1-5 scale: after [5, 5] with up to 7 ratings, five ratings of 1 give
a mean of 15/7 and a consensus of 2. Any rule that saves ratings accepts a small risk, so the
rule states the risk and bounds it:

    stop when P(consensus of max_ratings ratings != consensus now | ratings so far) <= risk

The probability comes from a latent-class model of raters (``RaterModel``): each pair
belongs to a class t with prior ``prior[t]`` (by default two classes per level: pairs that
raters find clear and pairs they split on), and every rating of the pair is drawn
independently from ``noise[t]`` (rating distributions shared by all raters, the homogeneous
Dawid-Skene model). Given the ratings so far, the posterior of t is exact (Bayes' rule over
the classes); given t, the sum T of the m remaining ratings is the m-fold convolution of
``noise[t]``; the consensus after all of them is ``round_half_up((S + T) / max_ratings)``,
the mode's own rounding. So the probability of a change is computed exactly, without
sampling (``vicr_change_probability``; the tests check it against brute force over every
completion and ``rubrics.vicr.consensus``).

Where the model comes from: ``fit_rater_model`` estimates it by EM from any ratings, e.g. a
pilot study or the pairs a study has already finished; ``RaterModel.symmetric`` states it
from assumptions (the share of ratings equal to the true level, and adjacent to it).

``risk`` bounds the chance that one stopped pair ends with another consensus than
``max_ratings`` ratings would give; a study's target ("95% of pairs keep the full-data
consensus") is over all pairs, including those never stopped early, so a larger per-pair
risk can meet it. ``vicr_calibrate_risk`` picks the largest risk whose agreement reaches
the target on pairs simulated from the model (no oracle needed). ``vicr_replay`` and
``vicr_replay_all_orders`` replay the rule on known ratings (``bench/adaptive.py``).

HUMANr: serve the systems whose interval is still too wide
----------------------------------------------------------
A system's HUMANr interval is the report's t-interval (``rubrics.humanr.report``):
mean +- t quantile x standard error. ``humanr_next_systems`` returns the systems whose
half-width is still above the target (widest first); a system whose half-width has reached
the target gets no more groups. As wired (``annotation/modes/humanr``), the interval is over
one vote per worker (``humanr_next_systems_by_worker``, the report's ``worker_t_interval``)
and every group holds one system, so a settled system's groups are simply not served.
Stopping on a random width makes the interval a little optimistic (a run of votes that
happen to agree stops early), so a system is never stopped before ``min_values`` values and
``min_workers`` workers (the mode uses 27 and 10); ``tests/rubrics/test_adaptive_coverage.py``
measures the coverage that leaves, and ``bench/adaptive.py`` the saving on the platform.

Modules: :mod:`~rubrics.adaptive.rater_model` (``RaterModel``, ``fit_rater_model``),
:mod:`~rubrics.adaptive.vicr_stopping` (the rule), :mod:`~rubrics.adaptive.vicr_replay`
(replays and risk calibration) and :mod:`~rubrics.adaptive.humanr_allocation`; every
public name is importable from ``rubrics.adaptive``.
"""

from rubrics.adaptive.humanr_allocation import (
    humanr_half_width,
    humanr_next_systems,
    humanr_next_systems_by_worker,
)
from rubrics.adaptive.rater_model import RaterModel, fit_rater_model
from rubrics.adaptive.vicr_replay import (
    MAX_ORDER_RATINGS,
    RiskCalibration,
    VicrExpectation,
    VicrReplay,
    vicr_calibrate_risk,
    vicr_replay,
    vicr_replay_all_orders,
)
from rubrics.adaptive.vicr_stopping import MAX_RATINGS, vicr_change_probability, vicr_needs_more

__all__ = [
    "MAX_ORDER_RATINGS",
    "MAX_RATINGS",
    "RaterModel",
    "RiskCalibration",
    "VicrExpectation",
    "VicrReplay",
    "fit_rater_model",
    "humanr_half_width",
    "humanr_next_systems",
    "humanr_next_systems_by_worker",
    "vicr_change_probability",
    "vicr_calibrate_risk",
    "vicr_needs_more",
    "vicr_replay",
    "vicr_replay_all_orders",
]
