"""Profile fits and validation (analytic/profiles.py) against closed-form cases, and the
length distributions' quantiles and higher moments (analytic/distributions.py) as properties:
the quantile inverts the CDF given by partial_moments' order 0, and every moment order agrees
with numerical integration and with the mean of a large sample drawn through `sample`."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.decode_point import DecodePoint, decode_point_for_slo
from prfaas_plan.analytic.distributions import Histogram, ObservedLengths
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.profiles import fit_curve, validate_table
from prfaas_plan.errors import InfeasibleError, ProfileError

TOKENS = [1024.0, 8192.0, 32768.0, 131072.0]


def fit(tokens, values, degree=2, **kw):
    return fit_curve(
        tokens, values, degree=degree, quantity="prefill_latency_s", provenance="measured",
        source="t.csv", **kw,
    )  # fmt: skip


# --- fits ---------------------------------------------------------------------------------


def test_a_quadratic_is_fitted_exactly():
    a, b, c = 0.05, 2e-5, 3e-11
    values = [a + b * x + c * x**2 for x in TOKENS]
    curve = fit(TOKENS, values)
    np.testing.assert_allclose(curve.coefficients, (a, b, c), rtol=1e-9)
    assert curve.degree == 2 and curve.max_relative_residual < 1e-12
    assert (curve.table_min_tokens, curve.table_max_tokens) == (1024.0, 131072.0)
    assert (curve.quantity, curve.provenance, curve.source) == (
        "prefill_latency_s",
        "measured",
        "t.csv",
    )


def test_an_affine_kv_size_is_fitted_exactly_and_extrapolates_as_the_same_line():
    fixed, per_token = 3.0e7, 7.0e4
    values = [fixed + per_token * x for x in TOKENS]
    curve = fit_curve(
        TOKENS, values, degree=1, quantity="kv_cache_bytes", provenance="derived", source="kv.csv"
    )
    np.testing.assert_allclose(curve.coefficients, (fixed, per_token), rtol=1e-10)
    # outside the table the curve is the fitted polynomial itself (callers report it)
    for x in (10.0, 500_000.0):
        assert curve(x) == pytest.approx(fixed + per_token * x, rel=1e-10)
    np.testing.assert_allclose(curve(np.array(TOKENS)), values, rtol=1e-12)


def test_the_residual_is_the_largest_relative_error():
    """Four points on a line, one lifted by 10%: a degree-1 least-squares fit, checked
    against numpy's own lstsq solution."""
    x = np.array([1.0, 2.0, 3.0, 4.0]) * 1000
    y = np.array([2.0, 3.0, 4.4, 5.0])
    curve = fit(x, y, degree=1)
    design = np.column_stack([np.ones_like(x), x])
    coefficients = np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(curve.coefficients, coefficients, rtol=1e-10)
    want = np.max(np.abs(design @ coefficients - y) / y)
    assert curve.max_relative_residual == pytest.approx(want, rel=1e-10)
    assert curve.max_relative_residual > 0.01


def test_expectation_and_second_moment_from_partial_moments():
    """y(l) = 1 + 2l: E[y; A] = m0 + 2 m1 and E[y²; A] = m0 + 4 m1 + 4 m2, by hand."""
    curve = fit([1.0, 2.0, 3.0], [3.0, 5.0, 7.0], degree=1)
    moments = np.array([[0.5, 0.25], [2.0, 1.0], [9.0, 5.0]])
    np.testing.assert_allclose(curve.expectation(moments), [0.5 + 4.0, 0.25 + 2.0])
    np.testing.assert_allclose(curve.second_moment(moments), [0.5 + 8 + 36, 0.25 + 4 + 20])


def test_a_fit_that_is_not_physical_is_refused():
    # the least-squares parabola through these points falls below zero before the table
    with pytest.raises(
        ProfileError, match=r"t\.csv: the degree-2 least-squares fit of prefill_latency_s"
    ):
        fit([1000.0, 2000.0, 3000.0, 4000.0], [5.0, 5.0, 5.1, 9.0])
    # fine up to the table, but falling beyond it where the caller needs it
    values = [1.0 + 1e-3 * x - 1e-9 * x**2 for x in (100.0, 200.0, 300.0)]
    fit([100.0, 200.0, 300.0], values)
    with pytest.raises(ProfileError, match=r"non-decreasing on \[0, 1e\+06\] tokens"):
        fit([100.0, 200.0, 300.0], values, check_up_to_tokens=1e6)


