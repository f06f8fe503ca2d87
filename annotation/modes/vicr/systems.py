"""The VICR report's per-system results (issue 26): each system's mean game rating with its
interval, the differences between systems, and their figure.

The numbers come from ``rubrics.vicr_systems.fit_systems`` over the report's final view
(the same ratings as its agreement): a pair's score is the mean of its final-view ratings,
a system's mean the mean of its pairs' scores, intervals by percentile bootstrap over
images, paired across systems (THumB's and HUMANr's convention, ``rubrics.resampling``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from annotation.models import Caption, Item, Study
from annotation.modes.vicr.protocol import GAME
from rubrics import vicr_systems

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Resamples and confidence of the per-system intervals: the defaults of THumB's and
#: HUMANr's reports (1,000 resamples; 95%, HUMANr's level), fixed here rather than study
#: settings so that adding them changed no stored study.
RESAMPLES = 1000
CONFIDENCE = 0.95
FIGURE = "systems"


def systems_section(study: Study, final: dict[int, list[int]]) -> dict[str, Any]:
    """Per-system results of the final view ``final`` (game item id -> kept ratings).

    ``{"error": reason}`` when no game pair has a kept rating yet.
    """
    # The whole study's rows, not ``pk__in``: a VICR study's 17,000 pairs would exceed
    # SQLite's limit on query parameters.
    items = dict(Item.objects.filter(study=study, kind=GAME).values_list("pk", "spec__caption_id"))
    captions = {
        pk: (image_id, system)
        for pk, image_id, system in Caption.objects.filter(study=study).values_list(
            "pk", "image_id", "system"
        )
    }
    images, systems, scores = [], [], []
    for item_id, ratings in final.items():
        caption = captions.get(int(items.get(item_id) or 0))
        if caption is None or not ratings:
            continue
        images.append(caption[0])
        systems.append(caption[1])
        scores.append(sum(ratings) / len(ratings))
    if not scores:
        return {"error": "no game pair has a rating in the final view yet"}
    result = vicr_systems.fit_systems(
        images,
        systems,
        scores,
        n_resamples=RESAMPLES,
        confidence=CONFIDENCE,
        seed=abs(study.seed) % 2**63,
    )
    return {"error": "", **result.as_dict()}


def systems_figure(section: dict[str, Any] | None) -> Figure:
    """Each system's mean rating with its interval (the THumB totals figure's layout)."""
    from matplotlib.figure import Figure

    rows = (section or {}).get("systems") or []
    figure = Figure(figsize=(6, 0.9 + 0.45 * max(len(rows), 1)))
    axes = figure.subplots()
    if not rows:
        reason = (section or {}).get("error") or "recompute the report to draw this figure"
        axes.text(0.5, 0.5, f"Not computed: {reason}", ha="center", va="center", wrap=True)
        axes.set_axis_off()
        return figure
    means = np.array([row["mean"] for row in rows])
    lows = np.array([row["ci_low"] if row["ci_low"] is not None else row["mean"] for row in rows])
    highs = np.array(
        [row["ci_high"] if row["ci_high"] is not None else row["mean"] for row in rows]
    )
    y = np.arange(len(rows))[::-1]  # the best system on top
    axes.errorbar(means, y, xerr=[means - lows, highs - means], fmt="o", color="#0b57d0", capsize=3)
    axes.set_yticks(y, [row["system"] for row in rows])
    percent = round(section["confidence"] * 100)
    axes.set_xlabel(f"mean game rating with {percent}% bootstrap interval (images)")
    axes.set_title("Rating by system")
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure
