"""THumB's report: final scores per caption (stage 2's, or stage 1's in a study without
stage 2; fluency from a fluency round when there is one), the paper's tables, the stage
agreement, the third annotator's check and the two figures.

The statistics are ``rubrics.thumb.report``, ``stage_agreement`` and ``check_agreement``;
this module reads the judgments they need and shapes the page.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

# matplotlib (about 30 MB) is imported where a figure is drawn, not here: the export path
# imports this module through the mode registry and must stay inside its memory budget
# (issue 27; tests/annotation/test_exports.py checks it).
from annotation.errors import ServiceError
from annotation.models import Caption, Image, Item, Judgment, Participant, Study
from annotation.modes import catch
from annotation.modes.base import Progress, Report
from annotation.modes.reliability import reliability_section
from annotation.modes.thumb.protocol import (
    CHECK,
    FLUENCY,
    REVIEWS,
    SCORE_FIELDS,
    STAGE1,
    STAGE2,
    number_text,
)
from rubrics import thumb as rubric

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HISTOGRAM_FIGURE = "precision-recall-histograms"
TOTALS_FIGURE = "system-totals"


def kept_stages(study: Study) -> dict[int, dict[str, dict[str, Any]]]:
    """Per image, the payload of the first kept judgment of each kind (targets are 1; a
    later one is a repeat)."""
    stages: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    rows = (
        Judgment.objects.filter(study=study, excluded=False)
        .order_by("id")
        .values_list("item__image_id", "item__kind", "payload")
    )
    for image_id, kind, payload in rows:
        stages[image_id].setdefault(kind, payload)
    return stages


def final_stage_of(config) -> str:
    """The stage whose scores are final: stage 2's when the study has it (the paper's)."""
    return STAGE2 if config.stage2 else STAGE1


def final_scores(by_kind: dict[str, dict[str, Any]], final_stage: str) -> list[dict[str, Any]]:
    """An image's final scores per caption group: the final stage's, with the fluency of a
    fluency round when there is one. The one home of THumB's final-score rule (the report
    and the metric lab read it)."""
    fluency = by_kind.get(FLUENCY, {}).get("captions", {})
    return [
        {**scores, "fluency": fluency[key]["fluency"] if key in fluency else scores["fluency"]}
        for key, scores in by_kind[final_stage]["captions"].items()
    ]


class ThumbReport(Report):
    template = "modes/thumb/report.html"
    figure_names = (HISTOGRAM_FIGURE, TOTALS_FIGURE)
    summary_keys = ("stage_agreement", "third_check", "developmental")

    def run(self, study: Study, progress: Progress) -> dict[str, Any]:
        """Final scores per caption, then ``rubrics.thumb.report``, the stage agreement
        (``stage_agreement``, leaving out the developmental phase) and the third annotator's
        check (``check_agreement``).

        The final scores are stage 2's when the study has stage 2 (stage 1's otherwise);
        images with stage 1 only are counted and left out, never mixed in (see
        docs/protocol-choices.md). Fluency comes from a fluency round when there is one.
        """
        progress(5, "Reading judgments")
        config = self.mode.settings(study)
        final_stage = final_stage_of(config)
        stages, waiting = _reported_stages(study, final_stage)
        progress(20, "Combining stages")
        combined = _combine(
            stages, _caption_rows(study), _developmental(study, config), final_stage
        )
        progress(40, "Bootstrapping confidence intervals")
        result = rubric.report(
            rubric.CaptionJudgments.from_records(combined.records),
            metrics=_metrics(combined.metric_rows),
            weights=(config.weight_precision, config.weight_recall),
            n_resamples=config.bootstrap_resamples,
            confidence=config.confidence,
            seed=study.seed,
        ).as_dict()
        progress(85, "Stage agreement and the third annotator's check")
        stage1_rows, stage2_rows = combined.reviews[STAGE2]
        result["stage_agreement"] = (
            rubric.stage_agreement(_score_arrays(stage1_rows), _score_arrays(stage2_rows)).as_dict()
            if stage1_rows
            else None
        )
        result["developmental"] = {
            "images": config.developmental_images,
            "excluded_images": combined.developmental_images,
            "excluded_captions": combined.developmental_captions,
        }
        result["third_check"] = _third_check(study, config, *combined.reviews[CHECK])
        result["workflow"] = _workflow(study, final_stage, stages, waiting, combined)
        # Catch trials (annotation.modes.catch): share caught per transformation and gamma.
        people = Participant.objects.filter(study=study).values_list("pk", "pseudonym")
        result["catch"] = catch.report_section(
            study.pk, people={pk: {"pseudonym": pseudonym} for pk, pseudonym in people}
        )
        progress(95, "Annotator reliability (Dawid-Skene)")
        result["reliability"] = _reliability(study)
        progress(100, "Done")
        return result

    def human_scores(self, study: Study) -> tuple[dict[str, list[tuple[int, float]]], str]:
        """P, R and Total of every caption with final scores (the rule ``run`` uses), with
        Pearson's r, as THumB's Table 4."""
        final_stage = final_stage_of(self.mode.settings(study))
        out: dict[str, list[tuple[int, float]]] = {"P": [], "R": [], "Total": []}
        for by_kind in kept_stages(study).values():
            if final_stage not in by_kind:
                continue
            for scores in final_scores(by_kind, final_stage):
                total = rubric.total(
                    scores["precision"],
                    scores["recall"],
                    scores["fluency"],
                    scores["conciseness"],
                    scores["inclusive"],
                )
                for caption_id in scores["caption_ids"]:
                    out["P"].append((caption_id, float(scores["precision"])))
                    out["R"].append((caption_id, float(scores["recall"])))
                    out["Total"].append((caption_id, float(total)))
        return (out, "pearson") if out["P"] else ({}, "pearson")

    def context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """Table rows for the page and a Total re-weighted with the form's P/R weights.

        Total is linear in P, R and the penalties, so the weighted mean per system follows
        from the stored means exactly; its bootstrap interval is only stored for the
        study's own weights.
        """
        stored = result.get("weights", {"precision": 0.5, "recall": 0.5})
        weights_error = ""
        try:
            w_p = float(query.get("wp", stored["precision"]))
            w_r = float(query.get("wr", stored["recall"]))
            if not (math.isfinite(w_p) and math.isfinite(w_r)) or w_p < 0 or w_r < 0:
                raise ValueError
        except ValueError:
            weights_error = "Weights must be non-negative numbers; showing the study's weights."
            w_p, w_r = stored["precision"], stored["recall"]
        rows = []
        for system in result["systems"]:
            entry = result["per_system"][system]
            means = {f: entry[f]["mean"] for f in (*SCORE_FIELDS, "total")}
            penalties = means["fluency"] + means["conciseness"] + means["inclusive"]
            rows.append(
                {
                    "system": system,
                    "entry": entry,
                    "weighted": w_p * means["precision"] + w_r * means["recall"] - penalties,
                    "histogram": result["histograms"]["per_system"].get(system),
                }
            )
        correlations = []
        for metric, values in (result.get("correlations") or {}).items():
            correlations.append({"metric": metric, **values})
        return {
            "rows": rows,
            "weights_form": {"wp": number_text(w_p), "wr": number_text(w_r)},
            "weights_error": weights_error,
            "weights_stored": stored,
            "weights_changed": not (
                math.isclose(w_p, stored["precision"]) and math.isclose(w_r, stored["recall"])
            ),
            "correlation_rows": correlations,
            "agreement": result.get("stage_agreement"),
            "developmental": result.get("developmental"),
            "check": result.get("third_check"),
            "workflow": result.get("workflow", {}),
            "ci_percent": round(result["bootstrap"]["confidence"] * 100),
        }

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name == HISTOGRAM_FIGURE:
            from matplotlib.figure import Figure

            figure = Figure(figsize=(8, 3.2))
            # No layout engine: savefig(bbox_inches="tight") trims the margins, and layout
            # engines triple the drawing time of these small figures.
            figure.subplots_adjust(wspace=0.08)
            axes = figure.subplots(1, 2, sharey=True)
            scores = np.arange(1, 6)
            for ax, field, title in zip(
                axes, ("precision", "recall"), ("Precision", "Recall"), strict=True
            ):
                for offset, group, colour in (
                    (-0.2, "human", "#0b57d0"),
                    (0.2, "machine", "#c2410c"),
                ):
                    counts = np.array(result["histograms"][group][field], dtype=float)
                    shares = counts / counts.sum() if counts.sum() else counts
                    ax.bar(
                        scores + offset,
                        shares,
                        width=0.4,
                        color=colour,
                        label="Human" if group == "human" else "Machines",
                    )
                ax.set_xticks(scores)
                ax.set_title(title)
                ax.set_xlabel("score")
            axes[0].set_ylabel("share of captions")
            axes[1].legend(frameon=False)
            return figure
        if name == TOTALS_FIGURE:
            systems = result["systems"]
            from matplotlib.figure import Figure

            figure = Figure(figsize=(6, 0.5 + 0.45 * len(systems)))
            ax = figure.subplots()
            means = [result["per_system"][s]["total"]["mean"] for s in systems]
            lows = [result["per_system"][s]["total"]["ci_low"] for s in systems]
            highs = [result["per_system"][s]["total"]["ci_high"] for s in systems]
            y = np.arange(len(systems))[::-1]
            err = np.array(
                [
                    [m - lo for m, lo in zip(means, lows, strict=True)],
                    [hi - m for m, hi in zip(means, highs, strict=True)],
                ]
            )
            ax.errorbar(means, y, xerr=err, fmt="o", color="#0b57d0", capsize=3)
            ax.set_yticks(y, systems)
            percent = round(result["bootstrap"]["confidence"] * 100)
            ax.set_xlabel(f"mean Total with {percent}% bootstrap interval")
            return figure
        raise KeyError(name)


Stages = dict[int, dict[str, dict[str, Any]]]
"""Per image id, the payload of each kind of judgment it has (``kept_stages``)."""


@dataclasses.dataclass(frozen=True)
class Waiting:
    """Images judged in stage 1 whose final stage has not come yet, and their captions."""

    images: int
    captions: int


def _reported_stages(study: Study, final_stage: str) -> tuple[Stages, Waiting]:
    """The kept judgments of the images with final scores, and what waits for them; a
    ServiceError when nothing can be reported yet."""
    stages = {image_id: s for image_id, s in kept_stages(study).items() if STAGE1 in s}
    if not stages:
        raise ServiceError("No stage-1 judgments yet: nothing to report.")
    waiting = sorted(image_id for image_id, s in stages.items() if final_stage not in s)
    waiting_captions = sum(
        len(scores["caption_ids"])
        for image_id in waiting
        for scores in stages[image_id][STAGE1]["captions"].values()
    )
    stages = {image_id: s for image_id, s in stages.items() if final_stage in s}
    if not stages:
        raise ServiceError(
            f"No image has finished stage 2 yet ({len(waiting)} image"
            f"{'s have' if len(waiting) != 1 else ' has'} stage 1 only). The scores are "
            "stage 2's, as in the paper, where a second annotator checks every image: "
            "compute the report once stage 2 has begun."
        )
    return stages, Waiting(images=len(waiting), captions=waiting_captions)


def _caption_rows(study: Study) -> dict[int, tuple[int, str, dict[str, Any] | None]]:
    """Per caption id, its image id, system and automatic metric scores."""
    return {
        caption_id: (image_id, system, metrics)
        for caption_id, image_id, system, metrics in Caption.objects.filter(
            study=study
        ).values_list("id", "image_id", "system", "metrics")
    }


def _developmental(study: Study, config) -> set[int]:
    """The images of the developmental phase, left out of the stage agreement."""
    if not config.developmental_images:
        return set()
    return rubric.developmental_images(
        Item.objects.filter(study=study, kind=STAGE1)
        .order_by("position", "id")
        .values_list("image_id", flat=True),
        config.developmental_images,
    )


@dataclasses.dataclass
class Combined:
    """The judgments of every reported image, as the statistics take them.

    ``records`` and ``metric_rows`` hold one row per caption with its final scores and its
    metric scores; ``reviews`` maps a review kind (stage 2, the check) to the reviewed and
    the reviewing scores, row by row; the rest counts for the workflow section.
    """

    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    metric_rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    reviews: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = dataclasses.field(
        default_factory=lambda: {STAGE2: ([], []), CHECK: ([], [])}
    )
    developmental_images: int = 0
    developmental_captions: int = 0
    fluency_rounds: int = 0


def _combine(
    stages: Stages,
    captions: dict[int, tuple[int, str, dict[str, Any] | None]],
    developmental: set[int],
    final_stage: str,
) -> Combined:
    """Every reported image's review pairs and final scores, image by image in id order."""
    combined = Combined()
    for image_id in sorted(stages):
        by_kind = stages[image_id]
        combined.fluency_rounds += FLUENCY in by_kind
        _add_reviews(combined, image_id, by_kind, developmental)
        for scores in final_scores(by_kind, final_stage):
            for caption_id in scores["caption_ids"]:
                _, system, metrics = captions[caption_id]
                combined.records.append(
                    {
                        "image_id": image_id,
                        "system": system,
                        **{name: scores[name] for name in SCORE_FIELDS},
                    }
                )
                combined.metric_rows.append(metrics or {})
    return combined


