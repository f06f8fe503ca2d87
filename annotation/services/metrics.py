"""The metric lab: reference captions, metrics computed as a job, and the meta-evaluation.

- References come from ``services/imports/references.py:references_import``, and
  Pascal-50S from HUMANr's ``annotation/modes/humanr/importers.py``.
- ``metrics_request`` queues a metrics job; the job runner calls ``metrics_compute``, which
  scores every study caption that has references with ``rubrics.metrics.compute``, stores
  the scores in ``Caption.metrics`` under the metric's implementation name (beside imported
  columns such as CLIP-S), measures each metric's robustness (Cui et al.) and stores the
  meta-evaluation report on the job.
- ``metaeval_report`` is that report: the system-level table, caption-level correlations
  with every human score of the study, pairwise accuracy (against the imported pairs'
  labels the job chose: ``services/metrics_labels.py``), robustness.
  ``services/metrics_ensemble.py`` fits an ENSEMBEVAL-style linear ensemble on one study
  and evaluates it on another.

Which references a caption gets (docs/protocol-choices.md, "Metric lab"): the study's
imported references of its image (a Pascal-50S pair's own five for the captions of that
pair) when the study has imported references; otherwise the other human captions of its
image. The result names which.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from django.db import transaction

from annotation.errors import Conflict, ServiceError
from annotation.models import (
    Caption,
    DatasetScore,
    Job,
    PairJudgment,
    Reference,
    Study,
    User,
)
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.services.jobs import job_create
from annotation.services.metrics_clip import CLIP_NAMES, clip_folder, clip_refusal, clip_scores
from annotation.services.metrics_labels import DATASET, labelled_pairs, labels_check, labels_used
from annotation.services.metrics_robustness import metrics_robustness
from rubrics import alignment, metaeval
from rubrics import metrics as metric_rules

Progress = Callable[..., None]

#: Bootstrap resamples of each correlation interval (a job may ask for fewer).
RESAMPLES = 1000
#: Random tie-breaking repeats of pairwise accuracy (survey Table 5: five).
TIE_REPEATS = 5
WITH_HUMAN, WITHOUT_HUMAN = "with Human", "without Human"
IMPORTED, OTHER_HUMANS = "imported references", "the other human captions of the image"
#: CIDEr's document frequencies (``rubrics.metrics.compute``'s ``cider_documents``): what
#: each convention counts as one document; the first is the default.
CIDER_CONVENTIONS = {
    "reference_sets": "one document per image's reference set (pycocoevalcap called once "
    "per system, as THumB's Table 2)",
    "candidates": "one document per scored caption (pycocoevalcap called on the whole "
    "dataset at once, as the survey's Tables 4 and 5)",
}
CIDER_DEFAULT = "reference_sets"
#: How pairwise accuracy treats a metric's tie (equal scores for the two captions).
TIE_RULES = {
    "mean": f"ties broken by a fair coin, {TIE_REPEATS} times: mean and standard deviation",
    "ties_as_misses": "a tie counts as wrong (FLEUR's and most papers' single number)",
    "ties_as_half": "a tie counts 1/2",
}


# ---------------------------------------------------------------------- references


def caption_references(study: Study) -> tuple[list[dict[str, Any]], list[list[str]], str]:
    """The study captions that have references, their references, and where those came from.

    Each caption is ``{"id", "image_id", "system", "text"}`` (``text`` is the raw caption:
    the metrics tokenize it themselves). Captions without a reference are left out.
    """
    captions = list(
        Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
        .order_by("id")
        .values("id", "image_id", "system", "raw_text")
    )
    by_image: dict[int, list[str]] = defaultdict(list)
    by_pair: dict[int, list[str]] = defaultdict(list)
    for image_id, pair_id, text in Reference.objects.filter(study=study).values_list(
        "image_id", "pair_id", "text"
    ):
        (by_pair[pair_id] if pair_id else by_image[image_id]).append(text)
    kept, refs = [], []
    if by_image or by_pair:
        source = IMPORTED
        pair_of: dict[int, int] = {}
        for pair_id, a, b in PairJudgment.objects.filter(study=study).values_list(
            "id", "caption_a_id", "caption_b_id"
        ):
            pair_of[a] = pair_of[b] = pair_id
        for caption in captions:
            found = by_pair.get(pair_of.get(caption["id"], 0)) or by_image.get(caption["image_id"])
            if found:
                kept.append(caption)
                refs.append(list(found))
    else:
        source = OTHER_HUMANS
        humans: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for caption in captions:
            if caption["system"] == Caption.HUMAN:
                humans[caption["image_id"]].append((caption["id"], caption["raw_text"]))
        for caption in captions:
            found = [t for cid, t in humans.get(caption["image_id"], []) if cid != caption["id"]]
            if found:
                kept.append(caption)
                refs.append(found)
    for caption in kept:
        caption["text"] = caption.pop("raw_text")
    return kept, refs, source


# ---------------------------------------------------------------------- the job


def metrics_latest(study: Study) -> Job | None:
    """The newest finished metrics job of the study (its result is the report), if any."""
    return study.jobs.filter(kind=Job.Kind.METRICS, status=Job.Status.DONE).first()


def metrics_pending(study: Study) -> Job | None:
    """A metrics job of the study that is queued or running, if any."""
    return study.jobs.filter(
        kind=Job.Kind.METRICS, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
    ).first()


def metric_names_available() -> list[str]:
    """The metrics this machine can compute (the Java ones only with a Java runtime, CLIP's
    only with its encoders configured)."""
    java = metric_rules.java_available()
    text = [name for name, spec in metric_rules.METRICS.items() if java or not spec.needs_java]
    return text + (list(CLIP_NAMES) if clip_folder() else [])


def metrics_unavailable(names: Sequence[str]) -> str | None:
    """Why metrics of the lab among ``names`` cannot run on this server (CLIP-S without its
    encoders, a Java metric without Java), saying what they need; None when they can."""
    refusal = clip_refusal(names)
    if refusal:
        return refusal
    java = [n for n in names if n in metric_rules.METRICS and metric_rules.METRICS[n].needs_java]
    if java and not metric_rules.java_available():
        hint = metric_rules.JAVA_INSTALL_HINT
        return f"{', '.join(java)} need Java, which this server lacks. {hint}."
    return None


def metrics_request(
    *,
    study: Study,
    user: User | None,
    names: Sequence[str] | None = None,
    resamples: int = RESAMPLES,
    cider_documents: str = CIDER_DEFAULT,
    labels: str = DATASET,
) -> Job:
    """Queue a metrics job for the study; refuse at once what could not run.

    ``names``: metric names of ``rubrics.metrics.METRICS`` (None: all this machine can
    compute; empty: compute none and report the imported columns only, e.g. FLEUR's
    released scores). ``cider_documents``: one of ``CIDER_CONVENTIONS``. ``labels``: the
    imported pairs' human labels (``services/metrics_labels.py``). Refused: an unknown
    name, convention or labels, a Java metric without Java (the message says how to
    install Java), a study none of whose captions has references (or, with no name, no
    imported column).
    """
    running = metrics_pending(study)
    if running is not None:
        # A second job would compute the same scores again and race the first to store
        # them (issue 26, row 3: the button stayed active while a job ran).
        raise Conflict(
            f"Metrics job {running.pk} is already running for this study; start another "
            "once it has finished.",
            field="metrics",
            details={"job": running.pk},
        )
    if names is None:
        names = metric_names_available()
    names = list(dict.fromkeys(names))
    if cider_documents not in CIDER_CONVENTIONS:
        raise ServiceError(
            f"Unknown CIDEr convention {cider_documents!r}; choose one of "
            f"{', '.join(CIDER_CONVENTIONS)}.",
            field="cider_documents",
        )
    if not 0 <= int(resamples) <= RESAMPLES:
        raise ServiceError(f"resamples must be 0 to {RESAMPLES}.", field="resamples")
    labels_check(study, labels)
    params = {
        "metrics": names,
        "resamples": int(resamples),
        "cider_documents": cider_documents,
        "labels": labels,
    }
    if not names:
        if not imported_columns(study):  # the study's state refuses it: 409
            raise Conflict(
                "Choose at least one metric (only a study with imported metric columns can "
                "be reported without computing one).",
                field="metrics",
            )
        return job_create(kind=Job.Kind.METRICS, study=study, created_by=user, params=params)
    unknown = [n for n in names if n not in metric_rules.METRICS and n not in CLIP_NAMES]
    if unknown:
        raise ServiceError(
            f"Unknown metric(s): {', '.join(unknown)}. "
            f"Choose from: {', '.join([*metric_rules.METRICS, *CLIP_NAMES])}.",
            field="metrics",
        )
    refusal = metrics_unavailable(names)
    if refusal:
        raise ServiceError(refusal, field="metrics")
    _require_references(study)
    return job_create(kind=Job.Kind.METRICS, study=study, created_by=user, params=params)


def imported_columns(study: Study) -> list[str]:
    """The metric columns the study's captions carry that the lab does not compute."""
    scores, _ = caption_metrics(study)
    computed = {*metric_rules.METRICS, *CLIP_NAMES}
    return sorted({n for v in scores.values() for n in v if n not in computed})


