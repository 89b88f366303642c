"""analytic.erfc against the exact value (60-digit mpmath) and against `math.erfc`, over the whole
double range: dense sampling of [-30, 30], the edge cases (subnormals, ±inf, nan, the point where
erfc leaves the normal range, ~26.55, and where it reaches 0, ~27.23, the edges of every
interval of the scheme) and hypothesis over every double.

`math.erfc` is glibc's here (fdlibm's scheme), itself up to ~3 ulp off the exact value between
1 and 2: where the two differ by more than 2 ulp, the exact value decides, and the test asserts
that ours is within 2 ulp of it and math.erfc more than 1 ulp off it.
"""

import importlib.util
import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic import erfc_table
from prfaas_plan.analytic.erfc import erfc
from prfaas_plan.analytic.normal import small_tail

ULP_BOUND = 2.0
MIN_SUBNORMAL = 5e-324


def exact(x: float) -> mpmath.mpf:
    """erfc(x) to 60 digits; past |x| = 30 it is 0 or 2 to within 1e-390 (mpmath's own series
    overflow on |x| ~ 1e154)."""
    if abs(x) > 30:
        return mpmath.mpf(0 if x > 0 else 2)
    with mpmath.workdps(60):
        return mpmath.erfc(mpmath.mpf(x))


def ulps_from_exact(value: float, x: float) -> float:
    """|value − erfc(x)| in units in the last place of the exact value rounded to a double
    (the smallest subnormal in the subnormal range and at 0)."""
    truth = exact(x)
    with mpmath.workdps(60):
        return float(abs(mpmath.mpf(value) - truth) / math.ulp(float(truth)))


def ulps_apart(ours: np.ndarray, reference: np.ndarray) -> np.ndarray:
    spacing = np.vectorize(math.ulp, otypes=[float])(reference)
    return np.abs(ours - reference) / spacing


def test_coefficients_are_the_derived_ones() -> None:
    """The table is what scripts/derive_erfc.py derives (no hand edit, no copied number)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "derive_erfc.py"
    spec = importlib.util.spec_from_file_location("derive_erfc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["derive_erfc"] = module
    spec.loader.exec_module(module)
    for name, value in module.derive().items():
        assert getattr(erfc_table, name) == value, name


def test_dense_sampling_of_minus_30_to_30_against_math_erfc() -> None:
    x = np.linspace(-30.0, 30.0, 1_200_001)  # step 5e-5, through every interval many times
    ours = erfc(x)
    reference = np.fromiter(map(math.erfc, x.tolist()), float, count=x.size)
    apart = ulps_apart(ours, reference)
    assert np.isfinite(ours).all() and (ours >= 0).all() and (ours <= 2).all()
    disagree = np.flatnonzero(apart > ULP_BOUND)
    assert disagree.size < x.size // 1000  # math.erfc's error, rare: decided exactly below
    for i in disagree:
        point = float(x[i])
        assert ulps_from_exact(float(ours[i]), point) <= ULP_BOUND, point
        assert ulps_from_exact(float(reference[i]), point) > 1.0, point


def test_against_the_exact_value_on_every_scale() -> None:
    """Log-uniform |x| from 1e-300 to 27.3, both signs, against 60-digit mpmath."""
    rng = np.random.default_rng(20260523)
    magnitudes = np.exp(rng.uniform(math.log(1e-300), math.log(27.3), 1500))
    x = np.concatenate([magnitudes, -magnitudes[:300], rng.uniform(0.4, 27.3, 1500)])
    ours = erfc(x)
    worst = max(ulps_from_exact(float(o), float(v)) for o, v in zip(ours, x, strict=False))
    assert worst <= ULP_BOUND


def _interval_edges() -> list[float]:
    points = []
    for edge in (*erfc_table.EDGES, erfc_table.LAST_X):
        points += [math.nextafter(edge, 0.0), edge, math.nextafter(edge, math.inf)]
    return points


@pytest.mark.parametrize(
    "x, expected",
    [
        (math.nan, math.nan),
        (math.inf, 0.0),
        (-math.inf, 2.0),
        (0.0, 1.0),
        (-0.0, 1.0),
        (MIN_SUBNORMAL, 1.0),
        (-MIN_SUBNORMAL, 1.0),
        (2.2250738585072014e-308, 1.0),  # the smallest normal
        (1e-20, 1.0),
        (1e300, 0.0),
        (-1e300, 2.0),
        (-6.0, 2.0),  # 2 − 2e-17 rounds to 2
        (27.3, 0.0),  # erfc(27.3) < 2^-1075
        (27.2264, math.erfc(27.2264)),  # the last nonzero: a few smallest subnormals
    ],
)
def test_edge_cases(x: float, expected: float) -> None:
    got = float(erfc(x))
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected or abs(got - expected) <= ULP_BOUND * math.ulp(expected)


@pytest.mark.parametrize(
    "x",
    [
        *_interval_edges(),
        26.5432,  # erfc leaves the normal range (< 2.2e-308) here
        26.55,
        26.6,
        27.0,
        27.226,
        -0.5,
        -0.125,
        0.1328125,
        -1e-10,
        1e-300,
    ],
)
def test_edges_of_the_scheme_and_the_underflow_point(x: float) -> None:
    got = float(erfc(x))
    assert ulps_from_exact(got, x) <= ULP_BOUND
    assert abs(got - math.erfc(x)) <= ULP_BOUND * math.ulp(math.erfc(x)) or (
        ulps_from_exact(math.erfc(x), x) > 1.0
    )


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False))
def test_every_double(x: float) -> None:
    """Any double (hypothesis tries the extremes: subnormals, ±max, ±inf): within 2 ulp of the
    exact value, and of math.erfc up to math.erfc's own error."""
    got = float(erfc(x))
    if math.isinf(x):
        assert got == (0.0 if x > 0 else 2.0)
        return
    assert ulps_from_exact(got, x) <= ULP_BOUND
    reference = math.erfc(x)
    apart = abs(got - reference) / math.ulp(reference)
    assert apart <= ULP_BOUND + ulps_from_exact(reference, x)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-40, 40), min_size=1, max_size=50), st.integers(0, 49))
def test_an_element_does_not_depend_on_its_array(values: list[float], pick: int) -> None:
    """The same bits for an element alone, in any array, in any shape: a batched computation
    gives the numbers of one at a time."""
    x = np.array(values)
    i = pick % x.size
    together = erfc(x)
    assert erfc(x[i]).tobytes() == together[i].tobytes()
    assert erfc(x[::-1])[x.size - 1 - i].tobytes() == together[i].tobytes()
    assert erfc(np.tile(x, 100)).reshape(100, -1)[7, i].tobytes() == together[i].tobytes()


def test_small_tail_is_half_erfc_of_abs_z_over_root_2() -> None:
    z = np.array([-40.0, -8.0, -1.0, 0.0, 1.0, 8.0, 38.5, 40.0])
    expected = [0.5 * float(exact(abs(v) / math.sqrt(2.0))) for v in z]
    got = small_tail(z)
    for g, e in zip(got, expected, strict=False):
        assert g == e or abs(g - e) <= 3 * math.ulp(e)  # + the rounding of |z|/√2 and of 1/2
