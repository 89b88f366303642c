"""Array type aliases of the model's vectorised functions (numpy.typing)."""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]  # a result: float64 array of any shape
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ArrayLike = npt.ArrayLike  # an input: a number, a sequence or an array, broadcast
