"""Input checks shared by the rubrics modules (pure numpy; no Django).

Why they exist: the statistics in ``rubrics`` must not quietly return NaN or a
wrong number for bad input. numpy accepts ``True`` as 1, ``2.5`` as a count of
resamples and ``"0.9"`` in some places, and it turns NaN ratings or an empty array
into a NaN mean without complaint; each of those would reach a report as a
number. These checks raise ``ValueError`` instead, with a message that names the
argument, so a bad setting or a missing value is reported where it enters.

One version of each check lives here; the rubrics modules call these and keep no
copies. Message style: ``"<name> must ..."``, where ``name`` is the caller's
argument name (or a longer phrase such as ``"each of image_counts"``).

- :func:`integer` -- an integer setting with bounds (counts, seeds, levels).
- :func:`confidence` -- a confidence level strictly between 0 and 1.
- :func:`finite_array` -- a non-empty float array without NaN or infinity.
- :func:`id_array` -- a 1-D column of ids: no missing id, mutually comparable.
"""

import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["confidence", "finite_array", "id_array", "integer"]


def integer(value: Any, name: str, low: int = 1, high: int | None = None) -> int:
    """``value`` as an ``int`` when it is an integer in ``[low, high]`` (``high=None``: unbounded).

    Any ``numbers.Integral`` is accepted (Python and numpy integers); ``bool`` and
    ``numpy.bool_`` are refused, and so are integral floats such as ``2.0``.
    """
    bounds = f">= {low}" if high is None else f"from {low} to {high}"
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer {bounds}, got {value!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        raise ValueError(f"{name} must be {bounds}, got {number}")
    return number


def confidence(value: Any, name: str = "confidence") -> float:
    """``value`` as a ``float`` when it is a real number strictly between 0 and 1.

    Refuses ``bool``, strings and NaN (a percentage such as ``95`` fails the range).
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    number = float(value)
    if not 0.0 < number < 1.0:  # also False for NaN
        raise ValueError(f"{name} must be strictly between 0 and 1, got {value!r}")
    return number


def finite_array(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """``values`` as a float64 array (any shape) when it is non-empty, numeric and finite."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from exc
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or infinity)")
    return arr


def id_array(values: ArrayLike, name: str, n: int | None = None) -> NDArray[Any]:
    """``values`` as a 1-D array of ids (``n`` rows unless None) with no missing id.

    Missing means None or a NaN (object arrays) or a non-finite float. The ids must be
    mutually comparable (one type), because the reports group rows with
    ``numpy.unique``, which sorts them. The array is returned unconverted.
    """
    arr = np.asarray(values)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        expected = "1-D" if n is None else f"{n} rows"
        raise ValueError(f"{name} must have {expected}, got shape {arr.shape}")
    if arr.dtype == object:
        for i, v in enumerate(arr):
            if v is None or (isinstance(v, float) and v != v):
                raise ValueError(f"{name} has a missing id ({v!r}) at row {i}")
        try:
            np.unique(arr)
        except TypeError as exc:
            raise ValueError(f"{name} ids must be mutually comparable (one type)") from exc
    elif arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        i = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} has a missing id (NaN) at row {i}")
    return arr
