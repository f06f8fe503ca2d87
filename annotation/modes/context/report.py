"""The context report: each dimension per system and per domain, BLV and sighted apart.

``run`` reads the kept ratings (``ratings.kept_ratings``: the group is the rater's declared
vision) and hands them to ``rubrics.context.report.context_report``, which computes every
number: each group's mean of each dimension with its interval, BLV minus sighted with its
interval, the sighted raters' before/after change of "overall" and agreement within each
group. The stored report holds only group counts, never who declared what.

``human_scores`` gives every group its own names ("overall (BLV)", "overall (sighted)"),
so the metric lab and the judge alignment (generic pages) show each group apart: a metric
or judge that follows sighted raters but not BLV raters shows it there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from annotation.models import Participant, Study
from annotation.modes.base import Progress, Report
from annotation.modes.context.protocol import GROUPS
from annotation.modes.context.ratings import GROUP_LABELS, kept_ratings, score_rows
from annotation.modes.reliability import reliability_section
from rubrics.context.questions import AFTER, BEFORE
from rubrics.context.report import context_report

# matplotlib is imported where a figure is drawn: the export path imports every mode's
# package and must stay within its memory (tests/annotation/test_exports.py).
if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The figures: each before-image dimension's means by group, and the sighted change.
FIGURES = ("group-means", "before-after")
_COLOURS = {"blv": "#0b57d0", "sighted": "#b3261e"}


class ContextReport(Report):
    template = "modes/context/report.html"
    figure_names = FIGURES
    summary_keys = ("n_ratings", "n_raters", "systems")

    def human_scores(self, study: Study) -> tuple[dict[str, list[tuple[int, float]]], str]:
        """One row per kept rating and group-named score (caption id, value); Kendall's
        tau-c, as the ratings take five levels."""
        rows = score_rows(kept_ratings(study))
        return {
            name: [(caption, value) for caption, value, _ in values]
            for name, values in rows.items()
        }, "kendall_tau_c"

    def run(self, study: Study, progress: Progress) -> dict[str, Any]:
        progress(10, "Reading the ratings")
        rated = kept_ratings(study)
        progress(40, "Means, differences and agreement by group")
        confidence = self.mode.settings(study).confidence
        result = context_report([row.rating for row in rated], confidence=confidence)
        progress(90, "Annotator reliability (Dawid-Skene)")
        out = result.as_dict()
        out["domains"] = sorted({row.rating.domain for row in rated})
        out["reliability"] = _reliability(study, rated)
        progress(95, "Done")
        return out

    def summary(self, result: dict[str, Any]) -> dict[str, Any]:
        """The counts and, per system over every domain, each group's means, the
        difference and the change (the per-domain cells stay in the report)."""
        systems = result.get("systems")
        if not isinstance(systems, dict):
            return {}
        return {
            "n_ratings": result.get("n_ratings"),
            "n_raters": result.get("n_raters"),
            "confidence": result.get("confidence"),
            "systems": {name: entry["all"] for name, entry in systems.items()},
        }

    def context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """The stored cells as table rows (templates cannot index by a variable key)."""
        if "systems" not in result:
            return {}
        cells = []
        for system, entry in sorted(result["systems"].items(), key=headline_order):
            cells.append(_cell_rows(system, "All domains", entry["all"]))
            for domain, cell in entry["domains"].items():
                cells.append(_cell_rows(system, domain, cell))
        figures_missing = []
        if not cells:
            figures_missing.append(("group-means", "no rating has been kept yet"))
        if not any(c["change"]["mean"] is not None for c in cells):
            figures_missing.append(("before-after", "no sighted rater has seen an image yet"))
        return {
            "cells": cells,
            "group_labels": GROUP_LABELS,
            "percent": round(100 * result.get("confidence", 0.95), 1),
            "figure_names": [n for n in FIGURES if n not in dict(figures_missing)],
            "figures_missing": figures_missing,
        }

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name == "group-means":
            return _means_figure(result)
        if name == "before-after":
            return _change_figure(result)
        raise KeyError(name)


def _reliability(study: Study, rated: list[Any]) -> dict[str, Any]:
    """Dawid-Skene over the kept before-image overall ratings, both groups in one model:
    their items differ (an item is for one group), so a rater is compared only with the
    others of their group, and the section names no group."""
    pseudonyms = dict(Participant.objects.filter(study=study).values_list("pk", "pseudonym"))
    return reliability_section(
        ((r.rating.participant, r.rating.item, r.rating.before["overall"]) for r in rated),
        pseudonyms=pseudonyms,
        note=(
            "Each rater's competence (the chance their 1-5 overall rating before the image "
            "equals an item's true level) and confusion matrix, from the kept ratings of "
            "items that two or more raters rated"
        ),
    )


def headline_order(named: tuple[str, dict[str, Any]]) -> tuple:
    """The systems' order on the page (issue 47): by the mode's headline, the BLV raters'
    overall rating before the image over every domain, highest first; a system no BLV rater
    rated last, by name."""
    system, entry = named
    mean = entry["all"]["groups"]["blv"]["before"]["overall"]["mean"]
    return (mean is None, -(mean or 0.0), system)


def _cell_rows(system: str, domain: str, cell: dict[str, Any]) -> dict[str, Any]:
    """One cell as rows per dimension: each group's mean, the difference, agreement."""
    groups = cell["groups"]
    rows = []
    for part, dims in (("before", BEFORE), ("after", AFTER)):
        for dim in dims:
            rows.append(
                {
                    "part": part,
                    "dimension": dim,
                    "groups": [
                        {
                            "group": g,
                            "estimate": groups[g][part][dim],
                            "alpha": groups[g]["agreement"][part][dim],
                        }
                        for g in GROUPS
                    ],
                    "difference": cell["difference"].get(dim) if part == "before" else None,
                }
            )
    return {
        "system": system,
        "domain": domain,
        "counts": {g: groups[g]["n_ratings"] for g in GROUPS},
        "raters": {g: groups[g]["n_raters"] for g in GROUPS},
        "rows": rows,
        "change": cell["change"],
    }


