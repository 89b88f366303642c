"""Array type aliases of the model's vectorised functions (numpy.typing), and array helpers."""

from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]  # a result: float64 array of any shape
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ArrayLike = npt.ArrayLike  # an input: a number, a sequence or an array, broadcast


def distinct_sorted(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The distinct values of a 1-D array, ascending: np.unique's result for numbers that are
    not nan, without the import of numpy.ma that np.unique triggers (10-30 ms of a command's
    start-up)."""
    ordered = np.sort(np.asarray(values).ravel())
    keep = np.ones(ordered.size, dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    distinct: npt.NDArray[Any] = ordered[keep]
    return distinct
