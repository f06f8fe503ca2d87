"""HUMANr's report: the score per comparison type, attention checks, reproducibility.

Kept comparisons: judgments of finished groups (an expired lease's partial group has no
attention check to vouch for it) that are not flagged excluded; ``rubrics.humanr.report``
computes HUMANr, its intervals, the half-splits, the standard deviation by number of images
and each system's test against the Human-vs-Human baseline (``vs_baseline``, paired by
image) from them. The figures redraw the paper's Fig. 1 and Fig. 4 from the stored result.
The export's datasheet copies the stored ``systems`` entries, tests included.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

# matplotlib (about 30 MB) is imported where a figure is drawn, not here: the export path
# imports this module through the mode registry and must stay inside its memory budget
# (issue 27; tests/annotation/test_exports.py checks it).
from annotation.models import Assignment, Item, Judgment, Participant, Study
from annotation.modes.base import Progress, Report
from annotation.modes.humanr.protocol import CHECK, GROUP, HUMAN, numpy_seed
from annotation.modes.reliability import reliability_section
from rubrics import humanr as rules

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class HumanrReport(Report):
    template = "modes/humanr/report.html"
    figure_names = ("humanr-by-system", "half-splits", "std-vs-images")
    summary_keys = ("humanr",)
    #: What the datasheet keeps of the report's ``humanr`` section.
    SUMMARY_FIELDS = ("n_kept", "attention_checks", "baseline", "systems", "half_splits")

    def summary(self, result: dict[str, Any]) -> dict[str, Any]:
        """The ``humanr`` section without what the datasheet must not carry (the stored
        report also holds the completion code)."""
        value = result.get("humanr")
        if not isinstance(value, dict):
            return {} if value is None else {"humanr": value}
        return {"humanr": {k: v for k, v in value.items() if k in self.SUMMARY_FIELDS}}

    def human_pairs(self, study: Study) -> dict[str, list[tuple[int, int, int]]]:
        """The comparisons (not attention checks, not excluded, not neutral) as one group,
        the human caption as ``a``."""
        pairs = [
            (
                result["reference_caption_id"],
                result["other_caption_id"],
                0 if result["value"] < 0 else 1,
            )
            for result in Judgment.objects.filter(
                study=study, excluded=False, item__kind=GROUP
            ).values_list("result", flat=True)
            if result.get("kind") != CHECK and result.get("value")
        ]
        return {"HUMANr comparisons": pairs} if pairs else {}

    def run(self, study: Study, progress: Progress) -> dict[str, Any]:
        config = self.mode.settings(study)
        progress(5, "Loading responses")
        rows = report_rows(Judgment.objects.filter(study=study, item__kind=GROUP))
        people = {
            pk: (pseudonym, source)
            for pk, pseudonym, source in Participant.objects.filter(study=study).values_list(
                "pk", "pseudonym", "source"
            )
        }
        n_groups = Item.objects.filter(study=study, kind=GROUP).count()
        progress(20, "Computing HUMANr")
        result = summarize(
            rows,
            people=people,
            seed=study.seed,
            n_bootstrap=config.report_bootstrap,
            n_splits=config.report_splits,
            n_permutations=config.report_permutations,
        )
        result["n_groups_built"] = n_groups
        result["completion_code"] = config.completion_code_for(study)
        result["study_seed"] = study.seed
        # Groups of one system under adaptive allocation: the page shows the interval over
        # one mean per worker (what the rule stops on), not the one over values.
        result["adaptive_allocation"] = bool(config.adaptive_target_half_width)
        progress(90, "Annotator reliability (Dawid-Skene)")
        result["reliability"] = reliability(
            rows, people=people, workers_per_comparison=config.workers_per_comparison
        )
        progress(95, "Done")
        return result

    def context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """The figures the stored report has data for; the others named with what they need
        (on little data an empty chart looked like a broken page)."""
        report = result.get("humanr") or {}
        needs = {
            "humanr-by-system": (
                any(row.get("humanr") is not None for row in report.get("rows", [])),
                "no comparison is kept yet",
            ),
            "half-splits": (bool(report.get("half_splits")), "needs two workers or more"),
            "std-vs-images": (bool(report.get("std_table")), "needs more than 10 images"),
        }
        return {
            "figure_names": [name for name in self.figure_names if needs[name][0]],
            "figures_missing": [
                (name, needs[name][1]) for name in self.figure_names if not needs[name][0]
            ],
        }

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name not in self.figure_names:
            raise KeyError(name)
        if not result.get("humanr"):
            from matplotlib.figure import Figure

            figure = Figure(figsize=(5, 1.5))
            figure.text(0.5, 0.5, "No kept comparisons yet", ha="center", va="center")
            return figure
        report = result["humanr"]
        if name == "humanr-by-system":
            return _figure_by_system(report, worker=bool(result.get("adaptive_allocation")))
        if name == "half-splits":
            return _figure_half_splits(report)
        return _figure_std_vs_images(report)


def report_rows(judgments) -> list[tuple[Any, ...]]:
    """The rows the report reads from ``judgments`` (a queryset of group judgments), in the
    order judged: ``(participant id, item id, assignment status, payload, result, excluded,
    dwell_ms)``. The planner reads a study's pilot the same way."""
    return list(
        judgments.order_by("id").values_list(
            "participant_id",
            "item_id",
            "assignment__status",
            "payload",
            "result",
            "excluded",
            "dwell_ms",
        )
    )


