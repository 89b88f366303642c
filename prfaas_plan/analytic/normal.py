"""The standard normal law, accurate in both tails (for the truncated log-normal).

Φ is evaluated as erfc of |z| (one erfc per element, no cancellation in the tail), masses
between two points as a difference of whichever tails are small, and the inverse CDF of a
normal truncated to [z_lo, z_hi] in the tail that holds the interval. erfc is analytic.erfc's
(vectorised, within 2 ulp of the exact value), the inverse `statistics.NormalDist`'s:
scipy.special would cost 0.2 s of start-up.
"""

import math
from functools import cache

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.analytic.erfc import erfc

_SQRT2 = math.sqrt(2.0)


@cache
def _inverse_cdf() -> np.ufunc:
    """Φ⁻¹ element by element, `statistics.NormalDist`'s (imported when first needed: the plan
    path never is, and `statistics` imports `random` and `hashlib`)."""
    from statistics import NormalDist

    return np.frompyfunc(NormalDist().inv_cdf, 1, 1)


def small_tail(z: ArrayLike) -> FloatArray:
    """min(Φ(z), 1 − Φ(z)) = erfc(|z| / √2) / 2, exact in the tail (one numpy pass)."""
    tail: FloatArray = 0.5 * erfc(np.abs(np.asarray(z, float)) / _SQRT2)
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


def small_tails(*zs: ArrayLike) -> tuple[FloatArray, ...]:
    """`small_tail` of each argument (each keeps its shape), in one erfc pass over all of
    them: the same numbers as one call each (an element's erfc depends on it alone), without
    the fixed cost of a numpy pass per small array."""
    arrays = [np.asarray(z, float) for z in zs]
    flat = small_tail(np.concatenate([a.ravel() for a in arrays]))
    ends = np.cumsum([a.size for a in arrays])[:-1]
    return tuple(
        part.reshape(a.shape) for part, a in zip(np.split(flat, ends), arrays, strict=True)
    )


def normal_mass(z_lo: ArrayLike, z_hi: ArrayLike) -> FloatArray:
    """P(z_lo < Z <= z_hi) for a standard normal Z, accurate in both tails."""
    tail_lo, tail_hi = small_tails(z_lo, z_hi)
    return mass_between(z_lo, tail_lo, z_hi, tail_hi)


def truncated_normal_quantile(z_lo: float, z_hi: float, u: FloatArray) -> FloatArray:
    """Z ~ Normal(0, 1) conditioned on [z_lo, z_hi] at probabilities `u`: Φ⁻¹(Φ(z_lo) +
    u (Φ(z_hi) − Φ(z_lo))), in the lower tail (an upper-tail interval is mirrored), where Φ is
    an erfc without cancellation, so even intervals far out in a tail are exact (up to
    double rounding)."""
    if z_lo >= 0:  # mirror: -Z on [-z_hi, -z_lo]
        return -truncated_normal_quantile(-z_hi, -z_lo, 1.0 - u)
    p_lo, p_hi = 0.5 * erfc(-np.array([z_lo, z_hi]) / _SQRT2)
    p = p_lo + u * (p_hi - p_lo)
    p = np.clip(p, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0))
    z: FloatArray = np.clip(np.asarray(_inverse_cdf()(p), dtype=float), z_lo, z_hi)
    return z