def _require_references(study: Study) -> None:
    if not caption_references(study)[0]:  # import them, then ask again: 409
        raise Conflict(
            "No caption of this study has references, so no metric can be computed. Import "
            "references (the metrics page's upload, POST /api/studies/ID/references/ or "
            "manage.py import_references STUDY_ID FILE), or import human captions "
            "(system Human) of the same images: each serves as a reference for the others.",
            field="references",
        )


def metrics_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """The job runner's entry (``services/runner.py``)."""
    return metrics_compute(job=job, progress=progress)


def metrics_compute(*, job: Job, progress: Progress) -> dict[str, Any]:
    """Score the study's captions, store the scores, and compute the meta-evaluation report.

    The scores are written to ``Caption.metrics`` in one transaction (a failure stores
    none); the report goes on the job (``result``). ``ServiceError`` for a study without
    references or a metric that cannot run.
    """
    study = job.study
    names = list(job.params.get("metrics", metric_names_available()))
    resamples = int(job.params.get("resamples", RESAMPLES))
    cider_documents = job.params.get("cider_documents", CIDER_DEFAULT)
    labels = job.params.get("labels", DATASET)  # jobs from before issue 47 chose none
    if not names:  # the imported columns only: nothing to score
        return _report_imported_columns(study, resamples, labels, progress)
    progress(2, "Reading captions and references")
    captions, refs, source = caption_references(study)
    if not captions:
        _require_references(study)
    text_names = [n for n in names if n in metric_rules.METRICS]
    scores = _score_captions(captions, refs, names, text_names, cider_documents, progress)
    progress(56, "Storing the scores")
    _store_scores(captions, names, scores)
    progress(60, "Robustness to pathological transformations")
    robustness = (
        metrics_robustness(
            captions=captions,
            refs=refs,
            names=text_names,
            seed=study.seed,
            progress=lambda f, m="": progress(60 + int(20 * f), f"Robustness: {m}"),
        )
        if text_names
        else None  # CLIP-S alone: the transformations are of text metrics' references
    )
    progress(80, "Meta-evaluation")
    report = metaeval_report(study, computed=names, resamples=resamples, labels=labels)
    report.update(
        {
            "computed": names,
            "references": source,
            "captions_scored": len(captions),
            "captions_without_references": Caption.objects.filter(
                study=study, purpose=Caption.Purpose.STUDY
            ).count()
            - len(captions),
            "robustness": robustness,
            "cider_documents": cider_documents
            if any(metric_rules.METRICS[n].corpus_dependent for n in text_names)
            else None,
            "tie_rules": TIE_RULES,
            "metric_info": _metric_info(names),
        }
    )
    progress(100, "Done")
    return {"result": report, "message": f"Scored {len(captions)} captions"}


