"""The paper's checks of the scores themselves (Kasai et al., NAACL 2022, section 2.1).

Stage 2 reviews every stage-1 score (``stage_agreement``), a third annotator checks a
random sample of the final scores (``check_sample``, ``check_agreement``), and the first
images form a developmental phase left out of the stage agreement
(``developmental_images``). The agreements are frozen results whose ``as_dict()`` is
their part of the study's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubrics import checks
from rubrics.agreement import cohen_kappa
from rubrics.thumb.estimators import or_none
from rubrics.thumb.rules import _TOL
from rubrics.thumb.scores import SCORE_FIELDS, CaptionJudgments, ScoreArrays

__all__ = [
    "CheckAgreement",
    "Kappas",
    "StageAgreement",
    "check_agreement",
    "check_sample",
    "developmental_images",
    "stage_agreement",
]


@dataclass(frozen=True)
class Kappas:
    """Unweighted Cohen's kappa of P and of R between two sets of scores; None if undefined."""

    precision: float | None
    recall: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"precision": self.precision, "recall": self.recall}


def _kappas(before: ScoreArrays, after: ScoreArrays) -> Kappas:
    return Kappas(
        precision=or_none(cohen_kappa, before.precision, after.precision),
        recall=or_none(cohen_kappa, before.recall, after.recall),
    )


def _review_changes(
    before: ScoreArrays, after: ScoreArrays, names: tuple[str, str]
) -> dict[str, np.ndarray]:
    """Per field (and ``any``), which rows ``after`` changed from ``before``; checks alignment."""
    for name, s in zip(names, (before, after), strict=True):
        if not isinstance(s, ScoreArrays):
            raise ValueError(f"{name}: must be ScoreArrays or CaptionJudgments")
    n = len(before)
    if n == 0:
        raise ValueError(f"{names[0]}: no rows")
    if len(after) != n:
        raise ValueError(f"{names[1]}: has {len(after)} rows, {names[0]} has {n}")
    if isinstance(before, CaptionJudgments) and isinstance(after, CaptionJudgments):
        same = np.array_equal(before.image_ids, after.image_ids) and np.array_equal(
            before.systems, after.systems
        )
        if not same:
            raise ValueError(
                f"{names[1]}: rows are not aligned with {names[0]} (image ids or systems)"
            )
    changed = {f: np.abs(getattr(before, f) - getattr(after, f)) > _TOL for f in SCORE_FIELDS}
    changed["any"] = np.logical_or.reduce([changed[f] for f in SCORE_FIELDS])
    return changed


@dataclass(frozen=True)
class StageAgreement:
    """Stage 1 vs stage 2 over ``n_captions`` captions: kappas and the share modified.

    ``modified_share`` maps each score field, and ``any``, to the fraction of captions
    whose stage-2 value differs from stage 1 (any field, for ``any``).
    """

    n_captions: int
    kappa: Kappas
    modified_share: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_captions": self.n_captions,
            "kappa": self.kappa.as_dict(),
            "modified_share": dict(self.modified_share),
        }


def stage_agreement(stage1: ScoreArrays, stage2: ScoreArrays) -> StageAgreement:
    """Stage-1 vs stage-2 agreement (paper section 2.1): Cohen's kappa of P and R, share modified.

    ``stage1`` and ``stage2`` hold the scores of the same captions, row by row
    (pass one row per scored caption text, so that identical texts of several
    systems count once). Kappa is unweighted, as the paper reports it; it is None
    when undefined (chance agreement 1).
    """
    changed = _review_changes(stage1, stage2, ("stage1", "stage2"))
    return StageAgreement(
        n_captions=len(stage1),
        kappa=_kappas(stage1, stage2),
        modified_share={name: float(rows.mean()) for name, rows in changed.items()},
    )


@dataclass(frozen=True)
class CheckAgreement:
    """A third annotator's check of ``n_captions`` final scores.

    ``unchanged`` counts the captions whose every field the check confirmed; ``changed``
    maps each field, and ``any``, to how many captions the check changed it on.
    """

    n_captions: int
    unchanged: int
    changed: dict[str, int]
    kappa: Kappas

    @property
    def changed_share(self) -> dict[str, float]:
        """``changed`` as fractions of ``n_captions``."""
        return {name: count / self.n_captions for name, count in self.changed.items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_captions": self.n_captions,
            "unchanged": self.unchanged,
            "changed": dict(self.changed),
            "changed_share": self.changed_share,
            "kappa": self.kappa.as_dict(),
        }


def check_agreement(final: ScoreArrays, check: ScoreArrays) -> CheckAgreement:
    """A third annotator's check of the final (stage-2) scores (paper section 2.1, footnote 3).

    The paper: "we found that a third annotator did not change the scores for all 100
    captions randomly sampled for meta-evaluations". Its statistic is how many of the
    checked captions the third annotator changed, so this counts, over the rows (one per
    checked caption text, aligned like ``stage_agreement``'s), the captions the check left
    unchanged and those it changed per field; and, for comparison with the paper's stages,
    the unweighted Cohen's kappa of P and of R between the final scores and the check
    (None when undefined, e.g. when every checked caption has the same P).
    """
    changed = _review_changes(final, check, ("final", "check"))
    counts = {name: int(rows.sum()) for name, rows in changed.items()}
    return CheckAgreement(
        n_captions=len(final),
        unchanged=len(final) - counts["any"],
        changed=counts,
        kappa=_kappas(final, check),
    )


#: Separates the check's random stream from every other use of the study seed.
_CHECK_STREAM = 0x7C4EC3


def check_sample(n_captions: int, n_checked: int, *, seed: int) -> list[int]:
    """Which captions the third annotator checks: ``min(n_checked, n_captions)`` distinct
    indices of ``range(n_captions)``, drawn uniformly without replacement, ascending.

    The draw depends only on ``seed`` and the two counts (the paper's "100 captions
    randomly sampled", section 2.1 footnote 3), so a study draws the same sample every time
    from the same caption list. ``n_checked = 0`` checks nothing.
    """
    size = checks.integer(n_captions, "n_captions", low=0)
    wanted = checks.integer(n_checked, "n_checked", low=0)
    seed = checks.integer(seed, "seed", low=-(2**63), high=2**63 - 1)
    rng = np.random.default_rng(np.random.SeedSequence([_CHECK_STREAM, seed % 2**64]))
    return sorted(rng.choice(size, size=min(wanted, size), replace=False).tolist())


def developmental_images(image_order: Sequence[Any], n_developmental: int) -> set[Any]:
    """The images of the developmental phase: the first ``n_developmental`` of ``image_order``.

    Paper section 2.1: "We first performed developmental evaluations of 250 captions for 50
    images and created rubrics. [...] After the developmental phase, the kappa coefficient
    [...] was 0.86 in precision and 0.82 in recall for the rest of the evaluated captions."
    ``image_order`` is the study's order (each image once); their judgments still count for
    the scores, only the stage agreement leaves them out.
    """
    n = checks.integer(n_developmental, "n_developmental", low=0)
    order = list(image_order)
    if len(set(order)) != len(order):
        raise ValueError("image_order: each image must occur once")
    return set(order[:n])
