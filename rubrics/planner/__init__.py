"""Sample-size planner: predict a study's interval widths, power and cost by simulation.

Issue 15 ("plan and stop"). Before a study opens, a researcher chooses how many images and
how many judgments per item to pay for. The planner simulates studies of each candidate
size and runs every simulated study through the mode's OWN report code, so the predicted
width is the width the real report will print:

* THumB: ``rubrics.thumb.report``'s paired bootstrap interval of Total, per system; power:
  the paired bootstrap interval of the difference of two named systems excludes 0;
* HUMANr: ``rubrics.humanr.report``'s t-interval of HUMANr, per system (and the
  Human-vs-Human baseline); power: the report's test of a named system against the
  baseline (``vs_baseline``, the paired sign-flip test) rejects at ``1 - confidence``;
* VICR: the virtual-rater agreement of ``rubrics.vicr.virtual_raters`` (Fleiss' kappa and
  Kendall's W, x100). The VICR report prints no interval for them, so the planner predicts
  the interval a study of that size would fall in: half the central ``confidence`` range of
  the statistic over the simulated studies. No power (there are no systems to separate).

Where the simulated studies come from, per mode:

* a pilot: THumB and HUMANr resample the pilot's images with replacement (an image keeps
  all its captions or comparisons, so the pairing between systems is kept); VICR fits a
  ``rubrics.adaptive.RaterModel`` to the pilot's ratings and draws from it (a pilot pair has
  too few ratings to resample more of them);
* stated assumptions: ``ThumbAssumptions`` (per-system mean score, an image effect shared
  by the systems, a caption's noise), ``HumanrAssumptions`` (per-system distribution of
  slider answers, ``slider_pmf``), or a ``RaterModel`` for VICR (``RaterModel.symmetric``:
  how often a rater gives the true level or a neighbour).

Every point of the curve holds the mean predicted half-width of each headline number, the
power and the cost (``study_cost``: judgments, money at a price per judgment, crowd hours
at a median time per judgment). ``Plan.recommended`` is the cheapest point whose every
half-width is at or below the target and whose power reaches ``power_target`` (None when
no point of the grid does). Work is bounded: at most ``MAX_SIMULATIONS`` simulations per
point, ``MAX_POINTS`` points, and ``MAX_SIMULATED_JUDGMENTS`` simulated judgments in all
(``check_budget``): the cost grows with sizes x judgments x simulations, and the largest
request the page accepted before that bound (8 sizes of 5,000 images, 20 judgments, 100
simulations) took minutes of CPU per request and, twice at once, killed the web workers.

Modules: :mod:`~rubrics.planner.plans` (the bounds, ``Cost``, ``PlanPoint``, ``Plan``,
``check_budget``) and one per mode, :mod:`~rubrics.planner.thumb_plan`,
:mod:`~rubrics.planner.humanr_plan` and :mod:`~rubrics.planner.vicr_plan`; every public
name is importable from ``rubrics.planner``.
"""

from rubrics.planner.humanr_plan import (
    HumanrAssumptions,
    humanr_pilot_images,
    plan_humanr,
    slider_pmf,
)
from rubrics.planner.plans import (
    IMAGE_OVERHEAD,
    MAX_POINTS,
    MAX_SIMULATED_JUDGMENTS,
    MAX_SIMULATIONS,
    Cost,
    Plan,
    PlanPoint,
    check_budget,
    study_cost,
)
from rubrics.planner.thumb_plan import ThumbAssumptions, plan_thumb
from rubrics.planner.vicr_plan import VICR_HEADLINES, plan_vicr

__all__ = [
    "IMAGE_OVERHEAD",
    "MAX_POINTS",
    "MAX_SIMULATED_JUDGMENTS",
    "MAX_SIMULATIONS",
    "VICR_HEADLINES",
    "Cost",
    "HumanrAssumptions",
    "Plan",
    "PlanPoint",
    "ThumbAssumptions",
    "check_budget",
    "humanr_pilot_images",
    "plan_humanr",
    "plan_thumb",
    "plan_vicr",
    "slider_pmf",
    "study_cost",
]