def _report_imported_columns(
    study: Study, resamples: int, labels: str, progress: Progress
) -> dict[str, Any]:
    """The job's result when no metric is asked for. Its own step: it scores nothing and
    reads no references, so it shares none of the scoring run's steps."""
    progress(80, "Meta-evaluation of the imported columns")
    report = metaeval_report(study, resamples=resamples, labels=labels)
    report.update({"computed": [], "references": None, "captions_scored": 0, "robustness": None})
    report.update(
        captions_without_references=0, metric_info={}, cider_documents=None, tie_rules=TIE_RULES
    )
    progress(100, "Done")
    return {"result": report, "message": "Reported the imported columns"}


def _score_captions(
    captions: list[dict[str, Any]],
    refs: list[list[str]],
    names: list[str],
    text_names: list[str],
    cider_documents: str,
    progress: Progress,
) -> dict[str, np.ndarray]:
    """Every asked metric's scores of the captions, by metric name. Its own step: the slow
    part of the job, which reports its own progress; a text metric that cannot run is a
    ``ServiceError``."""

    def scoring(fraction: float, message: str) -> None:
        progress(5 + int(50 * fraction), f"Scoring {len(captions)} captions: {message}")

    try:
        scores = (
            metric_rules.compute(
                [c["text"] for c in captions],
                refs,
                text_names,
                progress=scoring,
                cider_documents=cider_documents,
            )
            if text_names
            else {}
        )
    except ValueError as exc:
        raise ServiceError(f"The metrics could not be computed: {exc}") from None
    if any(n in CLIP_NAMES for n in names):
        scores.update(clip_scores(captions, refs, names, scoring))
    return scores