def _add_reviews(
    combined: Combined, image_id: int, by_kind: dict[str, Any], developmental: set[int]
) -> None:
    """One image's reviewed and reviewing scores per review kind, caption group by group;
    the stage-2 review of a developmental image is counted and left out."""
    for kind, reviewed in REVIEWS.items():
        if kind not in by_kind or reviewed not in by_kind:
            continue
        if kind == STAGE2 and image_id in developmental:
            combined.developmental_images += 1
            combined.developmental_captions += len(by_kind[kind]["captions"])
            continue
        before, after = combined.reviews[kind]
        for key, scores in by_kind[kind]["captions"].items():
            if key in by_kind[reviewed]["captions"]:
                before.append(by_kind[reviewed]["captions"][key])
                after.append(scores)


def _metrics(metric_rows: list[dict[str, Any]]) -> dict[str, np.ndarray] | None:
    """Per metric name, its score of each caption (NaN where unscored); None for none."""
    names = sorted({name for m in metric_rows for name in m})
    return {
        name: np.array([_metric_value(m.get(name)) for m in metric_rows]) for name in names
    } or None


def _third_check(
    study: Study, config, final_rows: list[dict[str, Any]], check_rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """The third annotator's check: how many captions were asked, sampled and checked, and
    ``rubrics.thumb.check_agreement`` of the checked ones."""
    sampled = Item.objects.filter(study=study, kind=STAGE2).values_list(
        "spec__check_keys", flat=True
    )
    return {
        "captions": config.third_check_captions if config.stage2 else 0,
        "sampled": sum(len(keys or ()) for keys in sampled),
        "checked": len(check_rows),
        "agreement": (
            rubric.check_agreement(_score_arrays(final_rows), _score_arrays(check_rows)).as_dict()
            if check_rows
            else None
        ),
    }


def _workflow(
    study: Study, final_stage: str, stages: Stages, waiting: Waiting, combined: Combined
) -> dict[str, Any]:
    """Where the study's images are in the workflow, for the report's page."""
    stage1_images = Item.objects.filter(study=study, kind=STAGE1).values("image_id")
    fluency_items = set(
        Item.objects.filter(study=study, kind=FLUENCY).values_list("image_id", flat=True)
    )
    return {
        "scores_from": final_stage,
        "images_judged": len(stages),
        "images_with_stage2": sum(STAGE2 in s for s in stages.values()),
        "stage1_only_images": waiting.images,
        "stage1_only_captions": waiting.captions,
        "fluency_rounds": combined.fluency_rounds,
        "fluency_pending": sum(
            image_id in fluency_items and FLUENCY not in s for image_id, s in stages.items()
        ),
        "images_skipped": Image.objects.filter(study=study).exclude(pk__in=stage1_images).count(),
    }


def _reliability(study: Study) -> dict[str, Any]:
    """Dawid-Skene over the precision and recall scores of every caption text scored by more
    than one annotator (stage 1, its stage-2 review, the third annotator's check), excluded
    judgments included: the model judges annotators, not captions. A task is one score of
    one caption text; an annotator's repeat of the same task keeps the first answer."""
    answers: dict[tuple[int, str], int] = {}
    rows = (
        Judgment.objects.filter(study=study, item__kind__in=(STAGE1, STAGE2, CHECK))
        .order_by("id")
        .values_list("participant_id", "item__image_id", "payload")
    )
    for participant_id, image_id, payload in rows:
        for key, scores in (payload.get("captions") or {}).items():
            for field in ("precision", "recall"):
                if scores.get(field) is not None:
                    task = f"{image_id}:{key}:{field}"
                    answers.setdefault((participant_id, task), int(scores[field]))
    return reliability_section(
        ((participant_id, task, label) for (participant_id, task), label in answers.items()),
        pseudonyms=dict(Participant.objects.filter(study=study).values_list("pk", "pseudonym")),
        note=(
            "Each annotator's competence (the chance their 1-5 precision or recall score "
            "equals the caption's true score) and confusion matrix, estimated from the scores "
            "of captions that two or more annotators scored (stage 1, stage 2, the third "
            "check), excluded judgments included"
        ),
    )


def _metric_value(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _score_arrays(rows: list[dict[str, Any]]) -> rubric.ScoreArrays:
    return rubric.ScoreArrays(
        **{field: np.array([row[field] for row in rows], dtype=float) for field in SCORE_FIELDS}
    )
