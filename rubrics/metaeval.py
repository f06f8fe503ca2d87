"""Meta-evaluation of automatic caption metrics against human judgments (pure numpy; no Django).

Public functions:

- :func:`correlation` -- caption-level correlation of one metric with one human score,
  with a percentile bootstrap interval; :func:`caption_correlations` for every pair of
  metric and human score.
- :func:`system_table` -- system-level means of each metric (THumB Table 2, right).
- :func:`pairwise_accuracy` -- how often a metric prefers the caption humans preferred,
  ties broken at random, repeated (survey Table 5, Pascal-50S).
- :func:`fit_ensemble` / :func:`apply_ensemble` -- an ENSEMBEVAL-style linear ensemble.
- :func:`robustness_curve` / :func:`curve_area` -- Cui et al. (2018) robustness to
  pathological transformations; :func:`robustness` transforms human captions with
  :mod:`rubrics.transformations`, scores them with :mod:`rubrics.metrics` and returns
  the curves and areas.

Which coefficient for which kind of human score (the survey's section 6.4, following
Anderson et al. 2016, Hessel et al. 2021, Kasai et al. 2022):

- ``"pearson"`` for continuous scores such as THumB's Total, P and R;
- ``"kendall_tau_c"`` (Stuart's tau-c, as ``scipy.stats.kendalltau(variant="c")``) for
  graded ratings on a short scale (Flickr8k-Expert 1-4, Composite, Polaris, VICR);
- ``"kendall_tau_b"`` for binary judgments (Flickr8k-CF).

Several ratings of one caption are used the way those papers do: one row per rating,
with the caption's metric score repeated. Pass ``clusters`` (the caption id of each
row) so that the bootstrap resamples captions, not single ratings.

Undefined statistics raise ValueError (a constant metric, fewer than 2 rows), never NaN.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rubrics import checks, metrics, transformations
from rubrics.agreement import kendall_tau, pearson
from rubrics.resampling import Seed, as_generator, percentile_levels, resample_indices

__all__ = [
    "CorrelationKind",
    "KIND_FOR_SCORE",
    "Ensemble",
    "correlation",
    "caption_correlations",
    "system_table",
    "pairwise_accuracy",
    "fit_ensemble",
    "apply_ensemble",
    "robustness_curve",
    "curve_area",
    "robustness",
]

CorrelationKind = Literal["pearson", "kendall_tau_c", "kendall_tau_b"]

#: The coefficient the field uses for each kind of human score (see the module docstring).
KIND_FOR_SCORE: dict[str, CorrelationKind] = {
    "continuous": "pearson",
    "graded": "kendall_tau_c",
    "binary": "kendall_tau_b",
}

_KINDS = ("pearson", "kendall_tau_c", "kendall_tau_b")


def _coefficient(kind: str, x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    if kind == "pearson":
        return pearson(x, y)
    if kind == "kendall_tau_c":
        return kendall_tau(x, y, "c")
    if kind == "kendall_tau_b":
        return kendall_tau(x, y, "b")
    raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")


def _pair(metric: ArrayLike, human: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x = checks.finite_array(metric, "metric")
    y = checks.finite_array(human, "human")
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"metric and human must be 1-D of the same length, got {x.shape} and {y.shape}"
        )
    if x.shape[0] < 2:
        raise ValueError("a correlation needs at least 2 rows")
    return x, y


def correlation(
    metric: ArrayLike,
    human: ArrayLike,
    *,
    kind: CorrelationKind,
    resamples: int = 1000,
    seed: Seed = 0,
    confidence: float = 0.95,
    clusters: ArrayLike | None = None,
) -> dict[str, Any]:
    """Caption-level correlation of ``metric`` with ``human`` and its bootstrap interval.

    ``kind`` is ``"pearson"``, ``"kendall_tau_c"`` or ``"kendall_tau_b"`` (see the
    module docstring for which to use). The interval is the percentile bootstrap over
    rows (or over ``clusters`` when given: all rows of a drawn cluster come together),
    ``resamples`` times; ``resamples=0`` skips it (``low``/``high`` are None). A resample
    on which the coefficient is undefined (for instance every drawn metric value equal)
    is left out and counted in ``undefined_resamples``.

    Returns ``{"kind", "value", "low", "high", "n", "confidence", "resamples",
    "undefined_resamples"}``; ``n`` is the number of rows.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    x, y = _pair(metric, human)
    value = _coefficient(kind, x, y)
    resamples = checks.integer(resamples, "resamples", low=0)
    confidence = checks.confidence(confidence)
    result: dict[str, Any] = {
        "kind": kind,
        "value": value,
        "low": None,
        "high": None,
        "n": int(x.shape[0]),
        "confidence": confidence,
        "resamples": resamples,
        "undefined_resamples": 0,
    }
    if resamples == 0:
        return result
    if clusters is None:
        draws = [idx for idx in resample_indices(x.shape[0], resamples, seed)]
    else:
        ids = checks.id_array(clusters, "clusters", x.shape[0])
        _, codes = np.unique(ids, return_inverse=True)
        order = np.argsort(codes, kind="stable")
        starts = np.searchsorted(codes[order], np.arange(codes.max() + 2))
        members = [order[starts[c] : starts[c + 1]] for c in range(codes.max() + 1)]
        draws = [
            np.concatenate([members[c] for c in idx])
            for idx in resample_indices(len(members), resamples, seed)
        ]
    reps = []
    for idx in draws:
        try:
            reps.append(_coefficient(kind, x[idx], y[idx]))
        except ValueError:
            result["undefined_resamples"] += 1
    if not reps:
        raise ValueError("the correlation is undefined on every bootstrap resample")
    low, high = np.percentile(np.asarray(reps), percentile_levels(confidence))
    result["low"], result["high"] = float(low), float(high)
    return result


