"""Virtual raters (PROTOCOLS.md section 2 Report; paper section 6 and Table 3).

Per repetition, three ratings of each pair are drawn without replacement and sorted
X <= Y <= Z; the agreement statistics of those three virtual raters are averaged over the
repetitions (standard deviation with ``ddof=0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from itertools import combinations

import numpy as np

from rubrics import agreement, checks
from rubrics.vicr.ratings import as_rating_array, check_levels, ragged

__all__ = [
    "VIRTUAL_RATER_KEYS",
    "draw_virtual_raters",
    "virtual_rater_statistics",
    "virtual_rater_values",
    "virtual_raters",
]


VIRTUAL_RATER_KEYS: tuple[str, ...] = (
    "tau_x_yz",
    "tau_y_xz",
    "tau_z_xy",
    "kendall_w",
    "fleiss_kappa",
)
_RATERS = 3
_CODE_TABLE_MAX_CELLS = 4_000_000


@cache
def _colex_triples(k: int) -> np.ndarray:
    """All 3-subsets of range(k) in colex order, so those of range(j) are the first C(j, 3)."""
    triples = sorted(combinations(range(k), 3), key=lambda t: (t[2], t[1], t[0]))
    table = np.array(triples, dtype=np.int64).reshape(-1, 3)
    table.setflags(write=False)
    return table


@dataclass(frozen=True, slots=True)
class _Pairs:
    values: np.ndarray  # (pairs, width) each row's ratings sorted ascending, 0-based, 0-padded
    counts: np.ndarray  # (pairs,) number of ratings per pair, all >= 3


def _prepare(ratings: object, levels: int) -> _Pairs:
    flat, counts = ragged(ratings, levels)
    rows = np.repeat(np.arange(counts.size), counts)
    starts = np.cumsum(counts) - counts
    cols = np.arange(flat.size) - np.repeat(starts, counts)
    width = int(counts.max()) if counts.size else 0
    matrix = np.full((counts.size, max(width, _RATERS)), levels, dtype=np.int64)
    matrix[rows, cols] = flat - 1
    keep = counts >= _RATERS
    values = np.sort(matrix[keep], axis=1)
    values[values == levels] = 0  # padding (sorted last) becomes a harmless 0
    kept = int(np.count_nonzero(keep))
    if kept < 2:
        raise ValueError(f"virtual raters need at least 2 pairs with 3 or more ratings, got {kept}")
    return _Pairs(values=values, counts=counts[keep])


def _draw_indices(counts: np.ndarray, repetitions: int, seed: int | None) -> np.ndarray:
    """Uniform index of a 3-subset (colex order) per repetition and pair."""
    rng = np.random.default_rng(seed)
    # C(k, 3) as an exact int64 vector
    highs = counts * (counts - 1) * (counts - 2) // 6
    return rng.integers(0, highs, size=(repetitions, counts.size))


def _check_draw_args(repetitions: int, seed: int | None) -> int:
    repetitions = checks.integer(repetitions, "repetitions", 1, 10**6)
    if seed is not None:
        checks.integer(seed, "seed", 0, 2**63 - 1)
    return repetitions


def draw_virtual_raters(
    ratings: Iterable[Sequence[int]],
    repetitions: int = 100,
    seed: int | None = 0,
    levels: int = 5,
) -> np.ndarray:
    """The X <= Y <= Z virtual-rater draws of section 2 Report: (repetitions, pairs, 3) ints.

    Per repetition and pair, 3 of the pair's ratings are drawn without replacement
    (uniformly among its 3-subsets) and sorted; pairs with fewer than 3 ratings are left out
    and the others keep their order. ``virtual_rater_values`` uses exactly these draws.
    """
    levels = check_levels(levels)
    repetitions = _check_draw_args(repetitions, seed)
    pairs = _prepare(ratings, levels)
    index = _draw_indices(pairs.counts, repetitions, seed)
    positions = _colex_triples(pairs.values.shape[1])[index]  # (reps, pairs, 3)
    rows = np.arange(pairs.counts.size)[None, :, None]
    return pairs.values[rows, positions] + 1


def _triple_codes(pairs: _Pairs, index: np.ndarray, levels: int) -> np.ndarray:
    """Code x*L^2 + y*L + z (0-based sorted values) of each drawn triple, (reps, pairs)."""
    table = _colex_triples(pairs.values.shape[1])
    n_pairs = pairs.counts.size
    weights = np.array([levels * levels, levels, 1], dtype=np.int64)
    if n_pairs * table.shape[0] <= _CODE_TABLE_MAX_CELLS:
        # every pair's code for each of its possible triples, then one gather
        codes_per_pair = pairs.values[:, table] @ weights  # (pairs, C(width, 3))
        return codes_per_pair[np.arange(n_pairs)[None, :], index]
    flat = pairs.values.ravel()
    base = (np.arange(n_pairs) * pairs.values.shape[1])[None, :]
    codes = np.zeros(index.shape, dtype=np.int64)
    for column, weight in enumerate(weights):
        codes += flat[base + table[index, column]] * weight
    return codes


@cache
def _code_digits(levels: int) -> np.ndarray:
    """Row c holds the 0-based (x, y, z) of triple code c = x*L^2 + y*L + z."""
    digits = np.stack(np.unravel_index(np.arange(levels**3), (levels,) * 3), axis=-1)
    digits = digits.astype(np.int64)
    digits.setflags(write=False)
    return digits


def _statistics(values: np.ndarray, levels: int, collapse_top: bool) -> np.ndarray:
    """All five statistics (x100) of sorted 0-based draws (reps, pairs, 3), per repetition."""
    joint = agreement.batched_joint_counts(values, levels)  # (reps, L, L, L)
    xy, xz, yz = joint.sum(axis=3), joint.sum(axis=2), joint.sum(axis=1)
    # Kendall tau_c "method A": the candidate repeated once per reference rater against the
    # references concatenated; tabulating those vectors is summing the pairwise tables.
    tables = (xy + xz, xy.swapaxes(-1, -2) + yz, (xz + yz).swapaxes(-1, -2))
    # rating 5 (code 4) merged into 4 for Fleiss' kappa only; higher levels are left alone
    kappa_codes = np.where(values == 4, 3, values) if collapse_top and levels >= 5 else values
    statistics = (
        *(partial(agreement.batched_kendall_tau_from_tables, table, "c") for table in tables),
        partial(agreement.batched_kendall_w_from_codes, values, levels),
        partial(agreement.batched_fleiss_kappa_from_codes, kappa_codes, levels),
    )
    out = np.empty((values.shape[0], len(VIRTUAL_RATER_KEYS)), dtype=np.float64)
    for column, (key, statistic) in enumerate(zip(VIRTUAL_RATER_KEYS, statistics, strict=True)):
        try:
            out[:, column] = statistic()
        except ValueError as exc:  # a 0/0 statistic; agreement's batch index = repetition
            reason = str(exc).partition(" is undefined: ")[2] or str(exc)
            raise ValueError(f"{key} is undefined: {reason}") from exc
    return out * 100.0


def virtual_rater_statistics(
    triples: np.ndarray, levels: int = 5, collapse_top: bool = False
) -> np.ndarray:
    """Section 2 Report statistics (x100) of given draws (repetitions, pairs, 3) or (pairs, 3).

    Columns follow ``VIRTUAL_RATER_KEYS``; each row of a draw must be sorted (X <= Y <= Z).
    """
    levels = check_levels(levels)
    array = np.asarray(triples)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or array.shape[2] != _RATERS:
        raise ValueError("triples must have shape (repetitions, pairs, 3) or (pairs, 3)")
    values = as_rating_array(array, "triples", levels).reshape(array.shape) - 1
    if np.any(np.diff(values, axis=2) < 0):
        raise ValueError("each triple must be sorted so that X <= Y <= Z")
    if values.shape[1] < 2:
        raise ValueError(f"virtual raters need at least 2 pairs, got {values.shape[1]}")
    return _statistics(values, levels, collapse_top)


def virtual_rater_values(
    ratings: Iterable[Sequence[int]],
    repetitions: int = 100,
    seed: int | None = 0,
    collapse_top: bool = False,
    levels: int = 5,
) -> np.ndarray:
    """Per-repetition virtual-rater statistics (x100), shape (repetitions, 5) (section 2)."""
    levels = check_levels(levels)
    repetitions = _check_draw_args(repetitions, seed)
    if not isinstance(collapse_top, bool):
        raise ValueError(f"collapse_top must be a bool, got {collapse_top!r}")
    pairs = _prepare(ratings, levels)
    index = _draw_indices(pairs.counts, repetitions, seed)
    # gathering one code per triple, then decoding it, is faster than gathering 3 values
    codes = _triple_codes(pairs, index, levels)
    values = np.take(_code_digits(levels), codes, axis=0)  # (reps, pairs, 3)
    return _statistics(values, levels, collapse_top)


def virtual_raters(
    ratings: Iterable[Sequence[int]],
    repetitions: int = 100,
    seed: int | None = 0,
    collapse_top: bool = False,
    levels: int = 5,
) -> dict[str, dict[str, float]]:
    """Virtual-rater agreement of section 2 Report / paper Table 3: mean and std x100.

    ``ratings`` holds one sequence of ratings per pair (pairs with fewer than 3 are left out).
    Each of ``repetitions`` draws 3 ratings per pair without replacement, sorted X <= Y <= Z,
    and computes tau_X-YZ, tau_Y-XZ, tau_Z-XY (Kendall tau_c, method A), Kendall's W (tie
    corrected) and Fleiss' kappa. Returns ``{key: {"mean", "std"}}`` for the keys of
    ``VIRTUAL_RATER_KEYS``; ``std`` is the population standard deviation (ddof=0).

    ``levels`` is the scale size (5 for VICR, 4 for Flickr8k-Expert); ratings outside
    1..levels raise ValueError. ``collapse_top`` merges rating 5 into 4 for Fleiss' kappa
    only (as the paper does for its VICR column, to compare with the 4-level
    Flickr8k-Expert); off by default; on a 1-4 scale it changes nothing. Raises ValueError
    when a statistic is undefined (e.g. a virtual rater gives one rating to every pair).
    """
    values = virtual_rater_values(ratings, repetitions, seed, collapse_top, levels)
    means = values.mean(axis=0)
    stds = values.std(axis=0, ddof=0)
    return {
        key: {"mean": float(means[i]), "std": float(stds[i])}
        for i, key in enumerate(VIRTUAL_RATER_KEYS)
    }
