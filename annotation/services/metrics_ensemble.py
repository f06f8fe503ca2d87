"""A metric ensemble fitted on one study's human scores and evaluated on another's (the
metric lab's "Fit here, evaluate there"), apart from ``services/metrics.py``, whose per-study
report it builds on.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.metrics import caption_metrics, correlation_cell, human_scores
from rubrics import metaeval

# ---------------------------------------------------------------------- ensemble


def _primary(study: Study) -> tuple[str, dict[int, float], list[tuple[int, float]], str]:
    """The human score an ensemble learns and is judged by: THumB Total, VICR ratings."""
    human, coefficient = human_scores(study)
    if not human:
        raise ServiceError(
            f"{study.name} has no caption-level human scores (THumB or VICR judgments).",
            field="evaluate_on",
        )
    score = "Total" if "Total" in human else next(iter(human))
    rows = human[score]
    sums: dict[int, list[float]] = defaultdict(list)
    for cid, value in rows:
        sums[cid].append(value)
    return score, {cid: float(np.mean(v)) for cid, v in sums.items()}, rows, coefficient


def metrics_ensemble(*, train: Study, test: Study, resamples: int = 200) -> dict[str, Any]:
    """Fit a linear ensemble of the metrics both studies carry on ``train``'s captions
    (target: its primary human score, a caption's mean when it has several) and report its
    correlation with ``test``'s human score, beside each single metric's on ``test``.

    ServiceError when a study has no human scores or the two share no metric.
    """
    train_scores, _ = caption_metrics(train)
    test_scores, _ = caption_metrics(test)
    train_score, train_target, _, _ = _primary(train)
    test_score, _, test_rows, coefficient = _primary(test)
    common = sorted(
        {n for v in train_scores.values() for n in v} & {n for v in test_scores.values() for n in v}
    )
    if not common:
        raise ServiceError(
            f"{train.name} and {test.name} share no metric; compute the same metrics on both.",
            field="evaluate_on",
        )
    train_ids = [cid for cid in train_target if all(n in train_scores.get(cid, {}) for n in common)]
    test_rows = [
        (cid, v) for cid, v in test_rows if all(n in test_scores.get(cid, {}) for n in common)
    ]
    if len(train_ids) < len(common) + 2 or len(test_rows) < 3:
        raise ServiceError(
            "Too few scored captions to fit or evaluate an ensemble.", field="evaluate_on"
        )
    x_train = np.array([[train_scores[cid][n] for n in common] for cid in train_ids])
    y_train = np.array([train_target[cid] for cid in train_ids])
    try:
        model = metaeval.fit_ensemble(x_train, y_train)
    except ValueError as exc:
        raise ServiceError(f"The ensemble cannot be fitted on {train.name}: {exc}.") from None
    x_test = np.array([[test_scores[cid][n] for n in common] for cid, _ in test_rows])
    predicted = metaeval.apply_ensemble(model, x_test)
    human = [v for _, v in test_rows]
    clusters = [cid for cid, _ in test_rows]
    single = {
        name: correlation_cell(
            list(zip(x_test[:, j], human, strict=True)), coefficient, resamples, test.seed, clusters
        )
        for j, name in enumerate(common)
    }
    return {
        "train": {
            "id": train.pk,
            "name": train.name,
            "score": train_score,
            "captions": len(train_ids),
        },
        "test": {"id": test.pk, "name": test.name, "score": test_score, "rows": len(test_rows)},
        "metrics": common,
        "coefficients": _coefficients(model, common),
        "coefficient": coefficient,
        "ensemble": correlation_cell(
            list(zip(predicted, human, strict=True)), coefficient, resamples, test.seed, clusters
        ),
        "single": single,
    }


def _coefficients(model: metaeval.Ensemble, names: list[str]) -> dict[str, float]:
    """The fitted weights by metric name (each metric rescaled to [0, 1] on the training
    study, so the weights compare), and the intercept."""
    out = {name: float(w) for name, w in zip(names, model.weights, strict=True)}
    out["intercept"] = float(model.intercept)
    return out
