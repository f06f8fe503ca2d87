"""Rasch measurement of raters: a two-facet Partial Credit Model by joint maximum likelihood.

VICR section 4 analyses "rater competency by using the Partial Credit Model (PCM)" (Masters
1988) and a Wright map, to "compare the rater competence and the difficulty in rating
image-caption pairs on the same scale", in logits. This module fits that model to any
players x pairs table of ordered scores ``0..m`` (VICR scores a rating 2 for exact agreement
with the reference, 1 for adjacent, 0 otherwise; ``annotation.modes.vicr.report`` builds
those scores).

Model (Andrich's rating-scale form of Masters' PCM; Linacre's many-facet model with players
as raters and pairs as items)::

    log P(X_ni = k) / P(X_ni = k - 1) = theta_n - delta_i - tau_k,   k = 1..m

``theta_n`` is player n's measure (competency: higher = agrees more), ``delta_i`` pair i's
measure (difficulty: higher = harder to agree on), ``tau_k`` the Rasch-Andrich thresholds
(where categories k-1 and k are equally likely), shared by every pair. Identification: the
pairs' measures average 0 and the thresholds sum to 0.

Why one threshold set for all pairs, where the paper's PCM gives each of its 25 pairs its
own two thresholds: the paper had 132 raters on each pair; a VICR game collects 3 to 7
ratings per pair, too few to estimate two thresholds per pair (most pairs leave a category
empty, and an empty category sends its threshold to infinity). With shared thresholds each
pair still has the paper's two difficulty thresholds on the Wright map, at ``delta_i``
plus the offsets of :func:`thurstonian_thresholds`.

Why a home-made estimator (checked in ``tests/rubrics/test_rasch.py`` by parameter
recovery, hand-worked cases and the textbook two-item JMLE result): the maintained PyPI
packages did not fit. ``girth`` (last release 2021) fits the *generalised* PCM (a
discrimination per item, so not a Rasch model) by marginal ML, with no rater facet and no
fit statistics. ``raschpy`` 1.4 (PCM, RSM, many-facet; pairwise estimation) takes a dense
wide table, pulls pandas, scikit-learn, seaborn and openpyxl, needs about 2 s to import and
3 s for its fit statistics on a VICR-size study (68,000 ratings on 15,646 pairs), where the
whole report has 2 s. ``py-irt`` needs torch.

Estimation: joint maximum likelihood (JMLE, Wright and Masters 1982 ch. 5; Linacre's
Winsteps and Facets use it), alternating one Newton step per facet (players, pairs,
thresholds) with steps capped at 1 logit, until no parameter moves by more than
``tolerance`` or ``max_iterations`` is reached (``converged`` says which). Known
limitation: JMLE measures of elements with few responses are spread out by about L/(L-1)
(L responses); VICR pairs have 3 to 7, so compare pairs' measures with care, not players'.

Extreme elements (every response in the top category, or every one in the bottom) have an
infinite ML measure. As in Winsteps, they are set aside, repeatedly (removing one may make
another extreme), the rest is fitted, and then each extreme element is measured alone
against the fitted elements, with its score moved 0.3 score points inside the range
(Winsteps' EXTRSCORE default). Extreme elements have no fit statistics.

Fit (Wright and Masters 1982; Linacre 2002): per response, the residual ``y = x - E`` and
the model variance ``W``; outfit mean-square = mean of ``y^2 / W`` (sensitive to a few
surprising responses), infit mean-square = ``sum y^2 / sum W`` (information-weighted).
Both have expectation 1 under the model. Standard errors are the model ones,
``1 / sqrt(sum W)``.

Undefined values are masked (``numpy.ma``), never NaN: a masked measure belongs to an
element with no response linking it to the fitted elements, a masked fit to an extreme one.
Bad input raises ``ValueError`` naming the argument, as everywhere in ``rubrics``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from rubrics import checks

__all__ = [
    "EXTREME_ADJUSTMENT",
    "MISFIT_HIGH",
    "MISFIT_LOW",
    "Facet",
    "RaschFit",
    "category_probabilities",
    "fit",
    "thurstonian_thresholds",
]

#: Score points an extreme element's score is moved inside its range (Winsteps EXTRSCORE).
EXTREME_ADJUSTMENT = 0.3
#: Linacre's conventional mean-square ranges ("What do Infit and Outfit, Mean-square and
#: Standardized mean?", Rasch Measurement Transactions 16:2, 2002): 0.5-1.5 is productive
#: for measurement; above 1.5 unproductive (noise: guessing, careless or random answers);
#: below 0.5 less productive (too predictable: e.g. always the same answer), not degrading.
MISFIT_HIGH = 1.5
MISFIT_LOW = 0.5
#: Newton steps are capped so that a far-off start cannot overshoot (logits).
_MAX_STEP = 1.0


@dataclass(frozen=True)
class Facet:
    """Estimates for one facet (players or pairs), one entry per element of ``ids``.

    ``extreme`` is +1 (every response in the top category), -1 (every one in the bottom)
    or 0. ``measure`` and ``se`` are masked where no response links the element to the
    fitted elements; ``infit`` and ``outfit`` also where the element is extreme.
    """

    ids: NDArray
    measure: np.ma.MaskedArray
    se: np.ma.MaskedArray
    infit: np.ma.MaskedArray
    outfit: np.ma.MaskedArray
    responses: NDArray[np.int64]
    extreme: NDArray[np.int64]


@dataclass(frozen=True)
class RaschFit:
    """The fitted model: both facets, the thresholds and how the estimation went."""

    persons: Facet
    items: Facet
    thresholds: NDArray[np.float64]  # Rasch-Andrich tau_1..tau_m, summing to 0
    threshold_se: NDArray[np.float64]
    max_score: int
    iterations: int
    converged: bool
    #: Connected parts of the fitted (non-extreme) data. More than 1: measures in different
    #: parts are not on one scale (no shared element links them).
    subsets: int


def category_probabilities(difference: ArrayLike, thresholds: ArrayLike) -> NDArray[np.float64]:
    """P(X = 0..m) for measure differences ``theta - delta`` (any shape): shape (..., m+1).

    ``P(X = k)`` is proportional to ``exp(k (theta - delta) - tau_1 - ... - tau_k)``.
    """
    b = np.asarray(difference, dtype=np.float64)
    tau = np.asarray(thresholds, dtype=np.float64)
    if tau.ndim != 1 or tau.size < 1 or not np.all(np.isfinite(tau)):
        raise ValueError("thresholds must be a non-empty 1-D array of finite numbers")
    if not np.all(np.isfinite(b)):
        raise ValueError("difference must be finite")
    return _probabilities(b, np.concatenate(([0.0], np.cumsum(tau))))


def _probabilities(b: NDArray[np.float64], cumulative: NDArray[np.float64]) -> NDArray:
    """Category probabilities, shape (..., m+1); see ``_category_rows`` for the work."""
    return np.moveaxis(_category_rows(b, cumulative), 0, -1)


def _category_rows(b: NDArray[np.float64], cumulative: NDArray[np.float64]) -> NDArray:
    """Category probabilities with the category first, shape (m+1, ...).

    One row per category, combined with elementwise maximum and sum over the few rows:
    numpy reduces a long array along a short last axis an order of magnitude slower.
    """
    logits = np.stack([k * b - c for k, c in enumerate(cumulative)])
    top = logits[0].copy()
    for row in logits[1:]:
        np.maximum(top, row, out=top)
    np.exp(logits - top, out=logits)
    total = logits[0].copy()
    for row in logits[1:]:
        total += row
    logits /= total
    return logits


def thurstonian_thresholds(thresholds: ArrayLike) -> NDArray[np.float64]:
    """Offsets g_k from a pair's measure where P(X >= k) = 1/2, k = 1..m.

    The paper's Wright map draws these: a pair's "EA threshold" (top category) and "AA
    threshold" are where a player "has a 50% chance" of at least that agreement, at
    ``delta_i + g_k``. They increase with k even when the Andrich thresholds do not.
    """
    tau = np.asarray(thresholds, dtype=np.float64)
    if tau.ndim != 1 or tau.size < 1 or not np.all(np.isfinite(tau)):
        raise ValueError("thresholds must be a non-empty 1-D array of finite numbers")
    cumulative = np.concatenate(([0.0], np.cumsum(tau)))
    span = 10.0 + float(np.abs(tau).sum())  # P(X >= k) runs from ~0 to ~1 across it

    def at_least(b: float, k: int) -> float:
        return float(_probabilities(np.array([b]), cumulative)[0, k:].sum()) - 0.5

    import scipy.optimize

    return np.array(
        [scipy.optimize.brentq(at_least, -span, span, args=(k,)) for k in range(1, tau.size + 1)]
    )


@dataclass(frozen=True)
class _Responses:
    """The responses as codes: each facet's sorted distinct ids, and per response the
    codes (positions in those ids) of its person and its item, and its score."""

    person_ids: NDArray
    person: NDArray[np.int64]
    item_ids: NDArray
    item: NDArray[np.int64]
    x: NDArray[np.int64]


def _codes(values: ArrayLike, name: str) -> tuple[NDArray, NDArray[np.int64]]:
    ids = checks.id_array(values, name)
    unique, codes = np.unique(ids, return_inverse=True)
    return unique, codes.astype(np.int64)


def _scores(values: ArrayLike, max_score: int) -> NDArray[np.int64]:
    array = np.asarray(values)
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise ValueError(f"scores must be integers from 0 to {max_score}, got {array.dtype}")
    if array.ndim != 1:
        raise ValueError("scores must be 1-D")
    if array.size and (array.min() < 0 or array.max() > max_score):
        bad = array[(array < 0) | (array > max_score)][0]
        raise ValueError(f"scores must be integers from 0 to {max_score}, got {bad}")
    return array.astype(np.int64)


def _responses(persons: ArrayLike, items: ArrayLike, scores: ArrayLike, m: int) -> _Responses:
    """Validate the three aligned columns and code the ids."""
    person_ids, person = _codes(persons, "persons")
    item_ids, item = _codes(items, "items")
    x = _scores(scores, m)
    if not person.size == item.size == x.size:
        raise ValueError(
            f"persons ({person.size}), items ({item.size}) and scores ({x.size}) differ in length"
        )
    return _Responses(person_ids=person_ids, person=person, item_ids=item_ids, item=item, x=x)


def _extremes(
    person: NDArray, item: NDArray, x: NDArray, n_persons: int, n_items: int, m: int
) -> tuple[NDArray, NDArray, NDArray]:
    """Set aside extreme persons and items until none is left; +1/-1/0 per element, kept."""
    person_extreme = np.zeros(n_persons, dtype=np.int64)
    item_extreme = np.zeros(n_items, dtype=np.int64)
    kept = np.ones(x.size, dtype=bool)
    while True:
        changed = False
        for codes, size, extreme in (
            (person, n_persons, person_extreme),
            (item, n_items, item_extreme),
        ):
            count = np.bincount(codes[kept], minlength=size)
            total = np.bincount(codes[kept], weights=x[kept], minlength=size)
            top = (count > 0) & (total == m * count)
            bottom = (count > 0) & (total == 0)
            if top.any() or bottom.any():
                extreme[top] = 1
                extreme[bottom] = -1
                kept &= extreme[codes] == 0
                changed = True
        if not changed:
            return person_extreme, item_extreme, kept


@dataclass(frozen=True)
class _Core:
    """The responses fitted jointly: those between elements that are not extreme.

    ``person_extreme`` and ``item_extreme`` are +1, -1 or 0 per element of each facet;
    ``used`` counts the core responses in each category 0..m.
    """

    person: NDArray[np.int64]
    item: NDArray[np.int64]
    x: NDArray[np.int64]
    person_extreme: NDArray[np.int64]
    item_extreme: NDArray[np.int64]
    used: NDArray[np.int64]


def _core(responses: _Responses, m: int) -> _Core:
    """Set extreme elements aside; ValueError when nothing is left or a category is empty."""
    r = responses
    person_extreme, item_extreme, kept = _extremes(
        r.person, r.item, r.x, r.person_ids.size, r.item_ids.size, m
    )
    if not kept.any():
        raise ValueError(
            "every player or pair is extreme (all its responses in the top or the bottom "
            "category): there is nothing to fit"
        )
    x = r.x[kept]
    used = np.bincount(x, minlength=m + 1)
    if (used == 0).any():
        empty = ", ".join(str(k) for k in np.flatnonzero(used == 0))
        raise ValueError(
            f"score category {empty} is never used by the non-extreme responses, so its "
            f"threshold cannot be estimated"
        )
    return _Core(
        person=r.person[kept],
        item=r.item[kept],
        x=x,
        person_extreme=person_extreme,
        item_extreme=item_extreme,
        used=used,
    )


def _moments(
    b: NDArray[np.float64], cumulative: NDArray[np.float64]
) -> tuple[NDArray, NDArray, NDArray]:
    """Probabilities (category first), expected score and variance of each response."""
    p = _category_rows(b, cumulative)
    expected = np.zeros_like(b)
    second = np.zeros_like(b)
    for k in range(1, p.shape[0]):
        expected += k * p[k]
        second += k * k * p[k]
    return p, expected, second - expected * expected


def _tails(p: NDArray) -> NDArray:
    """P(X >= k) for k = 1..m, category first: shape (m, ...)."""
    return np.cumsum(p[::-1], axis=0)[::-1][1:]


def _cumulative(tau: NDArray[np.float64]) -> NDArray[np.float64]:
    """0, tau_1, tau_1 + tau_2, ...: the threshold sums of ``_category_rows``."""
    return np.concatenate(([0.0], np.cumsum(tau)))


@dataclass(frozen=True)
class _Estimates:
    """The joint ML estimates of the core: measures of every element (extreme ones are
    placeholders), the thresholds, and how the iteration ended."""

    theta: NDArray[np.float64]
    delta: NDArray[np.float64]
    tau: NDArray[np.float64]
    iterations: int
    converged: bool


def _start(core: _Core, m: int) -> tuple[NDArray, NDArray, NDArray]:
    """Start values: the log-odds of each element's share of the score, and the thresholds
    from the log-ratios of adjacent category counts."""

    def log_odds(codes: NDArray, size: int) -> NDArray[np.float64]:
        count = np.bincount(codes, minlength=size).astype(np.float64)
        total = np.bincount(codes, weights=core.x, minlength=size)
        return np.log((total + 0.5) / (m * count - total + 0.5))

    theta = log_odds(core.person, core.person_extreme.size)
    delta = -log_odds(core.item, core.item_extreme.size)
    delta -= delta[core.item_extreme == 0].mean()
    tau = np.log(core.used[:-1] / core.used[1:]).astype(np.float64)
    tau -= tau.mean()
    return theta, delta, tau


def _facet_step(
    core: _Core, codes: NDArray, size: int, b: NDArray, cumulative: NDArray, sign: float
) -> NDArray[np.float64]:
    """One capped Newton step for every element of a facet (sign +1 persons, -1 items)."""
    _, expected, variance = _moments(b, cumulative)
    residual = np.bincount(codes, weights=core.x - expected, minlength=size)
    information = np.bincount(codes, weights=variance, minlength=size)
    return np.clip(sign * residual / np.maximum(information, 1e-12), -_MAX_STEP, _MAX_STEP)


def _sweep(core: _Core, theta: NDArray, delta: NDArray, tau: NDArray, at_least: NDArray) -> float:
    """One JMLE sweep, in place: players, then pairs, then thresholds; the largest move."""
    cumulative = _cumulative(tau)
    step_theta = _facet_step(
        core, core.person, theta.size, theta[core.person] - delta[core.item], cumulative, 1.0
    )
    theta += step_theta
    step_delta = _facet_step(
        core, core.item, delta.size, theta[core.person] - delta[core.item], cumulative, -1.0
    )
    delta += step_delta
    delta -= delta[core.item_extreme == 0].mean()
    tail = _tails(_category_rows(theta[core.person] - delta[core.item], cumulative))
    step_tau = np.clip(
        (tail.sum(axis=1) - at_least) / (tail * (1 - tail)).sum(axis=1), -_MAX_STEP, _MAX_STEP
    )
    tau += step_tau
    tau -= tau.mean()
    return max(np.abs(step_theta).max(), np.abs(step_delta).max(), np.abs(step_tau).max())


def _jmle(core: _Core, m: int, max_iterations: int, tolerance: float) -> _Estimates:
    """Sweep until no parameter moves by ``tolerance`` or ``max_iterations`` is reached."""
    theta, delta, tau = _start(core, m)
    at_least = np.array([np.count_nonzero(core.x >= k) for k in range(1, m + 1)], float)
    iterations, converged = 0, False
    for iterations in range(1, max_iterations + 1):  # noqa: B007 - reported after the loop
        if _sweep(core, theta, delta, tau, at_least) < tolerance:
            converged = True
            break
    return _Estimates(theta=theta, delta=delta, tau=tau, iterations=iterations, converged=converged)


@dataclass(frozen=True)
class _CoreFit:
    """Per fitted response: model variance, squared residual, squared standardised
    residual; and the thresholds' standard errors."""

    variance: NDArray[np.float64]
    squared: NDArray[np.float64]
    z_squared: NDArray[np.float64]
    threshold_se: NDArray[np.float64]


