"""The simulated crowd and judge of ``bench/ppi.py`` (issue 40): pure numpy, no Django.

A caption i of system s has a hidden latent quality ``L_i ~ N(m_s, tau)`` that both the
people and the judge see (``annotation/modes/simulated.py`` has only a per-system quality;
the bench's crowd is its own, as ``bench/adaptive_vicr.py``'s, and answers through the
real services: nothing in the platform's simulation changes).

- A person's VICR rating of caption i: ``clip(round(L_i + e), 1, 5)``, ``e ~ N(0,
  HUMAN_NOISE)``, independent across ratings (no per-worker bias: the people-only interval
  treats units as independent, and a worker's bias shared across units would make it too
  narrow by construction, which is not what is measured here).
- The judge's answer in run r: ``clip(round(L_i + b_s + u_i + v_ir), 1, 5)``: ``b_s`` a
  per-system bias (the judge favours some systems), ``u_i ~ N(0, sigma_i)`` the judge's
  persistent error on the caption, ``v_ir ~ N(0, JITTER * sigma_i)`` its run-to-run noise.
  ``sigma_i = scale * h_i``: with ``hetero`` > 0, ``h_i`` is log-normal (mean square 1), so
  the spread over runs (the uncertainty the design reads) tracks the size of the error.
- ``scale`` is tuned (bisection on a large Monte Carlo sample) so that within a system the
  correlation between the judge's mean over runs and a caption's mean human rating is the
  target rho.

The true mean of a system (the estimand every interval is scored against) is the
expected human rating of a random caption of it, ``E[clip(round(L + e))]`` with ``L + e ~
N(m_s, sqrt(tau^2 + HUMAN_NOISE^2))``, in closed form (``true_mean``): the simulation's known
value, not an estimate from a finite people run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import norm

HUMAN_NOISE = 0.3
TAU = 1.2
JITTER = 0.6
LOW, HIGH = 1, 5
MIDDLE = 3.0
#: Monte Carlo units for the calibration of the judge's noise to a target rho.
CALIBRATION_UNITS = 200_000


def true_mean(m: float, tau: float = TAU, noise: float = HUMAN_NOISE) -> float:
    """Expected rating of a random caption of a system of latent mean ``m`` (closed form)."""
    sd = float(np.hypot(tau, noise))
    edges = np.arange(LOW + 0.5, HIGH, 1.0)  # 1.5 .. 4.5: rating k holds (k-0.5, k+0.5]
    cdf = norm.cdf((edges - m) / sd)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    return float(np.dot(np.arange(LOW, HIGH + 1), probs))


def _clip_round(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), LOW, HIGH).astype(int)


def human_ratings(rng: np.random.Generator, latent: np.ndarray, k: int) -> np.ndarray:
    """``k`` independent ratings per caption, shape (captions, k)."""
    return _clip_round(latent[:, None] + rng.normal(0, HUMAN_NOISE, (len(latent), k)))


def _hetero(rng: np.random.Generator, n: int, hetero: float) -> np.ndarray:
    """Per-caption error scale with mean square 1 (log-normal when ``hetero`` > 0)."""
    if hetero <= 0:
        return np.ones(n)
    return np.exp(rng.normal(0, hetero, n) - hetero**2)  # E[exp(2Z - 2h^2)] = 1


def judge_runs(
    rng: np.random.Generator,
    latent: np.ndarray,
    bias: np.ndarray,
    *,
    scale: float,
    runs: int,
    hetero: float,
    shrink: bool = False,
) -> np.ndarray:
    """The judge's integer answers, shape (captions, runs); ``bias`` per caption.

    ``shrink``: a judge that knows how unsure it is and answers toward the scale's middle
    in proportion (its signal ``L + u`` times ``TAU^2 / (TAU^2 + sigma_i^2)``): its error
    is then largest where its runs spread most, and PPI++'s lambda stays near 1.
    """
    sigma = scale * _hetero(rng, len(latent), hetero)
    persistent = rng.normal(0, 1, len(latent)) * sigma
    jitter = rng.normal(0, 1, (len(latent), runs)) * (JITTER * sigma)[:, None]
    signal = latent + persistent
    if shrink:
        signal = MIDDLE + (signal - MIDDLE) * TAU**2 / (TAU**2 + sigma**2)
    return _clip_round((signal + bias)[:, None] + jitter)


def _rho_at(
    scale: float, *, k: int, runs: int, hetero: float, m: float, shrink: bool = False
) -> float:
    rng = np.random.default_rng(20261129)
    latent = rng.normal(m, TAU, CALIBRATION_UNITS)
    people = human_ratings(rng, latent, k).mean(axis=1)
    judge = judge_runs(
        rng,
        latent,
        np.zeros(CALIBRATION_UNITS),
        scale=scale,
        runs=runs,
        hetero=hetero,
        shrink=shrink,
    )
    return float(np.corrcoef(people, judge.mean(axis=1))[0, 1])


@lru_cache(maxsize=64)
def calibrate(
    rho: float, *, k: int, runs: int, hetero: float, m: float = 3.0, shrink: bool = False
) -> float:
    """The judge's noise scale giving correlation ``rho`` with a caption's human mean
    (within one system of latent mean ``m``); ValueError when no noise reaches it."""
    best = _rho_at(0.0, k=k, runs=runs, hetero=hetero, m=m, shrink=shrink)
    if rho > best:
        raise ValueError(f"rho {rho} is above what this crowd allows ({best:.3f})")
    low, high = 0.0, 8.0
    if _rho_at(high, k=k, runs=runs, hetero=hetero, m=m, shrink=shrink) > rho:
        # A shrinking judge with a wide error spread keeps much of its correlation even
        # at large noise: search further (rho 0.5 needs it).
        low, high = 8.0, 512.0
    for _ in range(40):
        mid = (low + high) / 2
        if _rho_at(mid, k=k, runs=runs, hetero=hetero, m=m, shrink=shrink) > rho:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@dataclass(frozen=True)
class World:
    """One seed's drawn study: per caption its system, latent, ratings and judge runs."""

    systems: list[str]
    system_of: np.ndarray  # index into systems, per caption
    latent: np.ndarray
    ratings: np.ndarray  # (captions, k): the r-th rating a caption receives
    primes: np.ndarray  # (captions, 2): VICR's primed ratings (not in any estimate)
    judge: np.ndarray  # (captions, runs)
    truth: dict[str, float]


