"""How far an automatic judge can stand in for people: judge-vs-human statistics (pure numpy).

A judge (a VLM asked the same question as the humans, or a learned metric) gives one
answer per item; the humans give several. These functions say how well the two agree, in
the terms judge-alignment reports use (Potato's judge reports, CapArena, the G-Eval and
MT-Bench bias analyses). Everything is a thin layer over the statistics ``rubrics`` already
has, so a number here is the same number the metric lab or a protocol report gives:

- :func:`caption_level` -- Pearson and Kendall tau-c/tau-b of the judge's scores with the
  humans', with percentile-bootstrap intervals (:func:`rubrics.metaeval.correlation`,
  clusters = items when each human rating is its own row, as Flickr8k-Expert is scored).
- :func:`human_reference` -- the humans' mean or majority per item (items x raters, NaN =
  not rated).
- :func:`kappa_vs_humans` / :func:`alpha_vs_humans` -- weighted Cohen's kappa and
  Krippendorff's alpha of the judge against that reference, with bootstrap intervals
  (:func:`rubrics.agreement.cohen_kappa`, :func:`rubrics.agreement.krippendorff_alpha`).
- :func:`confusion` -- judge x human-reference counts (:func:`rubrics.agreement.contingency_table`).
- :func:`pairwise_accuracy` -- share of pairs where the judge prefers the caption humans
  preferred, with the tie rule named (see below).
- :func:`system_level` -- Spearman and Kendall tau-b between the judge's and the humans'
  system means (:func:`rubrics.metaeval.system_table`).
- :func:`human_ceiling` -- leave-one-human-out: each human position against the others'
  reference, and the judge against the same references, so the two numbers compare.
- :func:`position_bias` -- a judge asked each pair in both orders: flip rate and the share
  of picks that went to the caption shown first.
- :func:`length_bias` -- preference against the length difference: slope, correlation and
  the share of decided pairs won by the longer caption.
- :func:`self_consistency` -- repeated runs of one judge (temperature > 0): all-agree rate,
  mean pairwise agreement and Krippendorff's alpha across runs.
- :func:`prompt_drift` -- the same items under successive prompt versions: alignment per
  version and agreement of each version with the previous one.

Pairwise ties. Pascal-50S accuracy is reported three ways in the literature, and they
differ by up to half a point (FLEUR: HC 61.3 with ties as misses, 61.75 with ties as half):
``ties="miss"`` (a judge tie is wrong; FLEUR's and CLIPScore's scripts, ``>`` not ``>=``),
``ties="half"`` (a judge tie counts 1/2) and ``ties="coin"`` (judge and human ties broken
by a fair coin, repeated: the survey's Table 5 and the metric lab,
:func:`rubrics.metaeval.pairwise_accuracy`). The report names the rule it used.

Pair choices are coded like Pascal-50S's ``label``: 0 = the first caption (a) preferred,
1 = the second (b), 0.5 = a tie. Undefined statistics raise ValueError, never NaN.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import agreement, checks, metaeval
from rubrics.resampling import Seed, percentile_levels, resample_indices

__all__ = [
    "TieRule",
    "Reference",
    "caption_level",
    "human_reference",
    "kappa_vs_humans",
    "alpha_vs_humans",
    "confusion",
    "pairwise_accuracy",
    "choices_from_scores",
    "system_level",
    "human_ceiling",
    "position_bias",
    "length_bias",
    "self_consistency",
    "prompt_drift",
]

TieRule = Literal["miss", "half", "coin"]
Reference = Literal["mean", "majority"]
_TIE_RULES = ("miss", "half", "coin")
_REFERENCES = ("mean", "majority")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _vector(values: ArrayLike, name: str, n: int | None = None) -> NDArray[np.float64]:
    arr = checks.finite_array(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} must have {n} values, got {arr.shape[0]}")
    return arr


def _choices(values: ArrayLike, name: str, n: int | None = None) -> NDArray[np.float64]:
    arr = _vector(values, name, n)
    if not np.all(np.isin(arr, (0.0, 0.5, 1.0))):
        raise ValueError(f"{name} must hold 0 (a preferred), 1 (b preferred) or 0.5 (tie)")
    return arr


def _ratings_matrix(ratings: ArrayLike, name: str = "human") -> NDArray[np.float64]:
    try:
        arr = np.asarray(ratings, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric (NaN = not rated): {exc}") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"{name} must be items x raters, got shape {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains infinity")
    return arr


def _bootstrap(
    statistic: Callable[[NDArray[np.int64]], float],
    n: int,
    value: float,
    resamples: int,
    seed: Seed,
    confidence: float,
) -> dict[str, Any]:
    """``statistic(rows)`` on bootstrap draws of row indices; undefined draws are counted."""
    resamples = checks.integer(resamples, "resamples", low=0)
    confidence = checks.confidence(confidence)
    out: dict[str, Any] = {
        "value": value,
        "low": None,
        "high": None,
        "n": n,
        "confidence": confidence,
        "resamples": resamples,
        "undefined_resamples": 0,
    }
    if resamples == 0:
        return out
    reps = []
    for idx in resample_indices(n, resamples, seed):
        try:
            reps.append(statistic(idx))
        except ValueError:
            out["undefined_resamples"] += 1
    if not reps:
        raise ValueError("the statistic is undefined on every bootstrap resample")
    low, high = np.percentile(np.asarray(reps), percentile_levels(confidence))
    out["low"], out["high"] = float(low), float(high)
    return out


# ---------------------------------------------------------------------------
# Caption level
# ---------------------------------------------------------------------------


def caption_level(
    judge: ArrayLike,
    human: ArrayLike,
    *,
    kinds: Sequence[metaeval.CorrelationKind] = ("pearson", "kendall_tau_c"),
    clusters: ArrayLike | None = None,
    resamples: int = 1000,
    seed: Seed = 0,
    confidence: float = 0.95,
) -> dict[str, dict[str, Any]]:
    """Each correlation in ``kinds`` of ``judge`` with ``human``, with its bootstrap interval.

    Rows are (caption, human score) pairs; with several ratings per caption, repeat the
    judge's score per rating and pass the caption ids as ``clusters`` (the bootstrap then
    draws captions). Same seed for every kind, so the intervals are paired.
    """
    return {
        kind: metaeval.correlation(
            judge,
            human,
            kind=kind,
            resamples=resamples,
            seed=seed,
            confidence=confidence,
            clusters=clusters,
        )
        for kind in kinds
    }


def human_reference(human: ArrayLike, how: Reference = "mean") -> NDArray[np.float64]:
    """One human value per item from ``human`` (items x raters, NaN = not rated).

    ``"mean"``: the mean of the item's ratings. ``"majority"``: the most frequent rating;
    a tie between modes goes to the one nearest the item's median, then to the lower
    (a fixed rule, so the reference does not depend on rater order).
    """
    if how not in _REFERENCES:
        raise ValueError(f"how must be one of {_REFERENCES}, got {how!r}")
    arr = _ratings_matrix(human)
    rated = ~np.isnan(arr)
    empty = ~rated.any(axis=1)
    if empty.any():
        raise ValueError(f"item {int(np.flatnonzero(empty)[0])} has no human rating")
    if how == "mean":
        return np.nanmean(arr, axis=1)
    out = np.empty(arr.shape[0])
    for i, row in enumerate(arr):
        values, counts = np.unique(row[~np.isnan(row)], return_counts=True)
        modes = values[counts == counts.max()]
        median = float(np.median(row[~np.isnan(row)]))
        out[i] = modes[np.lexsort((modes, np.abs(modes - median)))[0]]
    return out


def _on_scale(reference: NDArray[np.float64], categories: NDArray[np.float64]) -> NDArray:
    """The category nearest each reference value (a tie goes up: a mean of 2.5 is 3)."""
    distance = np.abs(reference[:, None] - categories[None, :])
    nearest = distance == distance.min(axis=1, keepdims=True)
    return categories[categories.shape[0] - 1 - np.argmax(nearest[:, ::-1], axis=1)]


def kappa_vs_humans(
    judge: ArrayLike,
    human: ArrayLike,
    *,
    categories: ArrayLike,
    against: Reference = "majority",
    weights: agreement.Weights = "quadratic",
    resamples: int = 1000,
    seed: Seed = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Cohen's kappa (weighted by default) of the judge's ratings with the humans' reference.

    ``categories`` is the full scale (``range(1, 6)``), so unused levels still weigh.
    With ``against="mean"`` the mean is put on the scale first (nearest category, ties up).
    The interval resamples items.
    """
    scale = np.asarray(categories, dtype=np.float64)
    if scale.ndim != 1 or scale.size < 2 or np.any(np.diff(scale) <= 0):
        raise ValueError("categories must be the scale in increasing order (e.g. range(1, 6))")
    ref = human_reference(human, against)
    j = _vector(judge, "judge", ref.shape[0])
    if not np.all(np.isin(j, scale)):
        raise ValueError("judge ratings must lie on the given categories")
    if against == "mean":
        ref = _on_scale(ref, scale)

    def stat(idx: NDArray[np.int64]) -> float:
        return agreement.cohen_kappa(j[idx], ref[idx], weights, categories=scale)

    result = _bootstrap(stat, j.shape[0], stat(np.arange(j.shape[0])), resamples, seed, confidence)
    return {**result, "against": against, "weights": weights}