def _core_fit(core: _Core, estimates: _Estimates) -> _CoreFit:
    """Residuals and model variances of the core responses at the estimates."""
    b = estimates.theta[core.person] - estimates.delta[core.item]
    p, expected, variance = _moments(b, _cumulative(estimates.tau))
    squared = (core.x - expected) ** 2
    tail = _tails(p)
    return _CoreFit(
        variance=variance,
        squared=squared,
        z_squared=squared / np.maximum(variance, 1e-12),
        threshold_se=1.0 / np.sqrt((tail * (1 - tail)).sum(axis=1)),
    )


@dataclass(frozen=True)
class _ExtremeMeasures:
    """Measures of a facet's extreme elements; ``measured`` where one was found."""

    measure: NDArray[np.float64]
    se: NDArray[np.float64]
    measured: NDArray[np.bool_]


def _extreme_measures(
    own_codes: NDArray,
    own_extreme: NDArray,
    other_codes: NDArray,
    other_extreme: NDArray,
    other_measure: NDArray[np.float64],
    sign: float,
    cumulative: NDArray[np.float64],
    m: int,
) -> _ExtremeMeasures:
    """Measure each extreme element against its fitted counterparts at its adjusted score.

    The responses used are those of extreme elements to fitted counterparts (all in the top
    category, or all in the bottom, by definition of extreme); ``sign`` is +1 for persons
    (b = measure - other), -1 for items.
    """
    links = (own_extreme[own_codes] != 0) & (other_extreme[other_codes] == 0)
    own = own_codes[links]
    other = other_measure[other_codes[links]]
    size = own_extreme.size
    count = np.bincount(own, minlength=size).astype(np.float64)
    target = np.where(own_extreme > 0, m * count - EXTREME_ADJUSTMENT, EXTREME_ADJUSTMENT)
    measured = (own_extreme != 0) & (count > 0)
    # start from the log-odds of the adjusted score around the counterparts' mean
    mean_other = np.bincount(own, weights=other, minlength=size) / np.maximum(count, 1)
    odds = np.log(target / np.maximum(m * count - target, 1e-12))
    measure = np.where(measured, mean_other + sign * odds, 0.0)
    for _ in range(100):
        b = sign * (measure[own] - other)
        _, expected, variance = _moments(b, cumulative)
        score = np.bincount(own, weights=expected, minlength=size)
        information = np.bincount(own, weights=variance, minlength=size)
        step = sign * (target - score) / np.maximum(information, 1e-12)
        step = np.where(measured, np.clip(step, -_MAX_STEP, _MAX_STEP), 0.0)
        measure += step
        if np.abs(step).max(initial=0.0) < 1e-8:
            break
    b = sign * (measure[own] - other)
    information = np.bincount(own, weights=_moments(b, cumulative)[2], minlength=size)
    se = 1.0 / np.sqrt(np.maximum(information, 1e-300))
    return _ExtremeMeasures(measure=measure, se=se, measured=measured)


def _facet(
    ids: NDArray,
    codes_all: NDArray,
    codes_core: NDArray,
    measure: NDArray[np.float64],
    extreme: NDArray,
    core_fit: _CoreFit,
    extremes: _ExtremeMeasures,
) -> Facet:
    """One facet's estimates: fitted elements from the core, extreme ones from their pass."""
    size = ids.size
    count = np.bincount(codes_core, minlength=size).astype(np.float64)
    information = np.bincount(codes_core, weights=core_fit.variance, minlength=size)
    core = (extreme == 0) & (count > 0)
    safe_information = np.where(core, information, 1.0)
    safe_count = np.where(core, count, 1.0)
    se = np.where(core, 1.0 / np.sqrt(safe_information), extremes.se)
    infit = np.bincount(codes_core, weights=core_fit.squared, minlength=size) / safe_information
    outfit = np.bincount(codes_core, weights=core_fit.z_squared, minlength=size) / safe_count
    has_measure = core | extremes.measured
    values = np.where(core, measure, extremes.measure)
    return Facet(
        ids=ids,
        measure=np.ma.masked_array(np.where(has_measure, values, 0.0), mask=~has_measure),
        se=np.ma.masked_array(np.where(has_measure, se, 0.0), mask=~has_measure),
        infit=np.ma.masked_array(np.where(core, infit, 0.0), mask=~core),
        outfit=np.ma.masked_array(np.where(core, outfit, 0.0), mask=~core),
        responses=np.bincount(codes_all, minlength=size),
        extreme=extreme,
    )