def draw_world(
    seed: int,
    *,
    stream: int,
    means: dict[str, float],
    bias: dict[str, float],
    captions: int,
    k: int,
    runs: int,
    scale: float,
    hetero: float,
    shrink: bool = False,
) -> World:
    """Everything a study of this seed is given, drawn from (stream, seed) only: two
    designs of the same seed see the same captions, ratings and judge."""
    rng = np.random.default_rng([stream, seed])
    systems = list(means)
    system_of = np.repeat(np.arange(len(systems)), captions)
    latent = rng.normal(np.array([means[s] for s in systems])[system_of], TAU)
    ratings = human_ratings(rng, latent, k)
    primes = human_ratings(rng, latent, 2)
    per_caption_bias = np.array([bias[s] for s in systems])[system_of]
    judge = judge_runs(
        rng, latent, per_caption_bias, scale=scale, runs=runs, hetero=hetero, shrink=shrink
    )
    truth = {s: true_mean(means[s]) for s in systems}
    return World(systems, system_of, latent, ratings, primes, judge, truth)


def measured_rho(world: World) -> dict[str, float]:
    """Per system: the correlation of the judge's mean over runs with the captions' mean
    human rating (all k ratings; the study itself may see fewer)."""
    people = world.ratings.mean(axis=1)
    judge = world.judge.mean(axis=1)
    out = {}
    for index, system in enumerate(world.systems):
        keep = world.system_of == index
        out[system] = float(np.corrcoef(people[keep], judge[keep])[0, 1])
    return out
