"""The standard normal law, accurate in both tails (for the truncated log-normal).

Φ is evaluated as erfc of |z| (one erfc per element, no cancellation in the tail), masses
between two points as a difference of whichever tails are small, and the inverse CDF of a
normal truncated to [z_lo, z_hi] in the tail that holds the interval. `math.erfc` and
`statistics.NormalDist`: scipy.special would cost 0.2 s of start-up.
"""

import math
from statistics import NormalDist

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray

_SQRT2 = math.sqrt(2.0)
_inverse_cdf = np.frompyfunc(NormalDist().inv_cdf, 1, 1)


def small_tail(z: ArrayLike) -> FloatArray:
    """min(Φ(z), 1 − Φ(z)) = erfc(|z| / √2) / 2, exact in the tail (`math.erfc` per element,
    read into a float array directly: no array of Python objects in between)."""
    x = np.abs(np.asarray(z, float)) / _SQRT2
    erfc = np.fromiter(map(math.erfc, x.ravel().tolist()), float, count=x.size)
    tail: FloatArray = 0.5 * erfc.reshape(x.shape)
    return tail


def mass_between(
    z_lo: ArrayLike, tail_lo: ArrayLike, z_hi: ArrayLike, tail_hi: ArrayLike
) -> FloatArray:
    """P(z_lo < Z <= z_hi) from the small tails at both ends, without cancellation: a
    difference of lower tails below 0, of upper tails above 0, else 1 minus both tails."""
    lo, hi = np.asarray(tail_lo, float), np.asarray(tail_hi, float)
    mass: FloatArray = np.where(
        np.asarray(z_hi) <= 0,
        hi - lo,
        np.where(np.asarray(z_lo) >= 0, lo - hi, 1.0 - lo - hi),
    )
    return mass


def normal_mass(z_lo: ArrayLike, z_hi: ArrayLike) -> FloatArray:
    """P(z_lo < Z <= z_hi) for a standard normal Z, accurate in both tails."""
    return mass_between(z_lo, small_tail(z_lo), z_hi, small_tail(z_hi))


def truncated_normal_quantile(z_lo: float, z_hi: float, u: FloatArray) -> FloatArray:
    """Z ~ Normal(0, 1) conditioned on [z_lo, z_hi] at probabilities `u`: Φ⁻¹(Φ(z_lo) +
    u (Φ(z_hi) − Φ(z_lo))), in the lower tail (an upper-tail interval is mirrored), where Φ is
    an erfc without cancellation, so even intervals far out in a tail are exact (up to
    double rounding)."""
    if z_lo >= 0:  # mirror: -Z on [-z_hi, -z_lo]
        return -truncated_normal_quantile(-z_hi, -z_lo, 1.0 - u)
    p_lo, p_hi = (0.5 * math.erfc(-z / _SQRT2) for z in (z_lo, z_hi))
    p = p_lo + u * (p_hi - p_lo)
    p = np.clip(p, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0))
    z: FloatArray = np.clip(np.asarray(_inverse_cdf(p), dtype=float), z_lo, z_hi)
    return z