def caption_correlations(
    metrics: Mapping[str, ArrayLike],
    humans: Mapping[str, ArrayLike],
    *,
    kind: CorrelationKind | Mapping[str, CorrelationKind],
    resamples: int = 1000,
    seed: Seed = 0,
    confidence: float = 0.95,
    clusters: ArrayLike | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """:func:`correlation` for every (metric name, human score name) pair.

    ``kind`` is one coefficient for all, or a mapping from human score name to its
    coefficient (for example ``{"Total": "pearson", "rating": "kendall_tau_c"}``). Every
    pair uses the same ``seed``, hence the same resamples (paired intervals).
    """
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for h, human in humans.items():
        k = kind if isinstance(kind, str) else kind[h]
        for m, metric in metrics.items():
            out[(m, h)] = correlation(
                metric,
                human,
                kind=k,
                resamples=resamples,
                seed=seed,
                confidence=confidence,
                clusters=clusters,
            )
    return out


def system_table(
    systems: ArrayLike, scores: Mapping[str, ArrayLike]
) -> dict[Any, dict[str, float]]:
    """Mean of each score per system: ``{system: {score name: mean}}``, systems in sorted order.

    ``systems[i]`` names the system of caption i; every ``scores`` array has one value
    per caption. THumB Table 2 (right) is this table of sentence-level scores x100.
    """
    sys_ids = checks.id_array(systems, "systems")
    names, codes = np.unique(sys_ids, return_inverse=True)
    sizes = np.bincount(codes, minlength=len(names)).astype(np.float64)
    table: dict[Any, dict[str, float]] = {n.item() if hasattr(n, "item") else n: {} for n in names}
    for name, values in scores.items():
        arr = checks.finite_array(values, name)
        if arr.shape != sys_ids.shape:
            raise ValueError(f"{name} must have one value per caption ({sys_ids.shape[0]})")
        means = np.bincount(codes, weights=arr, minlength=len(names)) / sizes
        for key, mean in zip(table, means.tolist(), strict=True):
            table[key][name] = mean
    return table


def pairwise_accuracy(
    metric_a: ArrayLike,
    metric_b: ArrayLike,
    human_choice: ArrayLike,
    *,
    repeats: int = 5,
    seed: Seed = 0,
) -> tuple[float, float]:
    """Share of pairs where the metric prefers the caption humans preferred: (mean, std).

    ``metric_a[i]``/``metric_b[i]`` score the two captions of pair i; ``human_choice[i]``
    is 0 when humans preferred a, 1 when they preferred b (Pascal-50S's ``label``), or
    0.5 for a human tie. Ties -- the metric's and the humans' -- are broken by a fair
    coin, drawn afresh in each of ``repeats`` repetitions; the result is the mean and
    the population standard deviation (ddof = 0) of the repetitions' accuracies. The
    survey (Table 5) reports mean +- std over five such repetitions (which also redrew
    the 5 of 48 references; here the references are fixed by the data).
    """
    a = checks.finite_array(metric_a, "metric_a")
    b = checks.finite_array(metric_b, "metric_b")
    h = checks.finite_array(human_choice, "human_choice")
    if not (a.ndim == b.ndim == h.ndim == 1 and a.shape == b.shape == h.shape):
        raise ValueError("metric_a, metric_b and human_choice must be 1-D of one length")
    if not np.all(np.isin(h, (0.0, 0.5, 1.0))):
        raise ValueError("human_choice must hold 0 (a preferred), 1 (b preferred) or 0.5 (tie)")
    repeats = checks.integer(repeats, "repeats")
    rng = as_generator(seed)
    metric_pick = np.where(a > b, 0.0, np.where(b > a, 1.0, 0.5))
    coins = rng.integers(0, 2, size=(repeats, 2, a.shape[0])).astype(np.float64)
    metric_final = np.where(metric_pick == 0.5, coins[:, 0], metric_pick)
    human_final = np.where(h == 0.5, coins[:, 1], h)
    accuracy = (metric_final == human_final).mean(axis=1)
    return float(accuracy.mean()), float(accuracy.std())


class Ensemble(NamedTuple):
    """A fitted linear ensemble: ``intercept + weights @ ((x - low) / (high - low))``.

    ``low``/``high`` are the training minimum and maximum of each metric (the survey
    rescales every metric to [0, 1] so that the weights are comparable).
    """

    intercept: float
    weights: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


def _design(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = checks.finite_array(x, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be (captions, metrics), got shape {arr.shape}")
    return arr


def fit_ensemble(X_train: ArrayLike, y_train: ArrayLike) -> Ensemble:  # noqa: N803
    """Ordinary least squares of human scores on min-max rescaled metric scores.

    ``X_train`` is (captions, metrics), ``y_train`` the human score per caption. What the
    survey did (ENSEMBEVAL, section 6.3): sequential forward feature selection by
    cross-validated linear regression on the Polaris train set, then each selected
    metric rescaled to [0, 1] and a linear regression fit. What we do: the rescaling
    and the least-squares fit on the metrics the caller chose (no feature selection;
    with the five lexical metrics this is the survey's "dominant ensemble").
    Raises ValueError for a constant metric column or fewer captions than unknowns.
    """
    x = _design(X_train, "X_train")
    y = checks.finite_array(y_train, "y_train")
    if y.shape != (x.shape[0],):
        raise ValueError(f"y_train must have one value per row of X_train ({x.shape[0]})")
    if x.shape[0] <= x.shape[1]:
        raise ValueError(f"need more captions ({x.shape[0]}) than metrics ({x.shape[1]}) to fit")
    low, high = x.min(axis=0), x.max(axis=0)
    constant = np.flatnonzero(high == low)
    if constant.size:
        raise ValueError(f"metric column {int(constant[0])} is constant in X_train")
    design = np.column_stack([np.ones(x.shape[0]), (x - low) / (high - low)])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return Ensemble(float(coef[0]), coef[1:], low, high)


def apply_ensemble(ensemble: Ensemble, X: ArrayLike) -> NDArray[np.float64]:  # noqa: N803
    """Ensemble score per row of ``X`` (same metric columns as in training, not clipped)."""
    x = _design(X, "X")
    if x.shape[1] != ensemble.weights.shape[0]:
        raise ValueError(
            f"X has {x.shape[1]} metric columns, the ensemble {ensemble.weights.shape[0]}"
        )
    return (
        ensemble.intercept
        + ((x - ensemble.low) / (ensemble.high - ensemble.low)) @ ensemble.weights
    )


def robustness_curve(
    original_scores: ArrayLike, transformed_scores_by_gamma: Mapping[float, ArrayLike]
) -> dict[float, float]:
    """Cui et al. (2018, section 3.4): mean metric score after a transformation, normalised.

    ``original_scores`` are the metric's scores of the unmodified human captions;
    ``transformed_scores_by_gamma[g]`` its scores of the same captions transformed with
    strength ``g`` (a fraction in [0, 1]). Returns ``{g: mean(transformed) /
    mean(original)}`` sorted by g, with ``{0.0: 1.0}`` added when absent (so the human
    caption scores 1, as in their Figure 6). Raises ValueError when the original mean is 0.
    """
    base = checks.finite_array(original_scores, "original_scores")
    base_mean = float(base.mean())
    if base_mean == 0:
        raise ValueError("the mean score of the original captions is 0; cannot normalise")
    curve: dict[float, float] = {}
    for gamma, values in transformed_scores_by_gamma.items():
        g = float(gamma)
        if not 0.0 <= g <= 1.0:
            raise ValueError(f"gamma must be a fraction in [0, 1], got {gamma!r}")
        curve[g] = float(checks.finite_array(values, f"scores at gamma {g}").mean()) / base_mean
    curve.setdefault(0.0, 1.0)
    return dict(sorted(curve.items()))


def curve_area(curve: Mapping[float, float] | Sequence[tuple[float, float]]) -> float:
    """Area under a robustness curve by the trapezoid rule (Cui et al.'s R(metric, T)).

    The integral runs over the gammas given (Cui et al. use 0 to 1); lower is more
    robust. Needs at least two distinct gammas.
    """
    items = sorted(curve.items() if isinstance(curve, Mapping) else curve)
    g = np.asarray([float(k) for k, _ in items])
    v = np.asarray([float(val) for _, val in items])
    if g.size < 2 or np.unique(g).size != g.size:
        raise ValueError("a curve needs at least two distinct gammas")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(v))):
        raise ValueError("the curve contains non-finite values")
    return float(np.trapezoid(v, g))


def robustness(
    captions: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    transformation: Literal["T_RC", "T_WP", "T_RW"],
    gammas: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
    names: Sequence[str] | None = None,
    images: Sequence[Any] | None = None,
    seed: Seed = 0,
    progress: metrics.Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """Cui et al.'s robustness of each metric to one transformation of human captions.

    ``captions`` are unmodified human captions, ``references[i]`` the references of
    caption i (not including it). For each gamma every caption is transformed with
    :mod:`rubrics.transformations` (``T_WP``: :func:`permute_words`; ``T_RW``:
    :func:`replace_words` with the vocabulary of all captions and references). ``T_RC``
    needs ``images`` (the image of each caption): Cui et al.'s gamma picks the donor
    among the image's nearest neighbours, which needs image features we do not have, so
    here a share gamma of the captions (rounded half up) is replaced by a caption of
    another image drawn with :func:`random_caption`. Everything is scored in one
    :func:`rubrics.metrics.compute` call, so every caption keeps its references and
    CIDEr's document frequencies are the same for all gammas.

    A caption with fewer than two different words stays as it is under T_WP.
    ``progress`` is passed to :func:`rubrics.metrics.compute`.

    Returns ``{metric name: {"curve": {gamma: normalised mean}, "area": float}}``, with
    None for a metric whose unmodified captions score 0 on average (nothing to normalise).
    """
    if transformation not in transformations.TRANSFORMATIONS:
        raise ValueError(
            f"transformation must be one of {transformations.TRANSFORMATIONS}, "
            f"got {transformation!r}"
        )
    caps = list(captions)
    refs = [list(r) for r in references]
    if not caps or len(refs) != len(caps):
        raise ValueError("captions must be non-empty, with one reference list per caption")
    levels = sorted({float(g) for g in gammas} - {0.0})
    if not levels or any(not 0.0 < g <= 1.0 for g in levels):
        raise ValueError(f"gammas must be fractions in (0, 1], got {list(gammas)!r}")
    rng = as_generator(seed)
    transformed: list[list[str]] = []
    if transformation == "T_RC":
        if images is None or len(images) != len(caps):
            raise ValueError("T_RC needs images: the image of every caption")
        ids = list(images)
        others: dict[Any, list[str]] = {}  # image -> captions of the other images
        for g in levels:
            k = min(len(caps), max(1, int(np.floor(g * len(caps) + 0.5))))
            chosen = set(rng.choice(len(caps), size=k, replace=False).tolist())
            batch = list(caps)
            for i in sorted(chosen):
                if ids[i] not in others:
                    others[ids[i]] = [c for c, im in zip(caps, ids, strict=True) if im != ids[i]]
                batch[i] = transformations.random_caption(others[ids[i]], rng)
            transformed.append(batch)
    elif transformation == "T_WP":
        for g in levels:
            transformed.append([_permuted_or_same(c, g, rng) for c in caps])
    else:
        vocab = transformations.vocabulary([*caps, *(r for rs in refs for r in rs)])
        for g in levels:
            transformed.append([transformations.replace_words(c, g, vocab, rng) for c in caps])
    everything = [*caps, *(c for batch in transformed for c in batch)]
    scores = metrics.compute(everything, refs * (1 + len(levels)), names, progress=progress)
    n = len(caps)
    out: dict[str, dict[str, Any] | None] = {}
    for name, values in scores.items():
        by_gamma = {g: values[n * (k + 1) : n * (k + 2)] for k, g in enumerate(levels)}
        if float(np.mean(values[:n])) == 0:
            out[name] = None  # nothing to normalise by (robustness_curve's ValueError)
            continue
        curve = robustness_curve(values[:n], by_gamma)
        out[name] = {"curve": curve, "area": curve_area(curve)}
    return out


def _permuted_or_same(caption: str, gamma: float, rng: np.random.Generator) -> str:
    """T_WP of ``caption``, or the caption itself when it has fewer than two different
    words (nothing to permute: it counts as unmodified rather than stopping the curve)."""
    try:
        return transformations.permute_words(caption, gamma, rng)
    except ValueError:
        return caption