def test_a_fit_needs_more_rows_than_its_degree():
    with pytest.raises(ProfileError, match="a degree-2 fit needs at least 3 rows, found 2"):
        fit([1.0, 2.0], [1.0, 2.0])


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, values, message",
    [
        ([1.0], [1.0], "needs at least 2 data rows, found 1"),
        ([1.0, 2.0, 2.0], [1.0, 2.0, 3.0], "input_tokens must be strictly increasing .* found 2 after 2 in data row 3"),
        ([2.0, 1.0], [1.0, 2.0], "input_tokens must be strictly increasing .* found 1 after 2 in data row 2"),
        ([1.0, 2.0], [2.0, 1.0], "latency_s must not decrease with input_tokens, found 1 at input_tokens 2 after 2 at 1 .data row 2."),
        ([1.0, math.nan], [1.0, 2.0], "input_tokens must be finite and > 0, found nan in data row 2"),
        ([1.0, 2.0], [1.0, math.inf], "latency_s must be finite and > 0, found inf in data row 2"),
        ([1.0, 2.0], [-1.0, 2.0], "latency_s must be finite and > 0, found -1 in data row 1"),
        ([0.0, 2.0], [1.0, 2.0], "input_tokens must be finite and > 0, found 0 in data row 1"),
    ],
)  # fmt: skip
def test_broken_tables_are_rejected_naming_the_field(tokens, values, message):
    with pytest.raises(ProfileError, match="^p.csv: " + message):
        validate_table(tokens, values, source="p.csv", value_name="latency_s")


def test_a_valid_table_passes_and_the_key_name_is_used_in_messages():
    validate_table([1, 2, 4], [1.0, 1.0, 3.0], source="d.csv", value_name="latency_s")  # ties ok
    with pytest.raises(ProfileError, match="batch_size must be strictly increasing"):
        validate_table([4, 2], [1.0, 2.0], source="d.csv", value_name="s", key_name="batch_size")


def test_decode_point_is_the_largest_batch_meeting_the_slo():
    batches, steps = [1, 8, 32, 64], [0.010, 0.012, 0.020, 0.040]
    assert decode_point_for_slo(
        batches, steps, slo_tokens_per_s=50.0, source="d.csv"
    ) == DecodePoint(32, 0.020, "d.csv")  # 1 / 50 = 0.020 s exactly: the boundary counts
    assert (
        decode_point_for_slo(batches, steps, slo_tokens_per_s=10.0, source="d.csv").batch_size == 64
    )
    with pytest.raises(
        InfeasibleError,
        match=r"fastest profiled step is 0\.01 s at batch 1; relax slo\.decode_tokens_per_s",
    ):
        decode_point_for_slo(batches, steps, slo_tokens_per_s=200.0, source="d.csv")
    with pytest.raises(ProfileError, match="decode_step_latency_s must not decrease"):
        decode_point_for_slo([1, 2], [0.02, 0.01], slo_tokens_per_s=10.0, source="d.csv")


# --- distributions: quantile, sample and moments of any order -----------------------------

DISTRIBUTIONS = [
    TruncatedLogNormal(9.9, 1.0, 128.0, 131_072.0),
    TruncatedLogNormal(4.0, 0.5, 1000.0, 5000.0),  # the interval far out in the upper tail
    Histogram((100.0, 1000.0, 8000.0, 60_000.0), (1.0, 3.0, 2.0)),
    ObservedLengths(np.random.default_rng(0).integers(100, 100_000, 2000)),
]
IDS = ["lognormal", "lognormal-tail", "histogram", "observed"]


