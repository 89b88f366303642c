"""The complementary error function erfc(x), vectorised in numpy, within 2 ulp of the exact
value over the whole double range.

Checked by tests/analytic/test_erfc.py against 60-digit mpmath, against `math.erfc` and by hypothesis
over every double. One numpy pass per array instead of one `math.erfc` call per element; each
element's bits depend on that element alone (not on the array's size, shape or order), so a
batched computation gives the numbers of one at a time.

Scheme (coefficients derived by scripts/derive_erfc.py, which cites the method), for a = |x|:
erfc(a) = exp(−a²) erfcx(a) = exp(A) exp(B), with
A = −z² − c_k and B = (z − a)(z + a) + q_k(a), where z is a rounded to a multiple of 2^-16 (so z²
and A are exact: the large part of the exponent carries no rounding), k the interval of a
(its double's top bits), c_k a constant of the interval and q_k(a) = ln erfcx(a) + c_k a
degree-9 polynomial; exp(A) exp(B) = e + e·expm1(B) with e = exp(A), so the rounding of the
factor near 1 is scaled by |expm1(B)|. Error: numpy's exp (≤ 0.7 ulp), the last addition's
0.5 ulp and the rest's < 0.2 ulp; past a ≈ 26.55 (subnormal results) the same in units of the
smallest subnormal. erfc(x) = 2 − erfc(|x|) for x < 0; erfc(a) for a >= 27.3 is erfc(27.3),
which underflows to 0 (the exact value is below 2^-1075); nan stays nan. No operation
overflows or is invalid on any input, so the caller's floating-point error state is not touched.
"""

import numpy as np

from prfaas_plan.analytic import erfc_table as _table
from prfaas_plan.analytic.arrays import ArrayLike, FloatArray

# per interval k, a column: centre, 1/half-width, c_k, then the coefficients highest power
# first (rows of one kind contiguous, so each gathered row is a contiguous array)
_COLUMNS = np.vstack(
    (
        _table.CENTRES,
        _table.INVERSE_HALF_WIDTHS,
        _table.OFFSETS,
        *[_table.COEFFICIENTS[j] for j in range(len(_table.COEFFICIENTS) - 1, -1, -1)],
    )
)
# interval k >= 1 is [2^e (1 + j/16), 2^e (1 + (j+1)/16)), the double's exponent and top 4
# mantissa bits counted from 1/8 (a non-negative double's bits order as its value does); every
# a < 17/128 falls on k = 0 (clipped), the interval [0, 17/128)
_INDEX_SHIFT = 52 - 4
_FIRST_INDEX = int(np.array(0.125).view(np.int64)) >> _INDEX_SHIFT
_GRID = 2.0**16  # z = a rounded to a multiple of 2^-16: z² is exact below 2^10
_BLOCK = 16384  # elements a pass holds (with their gathered coefficients: 13 numbers each)


def erfc(x: ArrayLike) -> FloatArray:
    """erfc(x) = (2/√π) ∫_x^∞ exp(−t²) dt, element by element, within 2 ulp (module docstring)."""
    x = np.asarray(x, dtype=float)
    flat = x.ravel()
    if flat.size <= _BLOCK:
        return _erfc_block(flat).reshape(x.shape)
    out = np.empty(flat.shape)
    for start in range(0, flat.size, _BLOCK):
        out[start : start + _BLOCK] = _erfc_block(flat[start : start + _BLOCK])
    result: FloatArray = out.reshape(x.shape)
    return result


def _erfc_block(x: FloatArray) -> FloatArray:
    """erfc of a 1-D array."""
    a = np.minimum(np.abs(x), _table.LAST_X)  # nan stays nan
    k = (a.view(np.int64) >> _INDEX_SHIFT) - _FIRST_INDEX
    rows = _COLUMNS.take(k, axis=1, mode="clip")  # k < 0 (a < 1/8): column 0; nan: the last
    s = (a - rows[0]) * rows[1]
    q = rows[3] * s
    for coefficient in rows[4:-1]:
        q += coefficient
        q *= s
    q += rows[-1]
    z = np.rint(a * _GRID) / _GRID  # ties to even, as np.round
    e = np.exp(-(z * z) - rows[2])
    e += e * np.expm1((z - a) * (z + a) + q)
    out: FloatArray = np.subtract(2.0, e, out=e, where=x < 0)
    return out