def _store_scores(captions: list[dict[str, Any]], names: list[str], scores: dict[str, Any]) -> None:
    """Write the scores to ``Caption.metrics``. Its own step: the job's one write, in one
    transaction so that a failure stores none."""
    with transaction.atomic():
        rows = list(
            Caption.objects.filter(pk__in=[c["id"] for c in captions]).only("id", "metrics")
        )
        index = {c["id"]: i for i, c in enumerate(captions)}
        for row in rows:
            stored = dict(row.metrics or {})
            for name in names:
                value = float(scores[name][index[row.pk]])
                if np.isfinite(value):  # CLIP-S of a caption without an image file: none
                    stored[name] = value
            row.metrics = stored
        Caption.objects.bulk_update(rows, ["metrics"], batch_size=1000)


def _metric_info(names: list[str]) -> dict[str, dict[str, Any]]:
    """How each computed metric was implemented, for the report. Its own step: it reads only
    the metric registry, not the study."""
    return {
        name: {
            "implementation": spec.implementation,
            "tokenizer": spec.tokenizer,
            "percent": spec.percent,
        }
        for name, spec in metric_rules.METRICS.items()
        if name in names
    } | {name: {"percent": False} for name in names if name in CLIP_NAMES}


# ---------------------------------------------------------------------- human scores


#: The coefficient for a dataset's released scores when the mode has none of its own: the
#: Polaris paper reports Kendall's tau-c on Polaris and Nebula, as the survey on Flickr8k.
DATASET_SCORE_COEFFICIENT = "kendall_tau_c"


def human_scores(
    study: Study, mode: Mode | None = None
) -> tuple[dict[str, list[tuple[int, float]]], str]:
    """The study's caption-level human scores and the coefficient the field uses for them:
    the mode's (``Report.human_scores``), then a dataset's released scores
    (``DatasetScore``, e.g. Nebula's) by name. ``mode``: the study's, if the caller has it."""
    scores, coefficient = (mode or get_mode(study.mode)).report.human_scores(study)
    released: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for name, caption_id, value in DatasetScore.objects.filter(study=study).values_list(
        "name", "caption_id", "value"
    ):
        released[name].append((caption_id, value))
    if released:
        scores = {**scores, **released}
        coefficient = coefficient or DATASET_SCORE_COEFFICIENT
    return scores, coefficient


def _pairs(study: Study, mode: Mode, labels: str) -> dict[str, list[tuple[int, int, int]]]:
    """Pairwise human judgments by group: ``[(caption a, caption b, choice 0|1)]``.

    Imported pairs (Pascal-50S) by their category, with the chosen ``labels``, then the
    mode's own (``Report.human_pairs``).
    """
    groups = defaultdict(list, labelled_pairs(study, labels))
    for group, pairs in mode.report.human_pairs(study).items():
        groups[group].extend(pairs)
    return dict(groups)


# ---------------------------------------------------------------------- the report