def record(participant_id, item_id, status, payload, result, excluded) -> dict[str, Any]:
    """One judgment row as ``rubrics.humanr.Responses.from_records`` reads it. Only finished
    groups count (an expired lease's partial group has no check to vouch for it)."""
    return {
        "worker_id": participant_id,
        "image_id": result["image_id"],
        "system": result["system"],
        "raw": payload["raw"],
        "human_on_left": bool(result["reference_on_left"]),
        "is_attention_check": result["kind"] == CHECK,
        "group_id": item_id,
        "dropped": bool(excluded) or status != Assignment.Status.SUBMITTED,
    }


def summarize(
    rows: Sequence[tuple[Any, ...]],
    *,
    people: dict[int, tuple[str, str]],
    seed: int,
    n_bootstrap: int = 1000,
    n_splits: int = 1000,
    n_permutations: int = 10_000,
    include_distributions: bool = True,
) -> dict[str, Any]:
    """The HUMANr report from judgment rows.

    ``rows``: ``(participant id, item id, assignment status, payload, result, excluded,
    dwell_ms)`` per judgment, as the report query loads them. Kept: rows of submitted
    (finished) groups not flagged excluded; ``rubrics.humanr.report`` also drops every row
    of a group whose check failed. ``include_distributions`` keeps the half-split values
    for the figure (``half_split_values``).
    """
    tally = _tally(rows)
    out: dict[str, Any] = {
        "n_responses": len(rows),
        "n_incomplete_responses": sum(w["incomplete_responses"] for w in tally.values()),
        "humanr": None,
        "error": "",
    }
    result: rules.ReportResult | None = None
    if rows:
        try:
            result = rules.estimate(
                rules.Responses.from_records(record(*row[:6]) for row in rows),
                n_bootstrap=n_bootstrap,
                n_splits=n_splits,
                n_permutations=n_permutations,
                include_distributions=include_distributions,
                seed=numpy_seed(seed),
            )
        except ValueError as exc:
            out["error"] = str(exc)
    else:
        out["error"] = "No responses yet."
    out["workers"] = _workers(tally, people, result)
    raw_all = [payload["raw"] for _pid, _item, _status, payload, *_rest in rows]
    out["mean_raw_all"] = float(np.mean(raw_all)) if raw_all else None
    out["humanr"] = None if result is None else _for_page(result)
    return out


def _tally(rows: Sequence[tuple[Any, ...]]) -> dict[int, dict[str, Any]]:
    """Per participant, in the order first judged: responses, dwell times, and responses
    of groups left unfinished."""
    per_worker: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"responses": 0, "dwell": [], "incomplete_responses": 0}
    )
    for participant_id, _item_id, status, _payload, _result, _excluded, dwell_ms in rows:
        mine = per_worker[participant_id]
        mine["responses"] += 1
        mine["dwell"].append(dwell_ms)
        if status != Assignment.Status.SUBMITTED:
            mine["incomplete_responses"] += 1
    return per_worker