@pytest.mark.parametrize("d", DISTRIBUTIONS, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(u=st.floats(0.0, 1.0, exclude_max=True))
def test_quantile_inverts_the_cdf_of_the_order_zero_moment(d, u):
    """F(Q(u)) >= u >= F(Q(u)−) with F(x) = partial_moments(−inf, x)[0]: Q is the inverse of
    the CDF (exactly for continuous laws, the generalised inverse for observed lengths)."""
    x = float(d.quantile(u))
    assert d.min_tokens <= x <= d.max_tokens
    cdf = float(d.partial_moments(-np.inf, x, max_order=0)[0])
    if isinstance(d, ObservedLengths):
        below = float(d.partial_moments(-np.inf, np.nextafter(x, 0.0), max_order=0)[0])
        assert below <= u + 1e-12 and u <= cdf + 1e-12
    else:
        assert cdf == pytest.approx(u, abs=1e-9)


@pytest.mark.parametrize("d", DISTRIBUTIONS, ids=IDS)
@settings(max_examples=25, deadline=None)
@given(
    lo=st.floats(0.0, 1.0),
    width=st.floats(0.0, 1.0),
)
def test_moments_of_every_order_match_numerical_integration(d, lo, width):
    """E[L^k; a < L <= b] for k <= 4 against a midpoint rule over the quantile function:
    E[L^k; Q(u1) < L <= Q(u2)] = ∫_{u1}^{u2} Q(u)^k du (continuous laws)."""
    if isinstance(d, ObservedLengths):
        return  # its moments are exact sums, checked in test_queueing
    u1, u2 = lo, min(lo + width, 1.0)
    a, b = float(d.quantile(u1)), float(d.quantile(u2)) if u2 < 1 else d.max_tokens
    m = d.partial_moments(a, b, max_order=4)
    cells = 20_000
    u = u1 + (np.arange(cells) + 0.5) / cells * (u2 - u1)
    x = d.quantile(u) / d.max_tokens  # scaled: L^4 stays moderate
    for k in range(5):
        want = (x**k).mean() * (u2 - u1)
        assert m[k] / d.max_tokens**k == pytest.approx(want, rel=2e-3, abs=1e-7)


@pytest.mark.parametrize("d", DISTRIBUTIONS, ids=IDS)
def test_stratified_samples_reproduce_the_moments(d):
    """The mean of L^k over 200K stratified draws of `sample` against partial_moments."""
    x = d.sample(np.random.default_rng(5), 200_000, stratified=True) / d.max_tokens
    m = d.partial_moments(-np.inf, np.inf, max_order=4)
    for k in range(5):
        assert (x**k).mean() == pytest.approx(m[k] / d.max_tokens**k, rel=2e-3)


def test_samples_are_reproducible_and_a_negative_count_is_refused():
    d = DISTRIBUTIONS[0]
    a = d.sample(np.random.default_rng(1), 100)
    np.testing.assert_array_equal(a, d.quantile(np.random.default_rng(1).random(100)))
    assert d.sample(np.random.default_rng(1), 0).size == 0
    with pytest.raises(Exception, match="the number of requests must be >= 0, got -1"):
        d.sample(np.random.default_rng(1), -1)


@settings(max_examples=200, deadline=None)
@given(
    coefficients=st.lists(
        st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False), min_size=1, max_size=4
    ),
    tokens=st.lists(st.floats(0, 1e6, allow_nan=False), min_size=0, max_size=6),
)
def test_a_curve_is_numpys_polyval_bit_for_bit(coefficients, tokens):
    """FittedCurve.__call__ is Horner's rule written out (the optimiser's inner loop); it must
    give numpy's polyval to the last bit, on arrays, on scalars and at an infinite length."""
    from prfaas_plan.analytic.profiles import FittedCurve

    curve = FittedCurve("y", tuple(coefficients), 1.0, 2.0, 0.0, "measured", "t.csv")
    for x in (np.array(tokens), np.array(tokens).reshape(-1, 1), 7.5, np.inf):
        with np.errstate(invalid="ignore"):  # inf · 0 in both
            expected = np.polynomial.polynomial.polyval(np.asarray(x, float), coefficients)
            got = curve(x)
        assert np.shape(got) == np.shape(expected)
        assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.floats(1e-3, 1e5, allow_nan=False), min_size=1, max_size=12),
    start=st.floats(0, 1e5, allow_nan=False),
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=13, max_size=13),
    degree=st.integers(0, 3),
)
def test_fits_and_squares_are_numpy_polynomials_bit_for_bit(steps, start, values, degree):
    """The least squares, Horner and self-product of analytic/profiles.py (written there so
    numpy.polynomial stays off the plan's start-up) give numpy.polynomial's numbers to the
    last bit: polyfit on strictly increasing lengths (as validated tables have), polyval, and
    polymul(c, c), trailing zeros trimmed as numpy trims them."""
    from prfaas_plan.analytic import profiles

    tokens = start + np.cumsum([0.0, *steps])
    y = np.array(values[: tokens.size])
    assume(tokens.size > degree and np.all(np.diff(tokens) > 0))  # a table the fit takes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = np.polynomial.polynomial.polyfit(tokens, y, degree)
    got, rank = profiles._least_squares(tokens, y, degree)
    assert got.tobytes() == expected.tobytes()
    warned = any(issubclass(w.category, np.exceptions.RankWarning) for w in caught)
    assert (rank < degree + 1) == warned  # where polyfit warns, fit_curve refuses
    assert profiles.horner(got, tokens).tobytes() == (
        np.polynomial.polynomial.polyval(tokens, expected).tobytes()
    )
    for c in (got, np.append(got, [0.0, 0.0]), np.zeros(2), np.array([1.0, 1e-200])):
        assert profiles.squared(c) == np.polynomial.polynomial.polymul(c, c).tolist()


def test_a_bundled_tables_fit_is_numpys_polyfit():
    """The case study's H200 prefill table, fitted at its degree: numpy's polyfit exactly."""
    from prfaas_plan.analytic.profiles import PREFILL_LATENCY_DEGREE
    from prfaas_plan.inputs.catalog import Catalog

    catalog = Catalog.open()
    curve = catalog.prefill_latency("internal-1t-hybrid", "h200", 8)
    csv = catalog.data_dir / "profiles/internal-1t-hybrid/prefill/h200-x8/prefill_latency.csv"
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    expected = np.polynomial.polynomial.polyfit(table[:, 0], table[:, 1], PREFILL_LATENCY_DEGREE)
    assert curve.coefficients == tuple(expected.tolist())


def test_a_table_whose_lengths_do_not_determine_the_fit_is_refused():
    """Lengths too close together for their size (numpy's polyfit would warn that the fit
    may be poorly conditioned): one ProfileError naming the table, not a fit."""
    with pytest.raises(ProfileError, match=r"t\.csv: the lengths do not determine a degree-2 fit"):
        fit_curve([1e8, 1e8 + 1, 1e8 + 2, 1e8 + 3], [1.0, 2.0, 3.0, 4.0], degree=2,
                  quantity="prefill_latency_s", provenance="measured", source="t.csv")  # fmt: skip
