"""The metric lab's robustness of each metric (Cui et al.), split from ``services/metrics.py``
(a read-only computation over the captions ``metrics_compute`` scored)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from annotation.models import Caption
from rubrics import metaeval, transformations

Progress = Callable[..., None]

#: Robustness: the strengths of each transformation, and at most this many human captions.
GAMMAS = (0.0, 0.25, 0.5, 0.75, 1.0)
ROBUSTNESS_CAPTIONS = 500


def metrics_robustness(
    *,
    captions: list[dict[str, Any]],
    refs: list[list[str]],
    names: Sequence[str],
    seed: int,
    progress: Progress,
) -> dict[str, Any] | None:
    """Cui et al.'s robustness of each metric on the study's human captions (None without any).

    For each transformation (T_RC, T_WP, T_RW) and gamma in ``GAMMAS``, the human captions
    (at most ``ROBUSTNESS_CAPTIONS``, drawn with the study's seed) are transformed and
    scored against their own references by ``rubrics.metaeval.robustness``: the mean score,
    normalised to the unmodified captions' mean, is the curve, and its area (trapezoids over
    gamma) the robustness (lower is more robust). T_RC has no strength of its own here: at
    gamma a share gamma of the captions is replaced by a human caption of another image
    (docs/protocol-choices.md).
    """
    humans = [i for i, c in enumerate(captions) if c["system"] == Caption.HUMAN]
    images = {captions[i]["image_id"] for i in humans}
    if len(humans) < 2 or len(images) < 2:
        return None
    rng = np.random.default_rng(seed)
    if len(humans) > ROBUSTNESS_CAPTIONS:
        humans = sorted(rng.choice(humans, size=ROBUSTNESS_CAPTIONS, replace=False).tolist())
    texts = [captions[i]["text"] for i in humans]
    curves: dict[str, dict[str, Any]] = {}
    kinds = len(transformations.TRANSFORMATIONS)
    for done, kind in enumerate(transformations.TRANSFORMATIONS):
        progress(done / kinds, f"{kind}")
        by_metric = metaeval.robustness(
            texts,
            [refs[i] for i in humans],
            transformation=kind,
            gammas=GAMMAS[1:],
            names=names,
            images=[captions[i]["image_id"] for i in humans],
            seed=rng,
            # Within a transformation, the scoring's own progress (METEOR's by caption).
            progress=lambda f, m, done=done, kind=kind: progress(
                (done + f) / kinds, f"{kind}: {m}"
            ),
        )
        curves[kind] = {
            name: None
            if found is None
            else {"normalised": [found["curve"][g] for g in GAMMAS], "area": found["area"]}
            for name, found in by_metric.items()
        }
    progress(1.0, "Robustness done")
    return {"gammas": list(GAMMAS), "captions": len(texts), "curves": curves}