def alpha_vs_humans(
    judge: ArrayLike,
    human: ArrayLike,
    *,
    against: Reference = "mean",
    level: agreement.AlphaLevel = "interval",
    resamples: int = 1000,
    seed: Seed = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Krippendorff's alpha of two coders, the judge and the humans' reference, per item."""
    ref = human_reference(human, against)
    j = _vector(judge, "judge", ref.shape[0])
    both = np.vstack([j, ref])

    def stat(idx: NDArray[np.int64]) -> float:
        return agreement.krippendorff_alpha(both[:, idx], level)

    result = _bootstrap(stat, j.shape[0], stat(np.arange(j.shape[0])), resamples, seed, confidence)
    return {**result, "against": against, "level": level}


def confusion(judge: ArrayLike, reference: ArrayLike, categories: ArrayLike) -> NDArray[np.int64]:
    """Counts: row = the judge's category, column = the human reference's (``categories`` order)."""
    return agreement.contingency_table(judge, reference, categories)


# ---------------------------------------------------------------------------
# Pairs
# ---------------------------------------------------------------------------


def choices_from_scores(score_a: ArrayLike, score_b: ArrayLike) -> NDArray[np.float64]:
    """Pair choices from two scores: 0 when a scores higher, 1 when b does, 0.5 when equal."""
    a = _vector(score_a, "score_a")
    b = _vector(score_b, "score_b", a.shape[0])
    return np.where(a > b, 0.0, np.where(b > a, 1.0, 0.5))


def pairwise_accuracy(
    judge_choice: ArrayLike,
    human_choice: ArrayLike,
    *,
    ties: TieRule,
    repeats: int = 5,
    resamples: int = 1000,
    seed: Seed = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Share of pairs where the judge chose what the humans chose, under the tie rule ``ties``.

    ``"miss"``: a judge tie is wrong; ``"half"``: it counts 1/2 (both need every human
    choice decided, 0 or 1). ``"coin"``: :func:`rubrics.metaeval.pairwise_accuracy`, every
    tie (judge's or humans') broken by a coin in each of ``repeats`` repetitions; the value
    is their mean and ``std`` their standard deviation. The interval (rules "miss" and
    "half") resamples pairs. ``judge_ties`` counts the judge's ties.
    """
    if ties not in _TIE_RULES:
        raise ValueError(f"ties must be one of {_TIE_RULES}, got {ties!r}")
    j = _choices(judge_choice, "judge_choice")
    h = _choices(human_choice, "human_choice", j.shape[0])
    judge_ties = int((j == 0.5).sum())
    if ties == "coin":
        # The metric-lab function takes two scores; choices 0/1/0.5 map onto (b, a) scores.
        mean, std = metaeval.pairwise_accuracy(1 - j, j, h, repeats=repeats, seed=seed)
        return {
            "value": mean,
            "std": std,
            "n": int(j.shape[0]),
            "ties": ties,
            "judge_ties": judge_ties,
            "repeats": repeats,
        }
    if np.any(h == 0.5):
        raise ValueError(f'ties="{ties}" needs decided human choices; use ties="coin"')
    credit = np.where(j == h, 1.0, np.where(j == 0.5, 0.5 if ties == "half" else 0.0, 0.0))
    result = _bootstrap(
        lambda idx: float(credit[idx].mean()),
        int(j.shape[0]),
        float(credit.mean()),
        resamples,
        seed,
        confidence,
    )
    return {**result, "ties": ties, "judge_ties": judge_ties}


def position_bias(first_order: ArrayLike, swapped_order: ArrayLike) -> dict[str, Any]:
    """Position bias of a judge asked each pair twice, as (a, b) and as (b, a).

    Both arrays are in display terms: 0 = the caption shown first won, 1 = the second,
    0.5 = a tie. The judge is consistent on a pair when it picks the same caption both
    times (``swapped == 1 - first``; a tie both times is consistent). ``flip_rate`` is the
    share of inconsistent pairs; ``first_position_rate`` the share of decided answers (of
    2n) that went to whichever caption was shown first (0.5 = no position preference).
    A judge that always picks the first caption flips on every pair and scores 1 on both.
    """
    ab = _choices(first_order, "first_order")
    ba = _choices(swapped_order, "swapped_order", ab.shape[0])
    flips = ab != 1 - ba
    answers = np.concatenate([ab, ba])
    decided = answers[answers != 0.5]
    return {
        "flip_rate": float(flips.mean()),
        "flips": int(flips.sum()),
        "first_position_rate": float((decided == 0).mean()) if decided.size else None,
        "n": int(ab.shape[0]),
    }


def length_bias(choice: ArrayLike, length_a: ArrayLike, length_b: ArrayLike) -> dict[str, Any]:
    """How far the judge's preference follows length: a picked (1/0/0.5) against len a - len b.

    ``slope``: least-squares slope of "a preferred" (1 a, 0 b, 0.5 tie) on the length
    difference (a linear probability model: unlike a logistic fit it stays finite for a
    judge that always prefers the longer caption); ``correlation``: Pearson's r of the
    same (point-biserial without ties); ``longer_wins``: share of pairs of unequal length,
    decided by the judge, won by the longer caption (0.5 = no length preference).
    """
    c = _choices(choice, "choice")
    la = _vector(length_a, "length_a", c.shape[0])
    lb = _vector(length_b, "length_b", c.shape[0])
    picked_a = 1.0 - c
    diff = la - lb
    if diff.min() == diff.max():
        raise ValueError("length bias is undefined: every pair has the same length difference")
    centred = diff - diff.mean()
    slope = float(centred @ (picked_a - picked_a.mean()) / (centred @ centred))
    try:
        corr: float | None = agreement.pearson(diff, picked_a)
    except ValueError:
        corr = None  # the judge chose the same side every time: no variance to correlate
    usable = (diff != 0) & (c != 0.5)
    longer_won = (diff[usable] > 0) == (c[usable] == 0)
    return {
        "slope": slope,
        "correlation": corr,
        "longer_wins": float(longer_won.mean()) if usable.any() else None,
        "n": int(c.shape[0]),
        "n_decided_unequal": int(usable.sum()),
    }


# ---------------------------------------------------------------------------
# Systems, ceiling, consistency, drift
# ---------------------------------------------------------------------------


def system_level(judge: ArrayLike, human: ArrayLike, systems: ArrayLike) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau-b between the judge's and the humans' system means."""
    table = metaeval.system_table(systems, {"judge": judge, "human": human})
    names = list(table)
    if len(names) < 3:
        raise ValueError("a system-level correlation needs at least 3 systems")
    jm = np.array([table[s]["judge"] for s in names])
    hm = np.array([table[s]["human"] for s in names])
    return {
        "spearman": agreement.spearman(jm, hm),
        "kendall_tau_b": agreement.kendall_tau(jm, hm, "b"),
        "systems": names,
        "judge_means": jm.tolist(),
        "human_means": hm.tolist(),
    }


def _coefficient(kind: str, x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """The metric lab's coefficient ``kind`` of x and y, without an interval."""
    return metaeval.correlation(x, y, kind=kind, resamples=0)["value"]  # type: ignore[arg-type]


def human_ceiling(
    judge: ArrayLike, human: ArrayLike, *, kind: str = "kendall_tau_c"
) -> dict[str, Any]:
    """Leave-one-human-out agreement beside the judge's, on the same items and references.

    ``human`` is items x raters (NaN = not rated; a column is a rater, or a rating
    position when raters vary by item). For each column k, the reference is the mean of
    the other columns; ``human`` is the statistic of column k against it, ``judge`` the
    judge's against the same reference, each over the items column k rated and some other
    column rated too. Returns the per-column values and their means: a judge near the
    ceiling agrees with people about as well as one more person would.
    """
    arr = _ratings_matrix(human)
    if arr.shape[1] < 2:
        raise ValueError("the human ceiling needs at least 2 human ratings per item")
    j = _vector(judge, "judge", arr.shape[0])
    per_human, per_judge = [], []
    for k in range(arr.shape[1]):
        others = np.delete(arr, k, axis=1)
        has_other = (~np.isnan(others)).any(axis=1)
        rows = ~np.isnan(arr[:, k]) & has_other
        if rows.sum() < 2:
            raise ValueError(f"human column {k} shares fewer than 2 items with the others")
        reference = np.nanmean(others[rows], axis=1)
        per_human.append(_coefficient(kind, arr[rows, k], reference))
        per_judge.append(_coefficient(kind, j[rows], reference))
    return {
        "kind": kind,
        "human": float(np.mean(per_human)),
        "judge": float(np.mean(per_judge)),
        "per_human": per_human,
        "per_judge": per_judge,
    }


def self_consistency(runs: ArrayLike, *, level: agreement.AlphaLevel = "ordinal") -> dict[str, Any]:
    """Agreement of a judge with itself over repeated runs: ``runs`` is runs x items.

    ``all_agree``: share of items answered identically in every run; ``pairwise``: mean
    exact agreement over pairs of runs; ``alpha``: Krippendorff's alpha with runs as coders
    (NaN = the run failed on that item).
    """
    arr = _ratings_matrix(runs, "runs")
    if arr.ndim != 2 or arr.shape[0] < 2:
        raise ValueError("runs must be runs x items with at least 2 runs")
    complete = ~np.isnan(arr).any(axis=0)
    full = arr[:, complete]
    pairs = [
        float((full[a] == full[b]).mean())
        for a in range(arr.shape[0])
        for b in range(a + 1, arr.shape[0])
    ]
    return {
        "all_agree": float((full == full[0]).all(axis=0).mean()) if full.size else None,
        "pairwise": float(np.mean(pairs)) if full.size else None,
        "alpha": agreement.krippendorff_alpha(arr, level),
        "runs": int(arr.shape[0]),
        "items": int(arr.shape[1]),
        "complete_items": int(complete.sum()),
    }


def prompt_drift(
    versions: Mapping[str, ArrayLike],
    human: ArrayLike,
    *,
    kind: metaeval.CorrelationKind = "kendall_tau_c",
) -> list[dict[str, Any]]:
    """The same items judged under successive prompt versions (in the mapping's order).

    Per version: ``alignment`` (``kind`` with the humans) and, from the second version on,
    ``change`` (its alignment minus the previous version's), ``agreement_with_previous``
    (share of items answered identically) and ``correlation_with_previous`` (``kind``).
    """
    h = _vector(human, "human")
    rows: list[dict[str, Any]] = []
    previous: NDArray[np.float64] | None = None
    for name, values in versions.items():
        v = _vector(values, f"versions[{name!r}]", h.shape[0])
        row: dict[str, Any] = {"version": name, "alignment": _coefficient(kind, v, h)}
        if previous is not None:
            row["change"] = row["alignment"] - rows[-1]["alignment"]
            row["agreement_with_previous"] = float((v == previous).mean())
            row["correlation_with_previous"] = _coefficient(kind, v, previous)
        rows.append(row)
        previous = v
    if not rows:
        raise ValueError("versions is empty")
    return rows