def _workers(
    tally: dict[int, dict[str, Any]],
    people: dict[int, tuple[str, str]],
    result: rules.ReportResult | None,
) -> list[dict[str, Any]]:
    """The workers table: each participant's answers and what their checks dropped."""
    checked = {} if result is None else result.attention_checks.per_worker
    workers = []
    for participant_id, mine in tally.items():
        pseudonym, source = people.get(participant_id, (str(participant_id), ""))
        counted = checked.get(str(participant_id))
        workers.append(
            {
                "pseudonym": pseudonym,
                "source": source,
                "responses": mine["responses"],
                "groups": counted.groups if counted else 0,
                "checks": counted.checks if counted else 0,
                "failed_checks": counted.failed_checks if counted else 0,
                "dropped_responses": counted.dropped_responses if counted else 0,
                "incomplete_responses": mine["incomplete_responses"],
                "median_seconds": statistics.median(mine["dwell"]) / 1000,
            }
        )
    workers.sort(key=lambda w: (-w["responses"], w["pseudonym"]))
    return workers


def _for_page(result: rules.ReportResult) -> dict[str, Any]:
    """The report's JSON as the page and the figures read it: the workers' checks are in
    the workers table, the half-split values in one list per row for the figure (not one
    copy per view), the baseline first among the rows, and the std table per row."""
    humanr = result.as_dict(distributions=False)
    humanr["attention_checks"].pop("per_worker", None)
    named = {**result.systems, HUMAN: result.baseline}
    humanr["half_split_values"] = {}
    for name, entry in named.items():
        splits = None if entry is None else entry.half_splits
        if splits is not None and splits.half_a is not None and splits.half_b is not None:
            values = splits.half_a + splits.half_b
            humanr["half_split_values"][name] = [v for v in values if v is not None]
    humanr["rows"] = [
        {"system": name, "baseline": False, **entry} for name, entry in humanr["systems"].items()
    ]
    # The headline order (issue 47): highest HUMANr first, a system with none last.
    humanr["rows"].sort(
        key=lambda row: (row.get("humanr") is None, -(row.get("humanr") or 0.0), row["system"])
    )
    if humanr["baseline"] is not None:
        humanr["rows"].insert(0, {"system": HUMAN, "baseline": True, **humanr["baseline"]})
    humanr["std_table"] = [
        {
            "n_images": point["n_images"],
            "values": [point["std"].get(row["system"]) for row in humanr["rows"]],
        }
        for point in humanr["std_by_image_count"]
    ]
    return humanr


def preference(oriented: int) -> str:
    """An oriented 1-9 answer as the three-way preference the reliability model reads."""
    if oriented < rules.NEUTRAL:
        return "reference preferred"
    return "equally good" if oriented == rules.NEUTRAL else "other preferred"


def reliability(
    rows: Sequence[tuple[Any, ...]],
    *,
    people: dict[int, tuple[str, str]],
    workers_per_comparison: int,
) -> dict[str, Any]:
    """Dawid-Skene over the answers of comparisons and attention checks that two or more
    workers answered (every stored answer, dropped groups included: the model judges
    workers, not systems).

    The 1-9 answer, oriented so that low prefers the reference caption, is read as a
    three-way preference: nine levels would leave a 9 x 9 confusion matrix per worker to
    estimate from the 10 answers of a group. A comparison is its ``<image id>:<system>``;
    an attention check belongs to its group (every worker of the group sees the same one).
    With ``workers_per_comparison`` = 1 nothing is answered twice and the section says the
    model is not estimable (docs/protocol-choices.md).
    """
    answers: dict[tuple[int, str], str] = {}
    for participant_id, item_id, _status, _payload, result, _excluded, _dwell in rows:
        task = (
            f"check:{item_id}" if result["kind"] == CHECK else f"comparison:{result['comparison']}"
        )
        answers.setdefault((participant_id, task), preference(int(result["oriented"])))
    note = (
        "Each worker's competence (the chance their answer, read as reference preferred, "
        "equally good or other preferred, equals the true preference) and confusion matrix, "
        "estimated from the comparisons and attention checks that two or more workers "
        f"answered (workers_per_comparison = {workers_per_comparison}"
        + (", so each is answered once, as in the paper" if workers_per_comparison == 1 else "")
        + ")"
    )
    return reliability_section(
        ((participant_id, task, label) for (participant_id, task), label in answers.items()),
        pseudonyms={pk: pseudonym for pk, (pseudonym, _source) in people.items()},
        note=note,
    )