def _error_bars(estimates: list[dict[str, Any]]) -> tuple[list[float], list[list[float]]]:
    """Means (NaN without ratings) and error-bar lengths (0 without an interval)."""
    means, low, high = [], [], []
    for e in estimates:
        mean = e["mean"]
        means.append(float("nan") if mean is None else mean)
        low.append(0.0 if e["low"] is None else mean - e["low"])
        high.append(0.0 if e["high"] is None else e["high"] - mean)
    return means, [low, high]


def _means_figure(result: dict[str, Any]) -> Figure:
    """One panel per before-image dimension: each system's mean by group, with intervals."""
    from matplotlib.figure import Figure

    systems = list(result.get("systems", {}))
    if not systems:
        raise KeyError("group-means")
    figure = Figure(figsize=(9, 2.4 + 0.25 * len(systems)))
    axes = figure.subplots(1, len(BEFORE), sharey=True, squeeze=False)[0]
    positions = list(range(len(systems)))
    for ax, dim in zip(axes, BEFORE, strict=True):
        for offset, group in zip((-0.15, 0.15), GROUPS, strict=True):
            estimates = [
                result["systems"][s]["all"]["groups"][group]["before"][dim] for s in systems
            ]
            means, bars = _error_bars(estimates)
            ax.errorbar(
                means,
                [p + offset for p in positions],
                xerr=bars,
                fmt="o" if group == "blv" else "s",
                color=_COLOURS[group],
                label=GROUP_LABELS[group],
                capsize=3,
            )
        ax.set_xlim(0.8, 5.2)
        ax.set_title(dim)
        ax.set_xlabel("Mean rating (1-5)")
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    axes[0].set_yticks(positions, systems)
    # Marker shapes as well as colours: the groups are told apart without colour.
    axes[-1].legend(loc="lower right", frameon=False)
    figure.tight_layout()
    return figure


def _change_figure(result: dict[str, Any]) -> Figure:
    """Each system's sighted change of "overall" after seeing the image, with intervals."""
    from matplotlib.figure import Figure

    systems = list(result.get("systems", {}))
    estimates = [result["systems"][s]["all"]["change"] for s in systems]
    if not any(e["mean"] is not None for e in estimates):
        raise KeyError("before-after")
    means, bars = _error_bars(estimates)
    figure = Figure(figsize=(5, 1.8 + 0.3 * len(systems)))
    ax = figure.subplots()
    ax.axvline(0, color="#5f6368", linewidth=1)
    ax.errorbar(
        means, range(len(systems)), xerr=bars, fmt="s", color=_COLOURS["sighted"], capsize=3
    )
    ax.set_yticks(range(len(systems)), systems)
    ax.set_xlabel('Sighted raters: "overall" after the image minus before')
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure
