"""Arena battles: a Bradley-Terry leaderboard on LMArena's scale (pure numpy/scipy; no Django).

PROTOCOLS.md section 5. A battle is one image and two captions from two systems ``a`` and
``b``; the outcome is one of LMArena's four names ``model_a``, ``model_b``, ``tie``,
``tie (bothbad)``. Both ties count as half a win to each side, as FastChat's
``compute_mle_elo`` does (it adds every tie, of either kind, once to each side and every
win twice); the two tie kinds are kept apart only in the count table.

Model: P(a beats b) = 1 / (1 + 10^((r_b - r_a) / 400)). Natural-scale strengths ``theta``
give ``r = 400 / ln(10) * theta + 1000``; the scores are then centred so that their mean
is 1000, or shifted so that the ``anchor`` system has the given score (LMArena anchors a
named model).

Public functions:

- :func:`count_table` -- battles to a table of (a, b, outcome, weight) rows with counts, so
  that one million battles cost one ``np.unique`` and every fit below runs on a few hundred
  rows.
- :func:`fit` -- the point estimate. ``choix.ilsr_pairwise_dense`` (a maintained package,
  pure numpy/scipy) computes the ML estimate from the weighted win matrix; arena-rank
  (LMArena's own package) is not used because it pulls in jax, too heavy for this
  platform's workers. Two Newton steps then polish the estimate to machine precision
  because the Hessian is needed anyway for the sandwich estimator.
- :func:`bootstrap` -- multinomial resampling of battles over the count table (seeded),
  percentile 95% intervals, all resamples fitted at once by batched Newton steps.
- :func:`sandwich` -- robust (Huber-White) intervals from the score and the Hessian.
- :func:`rank_intervals` -- the range of ranks each system can take from its score
  interval, by LMArena's rule (see the function).
- :func:`win_rate_matrix`, :func:`battle_count_matrix`, :func:`position_bias`.
- ``rubrics.arena_style.style_control`` -- the same logistic fit with the normalised
  length difference as a covariate (LMArena's style control), in its own module.
- :func:`ipw_weights`, :func:`pair_balanced_weights` -- weighting for adaptive pairing,
  whose sampling rule is ``rubrics.arena_design``.

Every function raises ``ValueError`` with a message on bad input (unknown outcome, a system
against itself, a non-connected comparison graph where the ML estimate does not exist...);
no result is NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# scipy (about 60 MB, also through choix) is imported in the functions that use it, not
# here: the export path imports this module (through the mode registry) and must stay
# inside its memory budget (issue 27; tests/annotation/test_exports.py checks it).

OUTCOMES: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")
# Score of the A side per outcome code (index into OUTCOMES): a win, a loss, two half wins.
_Y = np.array([1.0, 0.0, 0.5, 0.5])

BASE = 10.0
SCALE = 400.0
INIT = 1000.0
ELO_PER_NATURAL = SCALE / np.log(BASE)


@dataclass(frozen=True)
class CountTable:
    """Battles aggregated: one row per distinct (a, b, outcome, weight)."""

    systems: tuple[str, ...]
    a: np.ndarray  # int index into systems
    b: np.ndarray
    outcome: np.ndarray  # int index into OUTCOMES
    weight: np.ndarray  # the per-battle weight of the row's battles (1.0 unless IPW)
    count: np.ndarray  # number of battles in the row (float, for resampled tables)

    @property
    def n_battles(self) -> int:
        return int(round(float(self.count.sum())))

    @property
    def y(self) -> np.ndarray:
        return _Y[self.outcome]


@dataclass(frozen=True)
class Fit:
    systems: tuple[str, ...]
    scores: np.ndarray  # LMArena scale, anchored
    theta: np.ndarray  # natural scale, anchored the same way (scores = ELO * theta + offset)
    offset: float
    anchor: str | None


@dataclass(frozen=True)
class Intervals:
    low: np.ndarray
    high: np.ndarray
    method: str


def _outcome_codes(outcomes: Sequence[str]) -> np.ndarray:
    lookup = {name: i for i, name in enumerate(OUTCOMES)}
    codes = np.empty(len(outcomes), dtype=np.int64)
    for i, name in enumerate(outcomes):
        code = lookup.get(name)
        if code is None:
            raise ValueError(f"battle {i}: outcome {name!r} is not one of {', '.join(OUTCOMES)}")
        codes[i] = code
    return codes


def _system_codes(
    systems_a: Sequence[str], systems_b: Sequence[str], systems: Sequence[str] | None
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    if len(systems_a) != len(systems_b):
        raise ValueError(f"{len(systems_a)} A systems but {len(systems_b)} B systems")
    names = (
        tuple(systems) if systems is not None else tuple(sorted(set(systems_a) | set(systems_b)))
    )
    if len(set(names)) != len(names):
        raise ValueError("systems contains a name twice")
    index = {name: i for i, name in enumerate(names)}
    try:
        a = np.fromiter((index[s] for s in systems_a), dtype=np.int64, count=len(systems_a))
        b = np.fromiter((index[s] for s in systems_b), dtype=np.int64, count=len(systems_b))
    except KeyError as exc:
        raise ValueError(f"system {exc.args[0]!r} is not in systems") from None
    same = np.flatnonzero(a == b)
    if same.size:
        raise ValueError(f"battle {same[0]}: system {names[a[same[0]]]!r} against itself")
    return names, a, b


def count_table(
    systems_a: Sequence[str],
    systems_b: Sequence[str],
    outcomes: Sequence[str],
    weights: Sequence[float] | np.ndarray | None = None,
    systems: Sequence[str] | None = None,
) -> CountTable:
    """Aggregate battles into a count table (one row per distinct a, b, outcome, weight).

    ``weights`` are per-battle weights (see :func:`ipw_weights`); rows keep the weight of
    their battles so that resampling battles (:func:`bootstrap`) stays exact.
    """
    names, a, b = _system_codes(systems_a, systems_b, systems)
    codes = _outcome_codes(outcomes)
    if len(codes) != len(a):
        raise ValueError(f"{len(a)} battles but {len(codes)} outcomes")
    if len(a) == 0:
        raise ValueError("no battles")
    if weights is None:
        w = np.ones(len(a))
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (len(a),):
            raise ValueError(f"{len(a)} battles but {w.size} weights")
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("weights must be finite and positive")
    k = len(names)
    key = (a * k + b) * len(OUTCOMES) + codes
    # Distinct weights are few (one per sampling probability), so group on (key, weight).
    wkeys, winv = np.unique(w, return_inverse=True)
    full = key * len(wkeys) + winv
    uniq, counts = np.unique(full, return_counts=True)
    wi = uniq % len(wkeys)
    rest = uniq // len(wkeys)
    return CountTable(
        systems=names,
        a=rest // len(OUTCOMES) // k,
        b=rest // len(OUTCOMES) % k,
        outcome=rest % len(OUTCOMES),
        weight=wkeys[wi],
        count=counts.astype(float),
    )


def _check_connected(table: CountTable, count: np.ndarray | None = None) -> None:
    """The ML estimate exists iff the directed 'beat or tied' graph is strongly connected."""
    k = len(table.systems)
    c = table.count if count is None else count
    wins = _win_matrix(table, c)
    from scipy.sparse.csgraph import connected_components

    n_comp, labels = connected_components(wins > 0, directed=True, connection="strong")
    if n_comp > 1:
        groups: dict[int, list[str]] = {}
        for i in range(k):
            groups.setdefault(int(labels[i]), []).append(table.systems[i])
        shown = "; ".join(", ".join(g) for g in list(groups.values())[:4])
        raise ValueError(
            "the Bradley-Terry estimate does not exist: some systems never lost (or never won) "
            f"against the others, so their scores are unbounded (groups: {shown})"
        )


def _win_matrix(table: CountTable, count: np.ndarray) -> np.ndarray:
    """wins[i, j] = weighted wins of i over j, ties half to each side."""
    k = len(table.systems)
    mass = count * table.weight
    y = table.y
    wins = np.zeros((k, k))
    np.add.at(wins, (table.a, table.b), mass * y)
    np.add.at(wins, (table.b, table.a), mass * (1.0 - y))
    return wins


def logistic(eta: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-eta)) without overflow: a nearly separated bootstrap resample drives
    a Newton step's eta past 709, where ``exp`` overflowed (a RuntimeWarning in the report
    job's log). The value is the same; ``logaddexp`` never forms exp(-eta) itself."""
    return np.exp(-np.logaddexp(0.0, -eta))


def _log_likelihood(eta: np.ndarray, mass: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The weighted BT log-likelihood of each row of ``eta`` (B, rows), without overflow."""
    return -(mass * (y * np.logaddexp(0.0, -eta) + (1.0 - y) * np.logaddexp(0.0, eta))).sum(-1)


def _newton(
    table: CountTable, theta: np.ndarray, count: np.ndarray, steps: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """Newton steps on the weighted BT log-likelihood, batched over rows of ``count``.

    ``theta`` (B, k) and ``count`` (B, rows). The last system's strength is pinned at 0
    (identifiability) and re-centred afterwards. Returns theta and the Hessian of the
    free parameters (B, k-1, k-1).
    """
    k = len(table.systems)
    x = np.zeros((len(table.a), k))
    x[np.arange(len(table.a)), table.a] = 1.0
    x[np.arange(len(table.a)), table.b] = -1.0
    x = x[:, :-1]
    t = theta[:, :-1] - theta[:, -1:]
    mass = count * table.weight
    y = table.y
    hess = np.zeros((t.shape[0], k - 1, k - 1))
    ll = _log_likelihood(t @ x.T, mass, y)
    for _ in range(steps):
        eta = t @ x.T
        p = logistic(eta)
        grad = ((mass * (y - p)) @ x)[..., None]
        # (B, k-1, rows) @ (rows, k-1): a batched matmul, far faster than einsum here.
        hess = (x.T[None, :, :] * (mass * p * (1.0 - p))[:, None, :]) @ x
        delta = np.linalg.solve(hess, grad)[..., 0]
        # Halve a row's step while it lowers that row's log-likelihood. A full step can
        # overshoot on a nearly separated bootstrap resample and diverge until the Hessian
        # is singular (the report then lost its leaderboard); the maximum is the same.
        scale = np.ones(len(t))
        for _ in range(60):
            worse = _log_likelihood((t + scale[:, None] * delta) @ x.T, mass, y) < ll - (
                1e-12 * (1.0 + np.abs(ll))
            )
            if not worse.any():
                break
            scale[worse] /= 2.0
        delta = scale[:, None] * delta
        t = t + delta
        ll = _log_likelihood(t @ x.T, mass, y)
        if np.max(np.abs(delta)) < 1e-11:
            break
    else:
        # Never silently return a half-converged estimate (the callers start close to
        # the optimum, so this means the data are nearly separated).
        if steps > 3:
            raise ValueError("the Bradley-Terry fit did not converge (nearly separated battles)")
    out = np.concatenate([t, np.zeros((t.shape[0], 1))], axis=1)
    return out - out.mean(axis=1, keepdims=True), hess


def _anchor(
    systems: tuple[str, ...], theta: np.ndarray, anchor: tuple[str, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Natural strengths (B, k) to scores and the anchored natural strengths."""
    if anchor is None:
        centred = theta - theta.mean(axis=-1, keepdims=True)
        return ELO_PER_NATURAL * centred + INIT, centred
    name, score = anchor
    if name not in systems:
        raise ValueError(f"anchor system {name!r} is not among the systems")
    if not np.isfinite(score):
        raise ValueError("the anchor score must be finite")
    i = systems.index(name)
    shifted = theta - theta[..., i : i + 1]
    return ELO_PER_NATURAL * shifted + score, shifted


def fit(table: CountTable, anchor: tuple[str, float] | None = None) -> Fit:
    """Bradley-Terry scores; mean 1000 without ``anchor``, else ``anchor=(system, score)``."""
    if len(table.systems) < 2:
        raise ValueError("a leaderboard needs at least two systems")
    _check_connected(table)
    wins = _win_matrix(table, table.count)
    try:
        import choix

        start = choix.ilsr_pairwise_dense(wins, alpha=0.0, max_iter=1000, tol=1e-10)
    except RuntimeError:
        # ILSR converges slowly on nearly separated data; Newton from 0 (the log-likelihood
        # is concave) then does the whole fit.
        start = np.zeros(len(table.systems))
    theta, _ = _newton(table, start[None, :], table.count[None, :], steps=100)
    scores, natural = _anchor(table.systems, theta[0], anchor)
    offset = float(scores[0] - ELO_PER_NATURAL * natural[0])
    return Fit(table.systems, scores, natural, offset, anchor[0] if anchor else None)


def bootstrap(
    table: CountTable,
    anchor: tuple[str, float] | None = None,
    rounds: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    batch: int = 250,
) -> tuple[Intervals, np.ndarray]:
    """Percentile intervals from ``rounds`` multinomial resamples of the battles.

    Each resample draws ``n_battles`` battles with replacement (multinomial over the
    rows), as FastChat's bootstrap does. A resample in which the ML estimate does not
    exist (a system without a win or a loss) is drawn again from the same seeded stream,
    so the count of rounds is exact. Returns the intervals and the resampled scores
    (rounds, k).
    """
    if rounds < 20:
        raise ValueError("the bootstrap needs at least 20 rounds")
    if not 0.5 < level < 1.0:
        raise ValueError("level must be in (0.5, 1)")
    point = fit(table, anchor)
    rng = np.random.default_rng(seed)
    n = table.n_battles
    p = table.count / table.count.sum()
    draws: list[np.ndarray] = []
    tries = 0
    while len(draws) < rounds:
        tries += 1
        if tries > 10 * rounds:
            raise ValueError(
                "too few battles: most resamples leave a system without a win or a loss"
            )
        c = rng.multinomial(n, p).astype(float)
        # The graph can only lose edges where a row emptied; check only then (cheap path).
        if np.any((c == 0) & (table.count > 0)):
            try:
                _check_connected(table, c)
            except ValueError:
                continue
        draws.append(c)
    counts = np.array(draws)
    k = len(table.systems)
    all_scores = np.empty((rounds, k))
    start = np.tile(point.theta, (min(batch, rounds), 1))
    for lo in range(0, rounds, batch):
        c = counts[lo : lo + batch]
        theta, _ = _newton(table, start[: len(c)], c)
        all_scores[lo : lo + batch], _ = _anchor(table.systems, theta, anchor)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(all_scores, [alpha, 1.0 - alpha], axis=0)
    return Intervals(low, high, "bootstrap percentile"), all_scores


def _robust_cov(
    table: CountTable, theta: np.ndarray, hess: np.ndarray, x: np.ndarray
) -> np.ndarray:
    eta = x @ theta
    p = logistic(eta)
    # Every battle in a row has the same x, y and weight: its score is w (y - p) x.
    meat = np.einsum("r,ri,rj->ij", table.count * (table.weight * (table.y - p)) ** 2, x, x)
    bread = np.linalg.inv(hess)
    return bread @ meat @ bread


def sandwich(
    table: CountTable, anchor: tuple[str, float] | None = None, level: float = 0.95
) -> tuple[Intervals, np.ndarray]:
    """Robust (sandwich) intervals: Cov = H^-1 (sum of score outer products) H^-1.

    Valid under model misspecification and with IPW weights (where the plain inverse
    Hessian is not). Returns the normal intervals and the covariance matrix of the
    anchored scores on LMArena's scale (k, k).
    """
    point = fit(table, anchor)
    k = len(table.systems)
    theta, hess = _newton(table, point.theta[None, :], table.count[None, :], steps=3)
    x = np.zeros((len(table.a), k))
    x[np.arange(len(table.a)), table.a] = 1.0
    x[np.arange(len(table.a)), table.b] = -1.0
    free = theta[0, :-1] - theta[0, -1]
    cov_free = _robust_cov(table, free, hess[0], x[:, :-1])
    # Map the free parameters (last system pinned at 0) to the anchored strengths.
    to_full = np.vstack([np.eye(k - 1), np.zeros((1, k - 1))])
    if anchor is None:
        to_anchor = np.eye(k) - 1.0 / k
    else:
        i = table.systems.index(anchor[0])
        to_anchor = np.eye(k)
        to_anchor[:, i] -= 1.0
    m = ELO_PER_NATURAL * to_anchor @ to_full
    cov = m @ cov_free @ m.T
    from scipy import stats

    z = stats.norm.ppf(0.5 + level / 2.0)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return Intervals(point.scores - z * se, point.scores + z * se, "sandwich"), cov


def rank_intervals(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best and worst rank of each system from its score interval (LMArena's rule).

    Best rank = 1 + the number of systems whose lower bound exceeds this system's upper
    bound (they are surely better); worst rank = the number of systems whose upper bound
    is not below this system's lower bound, itself included (all that it may trail).
    """
    low = np.asarray(low, dtype=float)
    high = np.asarray(high, dtype=float)
    if low.shape != high.shape or low.ndim != 1:
        raise ValueError("low and high must be 1-d arrays of the same length")
    if np.any(low > high):
        raise ValueError("an interval has its lower bound above its upper bound")
    best = 1 + (low[None, :] > high[:, None]).sum(axis=1)
    worst = len(low) - (high[None, :] < low[:, None]).sum(axis=1)
    return best, worst


def battle_count_matrix(table: CountTable) -> np.ndarray:
    """counts[i, j] = battles between i and j in either side order (symmetric)."""
    k = len(table.systems)
    counts = np.zeros((k, k))
    np.add.at(counts, (table.a, table.b), table.count)
    return counts + counts.T


def win_rate_matrix(table: CountTable) -> np.ma.MaskedArray:
    """rate[i, j] = share of i's battles against j that i won, ties as half.

    Masked (never NaN) where the two systems never met, including the diagonal.
    """
    counts = battle_count_matrix(table)
    # Win rates are raw shares of battles, not IPW-weighted: undo the weights.
    wins = np.zeros_like(counts)
    np.add.at(wins, (table.a, table.b), table.count * table.y)
    np.add.at(wins, (table.b, table.a), table.count * (1.0 - table.y))
    met = counts > 0
    rate = np.divide(wins, counts, out=np.zeros_like(counts), where=met)
    return np.ma.MaskedArray(rate, mask=~met)


@dataclass(frozen=True)
class PositionBias:
    left_share: float
    low: float
    high: float
    decisive: int
    p_value: float  # two-sided exact binomial test of share = 1/2


def position_bias(outcomes: Sequence[str], level: float = 0.95) -> PositionBias:
    """Share of decisive battles won by the side shown left (``model_a`` is the left side).

    Wilson interval and an exact binomial test against 1/2; ties are not decisive.
    """
    codes = _outcome_codes(outcomes)
    left = int((codes == 0).sum())
    decisive = left + int((codes == 1).sum())
    if decisive == 0:
        raise ValueError("no decisive battles: position bias is undefined")
    from scipy import stats

    test = stats.binomtest(left, decisive, 0.5)
    ci = test.proportion_ci(confidence_level=level, method="wilson")
    return PositionBias(
        left / decisive, float(ci.low), float(ci.high), decisive, float(test.pvalue)
    )


def ipw_weights(probabilities: Sequence[float]) -> np.ndarray:
    """Per-battle weights 1 / P(pair served), normalised to mean 1.

    The probability is the one stored when the battle was served (adaptive pairing
    changes it over time). The normalisation leaves the point estimate unchanged and keeps
    the sandwich interval on the battle scale.
    """
    p = np.asarray(probabilities, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("probabilities must be a non-empty 1-d sequence")
    if not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise ValueError("every sampling probability must be in (0, 1]")
    w = 1.0 / p
    return w / w.mean()


def pair_balanced_weights(systems_a: Sequence[str], systems_b: Sequence[str]) -> np.ndarray:
    """Per-battle weights 1 / (battles of its pair, either side order), normalised to mean 1.

    Inverse-probability weighting by each pair's *realised* sampling rate (Hajek's ratio
    form of the Horvitz-Thompson weights, i.e. post-stratification on the pair): every pair
    that was played carries the same total weight, which is exactly what uniform pairing
    gives in expectation, so the weighted fit targets the uniform design's leaderboard
    whatever the adaptive design did. Against :func:`ipw_weights` with the probability
    stored at serve time, it removes the noise of how many battles each pair happened to
    get under probabilities that changed over time (Hajek 1971; the sandwich variance then
    conditions on the pair counts). A pair that was never played gets no weight, as
    under any weighting.
    """
    if len(systems_a) != len(systems_b):
        raise ValueError(f"{len(systems_a)} A systems but {len(systems_b)} B systems")
    if len(systems_a) == 0:
        raise ValueError("no battles")
    keys = [(a, b) if a <= b else (b, a) for a, b in zip(systems_a, systems_b, strict=True)]
    counts: dict[tuple[str, str], int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    w = 1.0 / np.array([counts[key] for key in keys], dtype=float)
    return w / w.mean()
