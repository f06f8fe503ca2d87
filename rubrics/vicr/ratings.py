"""Validation of VICR ratings, shared by the scalar rules and the bulk report helpers.

The scalar rules take Python/numpy integers from 1 to 5 only (``check_rating``); the bulk
helpers (``as_rating_array``, ``ragged``) also accept integer-valued floats such as ``3.0``,
because published datasets (Flickr8k-Expert) store ratings that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from rubrics import checks
from rubrics.vicr.scale import MAX_RATING, MIN_RATING

__all__ = ["as_rating_array", "check_levels", "check_rating", "check_ratings", "ragged"]


def check_rating(value: object, name: str = "rating") -> int:
    return checks.integer(value, name, MIN_RATING, MAX_RATING)


def check_ratings(values: Iterable[object], name: str) -> list[int]:
    if isinstance(values, str | bytes):
        raise ValueError(f"{name} must be a sequence of integer ratings, got a string")
    return [check_rating(v, f"each of {name}") for v in values]


def check_levels(levels: int) -> int:
    return checks.integer(levels, "levels", 2, 9)


def as_rating_array(values: object, name: str, levels: int = MAX_RATING) -> np.ndarray:
    """A flat int64 array of ratings in 1..levels; integer-valued floats accepted."""
    if isinstance(values, np.ndarray):
        flat_list: Sequence[object] | np.ndarray = values.ravel()
    elif isinstance(values, str | bytes):
        raise ValueError(f"{name} must be a sequence of ratings, got a string")
    else:
        flat_list = list(values)  # type: ignore[call-overload]
        if any(isinstance(v, bool | np.bool_) for v in flat_list):
            raise ValueError(f"{name} must be integer ratings; booleans are not ratings")
    array = np.asarray(flat_list)
    if array.dtype == np.bool_:
        raise ValueError(f"{name} must be integer ratings; booleans are not ratings")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be integer ratings, got values of type {array.dtype}")
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite values")
        if not np.all(array == np.round(array)):
            bad = array[array != np.round(array)][0]
            raise ValueError(f"{name} must be whole numbers, got {bad!r}")
    out = array.astype(np.int64)
    if out.min() < 1 or out.max() > levels:
        bad = out[(out < 1) | (out > levels)][0]
        raise ValueError(f"{name} must be from 1 to {levels}, got {bad}")
    return out


def ragged(ratings: object, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Flatten one-sequence-per-pair ratings into (flat values, count per pair)."""
    if isinstance(ratings, np.ndarray):
        if ratings.ndim != 2:
            raise ValueError("ratings as an array must be 2-D (pairs x ratings)")
        counts = np.full(ratings.shape[0], ratings.shape[1], dtype=np.int64)
        return as_rating_array(ratings, "ratings", levels), counts
    if isinstance(ratings, str | bytes):
        raise ValueError("ratings must be one sequence of ratings per pair, got a string")
    rows = list(ratings)  # type: ignore[call-overload]
    for row in rows:
        if isinstance(row, str | bytes) or not isinstance(row, Sequence | np.ndarray):
            raise ValueError(
                f"ratings must be one sequence of ratings per pair, got an element {row!r}"
            )
    counts = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    flat = as_rating_array(list(chain.from_iterable(rows)), "ratings", levels)
    return flat, counts
