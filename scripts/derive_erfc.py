"""Derive the coefficients of prfaas_plan/analytic/erfc.py in 60-digit arithmetic (mpmath) and
write them to prfaas_plan/analytic/erfc_table.py; tests/analytic/test_erfc.py derives them again
and compares, bit for bit.

    python scripts/derive_erfc.py

The scheme is classical and every number is derived here (none is taken from another library):
erfc(x) = exp(−x²) erfcx(x) for x >= 0, with ln erfcx(x) (analytic on a disc of radius ~2.4
around 0 and on the whole right half-plane, the zeros of erfc lying at arg z ≈ ±3π/4; no
cancellation: it is the log of a slowly varying function) interpolated at Chebyshev points of
the first kind on each interval (Trefethen, Approximation Theory and Approximation Practice,
SIAM 2013, ch. 4 and 8: the error is ~ρ^-n for a function analytic in the Bernstein ellipse of
parameter ρ), then written in the monomial basis of the interval's own variable s ∈ [-1, 1]
(Chebyshev polynomials expanded by their three-term recurrence), plus a constant c_k (a
multiple of 2^-10) so that the polynomial stays small and its rounding does not show.

Intervals: [0, 17/128), then 16 an octave, [2^e (1 + j/16), 2^e (1 + (j+1)/16)) up to 32, so
the interval of x is the top bits of the double (exponent and 4 bits of mantissa), found
without a search. Degree 9 on every interval: `main` reports the largest
interpolation error on a fine grid (1.7e-18: below 2^-58, 0.02 ulp of the result).
"""

import itertools
from pathlib import Path

import mpmath

mpmath.mp.dps = 60

LAST_X = 27.3  # erfc(27.3) < 2^-1075: rounds to 0 (erfc(x) is subnormal past ~26.55)
OCTAVES = range(-3, 5)  # [1/8, 32), after [0, 17/128): the intervals cover [0, LAST_X)
SUBDIVISIONS = 16  # intervals an octave
DEGREE = 9
TABLE = Path(__file__).resolve().parent.parent / "prfaas_plan/analytic/erfc_table.py"


def edges() -> list[float]:
    """0, then the octave edges after the first (every x < 1/8 has the bits of interval 0)."""
    octave_edges = [
        float(mpmath.ldexp(1 + mpmath.mpf(j) / SUBDIVISIONS, e))
        for e in OCTAVES
        for j in range(SUBDIVISIONS)
    ]
    return [0.0, *octave_edges[1:], float(2 ** (OCTAVES[-1] + 1))]


def ln_erfcx(x: mpmath.mpf) -> mpmath.mpf:
    return mpmath.log(mpmath.erfc(x)) + x * x


def interval(lo: float, hi: float) -> tuple[float, float, float, list[float]]:
    """(centre, 1/half-width, c, monomial coefficients in s = (x − centre)/half-width, lowest
    first) of ln erfcx(x) + c on [lo, hi]."""
    centre = (lo + hi) / 2
    inverse_half = 2.0 / (hi - lo)  # a power of two: exact
    c = float(mpmath.nint(-ln_erfcx(mpmath.mpf(centre)) * 1024) / 1024)
    n = DEGREE + 1
    nodes = [mpmath.cos(mpmath.pi * (j + 0.5) / n) for j in range(n)]
    values = [ln_erfcx(centre + s / inverse_half) + c for s in nodes]
    # Chebyshev coefficients by the discrete cosine sum, then the monomial basis
    cheb = [
        2 / mpmath.mpf(n) * sum(v * mpmath.chebyt(k, s) for v, s in zip(values, nodes, strict=True))
        for k in range(n)
    ]
    cheb[0] /= 2
    # T_k in powers of its argument (T_{k+1} = 2 s T_k − T_{k−1})
    chebyshev = [[mpmath.mpf(1)], [mpmath.mpf(0), mpmath.mpf(1)]]
    while len(chebyshev) < n:
        previous, last = chebyshev[-2], chebyshev[-1]
        chebyshev.append(
            [2 * (last[p - 1] if p >= 1 else 0) - (previous[p] if p < len(previous) else 0)
             for p in range(len(last) + 1)]
        )  # fmt: skip
    monomial = [
        sum(a * t[power] for a, t in zip(cheb, chebyshev, strict=True) if power < len(t))
        for power in range(n)
    ]
    return centre, inverse_half, c, [float(m) for m in monomial]


def fit_error(lo: float, hi: float, points: int = 100) -> float:
    """The largest |polynomial (double coefficients, exact arithmetic) − (ln erfcx + c)| on
    `points` + 1 equally spaced points of [lo, hi]."""
    centre, inverse_half, c, coefficients = interval(lo, hi)
    worst = mpmath.mpf(0)
    for i in range(points + 1):
        x = lo + (hi - lo) * mpmath.mpf(i) / points
        s = (x - centre) * inverse_half
        value = sum(mpmath.mpf(a) * s**j for j, a in enumerate(coefficients))
        worst = max(worst, abs(value - ln_erfcx(x) - c))
    return float(worst)


def derive() -> dict[str, object]:
    parts = [interval(lo, hi) for lo, hi in itertools.pairwise(edges())]
    return {
        "LAST_X": LAST_X,
        "EDGES": tuple(edges()),
        "CENTRES": tuple(p[0] for p in parts),
        "INVERSE_HALF_WIDTHS": tuple(p[1] for p in parts),
        "OFFSETS": tuple(p[2] for p in parts),
        # COEFFICIENTS[j][k]: the coefficient of s^j on interval k
        "COEFFICIENTS": tuple(tuple(p[3][j] for p in parts) for j in range(DEGREE + 1)),
    }


def source() -> str:
    lines = [
        '"""Coefficients of analytic/erfc.py, written by scripts/derive_erfc.py (which says how they',
        'are derived): do not edit by hand, run the script."""',
        "",
    ]
    lines += [f"{name} = {value!r}" for name, value in derive().items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    TABLE.write_text(source())
    print(f"wrote {TABLE}")
    worst = max(fit_error(lo, hi) for lo, hi in itertools.pairwise(edges()))
    print(f"largest interpolation error: {worst:.2e} (2^-58 = {2.0**-58:.2e})")


if __name__ == "__main__":
    main()