def caption_metrics(study: Study) -> tuple[dict[int, dict[str, float]], dict[int, str]]:
    """Every caption's metric scores (computed and imported) and its system."""
    scores: dict[int, dict[str, float]] = {}
    systems: dict[int, str] = {}
    for pk, system, values in Caption.objects.filter(
        study=study, purpose=Caption.Purpose.STUDY
    ).values_list("id", "system", "metrics"):
        systems[pk] = system
        scores[pk] = {
            name: float(value)
            for name, value in (values or {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
        }
    return scores, systems


def metaeval_report(
    study: Study,
    *,
    computed: Sequence[str] = (),
    resamples: int = RESAMPLES,
    mode: Mode | None = None,
    labels: str = DATASET,
) -> dict[str, Any]:
    """The meta-evaluation of every metric the study's captions carry against its humans.

    - ``systems``: per system, the number of captions and each metric's mean;
    - ``correlations``: per human score, per metric, ``{with Human, without Human}`` each
      ``{value, low, high, n}`` (bootstrap percentile interval, ``resamples`` resamples,
      the study's seed) with the coefficient ``coefficient``;
    - ``pairwise``: per group of pairwise judgments, per metric, accuracy mean and standard
      deviation over ``TIE_REPEATS`` random tie-breakings, against the imported pairs'
      ``labels`` (``labels``: which, None without imported pairs).
    """
    scores, systems = caption_metrics(study)
    names = sorted({name for values in scores.values() for name in values})
    ordered = list(computed) + [n for n in names if n not in computed]
    ordered = [n for n in ordered if n in names]
    table = []
    for system in sorted(set(systems.values()), key=lambda s: (s != Caption.HUMAN, s)):
        ids = [pk for pk, s in systems.items() if s == system]
        table.append(
            {
                "system": system,
                "captions": len(ids),
                "means": {
                    name: _mean([scores[pk][name] for pk in ids if name in scores[pk]])
                    for name in ordered
                },
            }
        )
    mode = mode or get_mode(study.mode)  # one lookup for the human scores and the pairs
    human, coefficient = human_scores(study, mode)
    correlations: dict[str, dict[str, dict[str, Any]]] = {}
    has_human = any(s == Caption.HUMAN for s in systems.values())
    has_machines = any(s != Caption.HUMAN for s in systems.values())
    for score, rows in human.items():
        correlations[score] = {}
        for name in ordered:
            cells = {}
            for label, keep_human in ((WITHOUT_HUMAN, False), (WITH_HUMAN, True)):
                if not keep_human and not (has_human and has_machines):
                    continue
                kept = [
                    (cid, value)
                    for cid, value in rows
                    if cid in scores
                    and name in scores[cid]
                    and (keep_human or systems[cid] != Caption.HUMAN)
                ]
                cells[label] = correlation_cell(
                    [(scores[cid][name], value) for cid, value in kept],
                    coefficient,
                    resamples,
                    study.seed,
                    clusters=[cid for cid, _ in kept],
                )
            correlations[score][name] = cells
    pairwise: dict[str, dict[str, Any]] = {}
    for group, pairs in _pairs(study, mode, labels).items():
        pairwise[group] = {"pairs": len(pairs), "metrics": {}}
        for name in ordered:
            usable = [
                p for p in pairs if name in scores.get(p[0], {}) and name in scores.get(p[1], {})
            ]
            if not usable:
                continue
            pairwise[group]["metrics"][name] = _pair_accuracy(
                np.array([scores[a][name] for a, _, _ in usable]),
                np.array([scores[b][name] for _, b, _ in usable]),
                np.array([c for _, _, c in usable], dtype=float),
                study.seed,
            )
    return {
        "metrics": ordered,
        "systems": table,
        "coefficient": coefficient,
        "correlations": correlations,
        "pairwise": pairwise,
        "labels": labels_used(study, labels),
    }


def _pair_accuracy(a: np.ndarray, b: np.ndarray, human: np.ndarray, seed: int) -> dict[str, Any]:
    """Pairwise accuracy under each of ``TIE_RULES``, and the metric's ties.

    ``mean``/``std``: random tie-breaking (the survey's Table 5). ``ties_as_misses`` and
    ``ties_as_half`` are None when a human choice is itself a tie (they need decided ones).
    """
    mean, std = metaeval.pairwise_accuracy(a, b, human, repeats=TIE_REPEATS, seed=seed)
    judge = alignment.choices_from_scores(a, b)
    cell: dict[str, Any] = {"mean": float(mean), "std": float(std), "n": int(a.shape[0])}
    cell["metric_ties"] = int((judge == 0.5).sum())
    for key, rule in (("ties_as_misses", "miss"), ("ties_as_half", "half")):
        decided = not np.any(human == 0.5)
        cell[key] = (
            float(alignment.pairwise_accuracy(judge, human, ties=rule, resamples=0)["value"])
            if decided
            else None
        )
    return cell


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def correlation_cell(
    pairs: Sequence[tuple[float, float]],
    kind: str,
    resamples: int,
    seed: int,
    clusters: Sequence[int] | None = None,
) -> dict[str, Any] | None:
    """``metaeval.correlation`` of (metric, human) rows; the bootstrap draws whole captions
    when ``clusters`` (the caption of each row) is given, i.e. all ratings of a caption."""
    if len(pairs) < 3:
        return None
    metric = np.array([m for m, _ in pairs])
    human = np.array([h for _, h in pairs])
    if clusters is not None and len(set(clusters)) == len(clusters):
        clusters = None  # one row per caption: the plain bootstrap is the same thing
    try:
        found = metaeval.correlation(
            metric, human, kind=kind, resamples=resamples, seed=seed, clusters=clusters
        )
    except ValueError as exc:  # a constant metric or score has no correlation
        return {"value": None, "low": None, "high": None, "n": len(pairs), "note": str(exc)}
    return {
        key: (float(v) if isinstance(v, float | np.floating) else v) for key, v in found.items()
    }