def _subsets(core: _Core) -> int:
    """How many connected parts the core responses form (players and pairs as nodes)."""
    import scipy.sparse
    from scipy.sparse.csgraph import connected_components

    n_persons, n_items = core.person_extreme.size, core.item_extreme.size
    graph = scipy.sparse.coo_matrix(
        (np.ones(core.person.size), (core.person, n_persons + core.item)),
        shape=(n_persons + n_items,) * 2,
    )
    in_core = np.zeros(n_persons + n_items, dtype=bool)
    in_core[core.person] = True
    in_core[n_persons + core.item] = True
    _, labels = connected_components(graph, directed=False)
    return int(np.unique(labels[in_core]).size)


def fit(
    persons: ArrayLike,
    items: ArrayLike,
    scores: ArrayLike,
    *,
    max_score: int,
    max_iterations: int = 200,
    tolerance: float = 1e-4,
) -> RaschFit:
    """Fit the model of the module docstring to responses given as three aligned columns.

    ``persons`` and ``items`` are ids (any comparable values; the facets' ``ids`` are the
    sorted distinct ones), ``scores`` integers from 0 to ``max_score``. Raises ValueError
    when a score category is never used by the non-extreme responses (its threshold would
    be infinite) or when nothing is left once extreme elements are set aside.

    The steps: code the responses, set extreme elements aside (``_core``), estimate the
    rest jointly (``_jmle``), take the residuals (``_core_fit``), measure each extreme
    element alone against the fitted other facet, and count the connected subsets.
    """
    m = checks.integer(max_score, "max_score", 1, 100)
    max_iterations = checks.integer(max_iterations, "max_iterations", 1, 100_000)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
        raise ValueError(f"tolerance must be a positive number, got {tolerance!r}")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be between 0 and 1, got {tolerance!r}")
    r = _responses(persons, items, scores, m)
    core = _core(r, m)
    est = _jmle(core, m, max_iterations, tolerance)
    core_fit = _core_fit(core, est)
    cumulative = _cumulative(est.tau)
    person_ext = _extreme_measures(
        r.person, core.person_extreme, r.item, core.item_extreme, est.delta, 1.0, cumulative, m
    )
    item_ext = _extreme_measures(
        r.item, core.item_extreme, r.person, core.person_extreme, est.theta, -1.0, cumulative, m
    )
    return RaschFit(
        persons=_facet(
            r.person_ids,
            r.person,
            core.person,
            est.theta,
            core.person_extreme,
            core_fit,
            person_ext,
        ),
        items=_facet(
            r.item_ids, r.item, core.item, est.delta, core.item_extreme, core_fit, item_ext
        ),
        thresholds=est.tau.copy(),
        threshold_se=core_fit.threshold_se,
        max_score=m,
        iterations=est.iterations,
        converged=est.converged,
        subsets=_subsets(core),
    )