def _figure_by_system(report: dict[str, Any], *, worker: bool = False) -> Figure:
    """Paper Fig. 1 style: one bar per comparison type with its intervals.

    ``worker``: draw the worker t-interval instead of the one over values (adaptive
    allocation, where the latter is too narrow; the page says so).
    """
    key = "worker_t_interval" if worker else "t_interval"
    rows = [row for row in report["rows"] if row["humanr"] is not None]
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 0.6 * len(rows) + 1.4))
    axes = figure.subplots()
    y = np.arange(len(rows))[::-1]
    values = [row["humanr"] for row in rows]
    colours = ["#6b7280" if row["baseline"] else "#0b57d0" for row in rows]
    axes.barh(y, values, color=colours, height=0.55)
    for yy, row in zip(y, rows, strict=True):
        if row.get(key):
            lo, hi = row[key]
            axes.errorbar(
                row["humanr"],
                yy,
                xerr=[[row["humanr"] - lo], [hi - row["humanr"]]],
                fmt="none",
                ecolor="#1b1f24",
                capsize=4,
                lw=1.4,
            )
        if row["bootstrap_interval"]:
            lo, hi = row["bootstrap_interval"]
            axes.plot([lo, hi], [yy - 0.36, yy - 0.36], color="#a4001d", lw=2.5)
    axes.axvline(0, color="#1b1f24", lw=0.8)
    axes.set_yticks(y, [f"Human–{row['system']}" for row in rows])
    axes.set_xlim(-1, 1)
    axes.set_xlabel("HUMANr (−1: human caption preferred, +1: model caption preferred)")
    axes.set_title(
        "HUMANr by comparison\n(black: 95% t-interval, red: bootstrap over images)", fontsize=10
    )
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure


def _figure_half_splits(report: dict[str, Any]) -> Figure:
    """Paper Fig. 4 left: HUMANr on random halves of the workers."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.4))
    axes = figure.subplots()
    drawn = False
    for row in report["rows"]:
        values = report.get("half_split_values", {}).get(row["system"])
        if values:
            axes.hist(values, bins=40, alpha=0.6, label=f"Human–{row['system']}")
            drawn = True
    axes.set_xlim(-1, 1)
    axes.set_xlabel("HUMANr on one half of the workers")
    axes.set_ylabel("Half-splits")
    axes.set_title("Reproducibility over random half-splits of workers")
    if drawn:
        # A fixed corner: "best" scans the 40-bin histograms' every bar and warns that it
        # is slow. HUMANr of a model sits at or below 0, so the upper right stays clear.
        axes.legend(frameon=False, fontsize="small", loc="upper right")
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure


def _figure_std_vs_images(report: dict[str, Any]) -> Figure:
    """Paper Fig. 4 right: standard deviation of HUMANr against the number of images."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.4))
    axes = figure.subplots()
    points = report.get("std_by_image_count") or []
    names = [row["system"] for row in report["rows"]]
    for name in names:
        xs = [p["n_images"] for p in points if p["std"].get(name) is not None]
        ys = [p["std"][name] for p in points if p["std"].get(name) is not None]
        if xs:
            axes.plot(xs, ys, marker="o", label=f"Human–{name}")
    axes.set_xlabel("Number of images")
    axes.set_ylabel("Std of HUMANr")
    axes.set_title("Stability of HUMANr with the number of images")
    if points:
        axes.set_xscale("log")
        counts = [p["n_images"] for p in points]
        axes.set_xticks(counts, [str(n) for n in counts])
        axes.minorticks_off()
        axes.legend(frameon=False, fontsize="small")
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure
